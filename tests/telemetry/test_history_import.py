"""History import (issue 47, telemetry/history_import.py): hourly totals from another gateway, validated by
row and field, stored as hour and day rollups marked imported, idempotent, live telemetry kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum
from django.utils import timezone

from telemetry.history_import import import_history
from telemetry.models import AdmissionEvent, DayRollup, HourRollup
from tests.telemetry.helpers import client_for, person

NOW = datetime(2026, 3, 2, 12, 30, tzinfo=UTC)


def _row(hour: datetime, **over) -> dict:
    row = {
        "hour": hour.isoformat().replace("+00:00", "Z"),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "requests": 10,
        "prompt_tokens": 4000,
        "output_tokens": 1000,
        "throttled": 2,
    }
    return row | over


def _hours(n: int, end: datetime = NOW) -> list[datetime]:
    last = end.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    return [last - timedelta(hours=n - 1 - i) for i in range(n)]


def test_rows_become_imported_admit_complete_and_throttle_rollups(fleet):
    (h,) = _hours(1)
    result = import_history([_row(h)], now=NOW)
    assert result.as_dict() == {"accepted": 1, "duplicates": 0, "live": 0, "errors": []}
    rows = {r.decision: r for r in HourRollup.objects.all()}
    assert set(rows) == {"admit", "complete", "throttle"} and all(r.imported for r in rows.values())
    wt = 4000 + 4.0 * 1000  # prompt + w_out × output (the model's weights: w_out 4)
    assert (rows["admit"].requests, rows["admit"].estimated_wt) == (8, wt)
    assert (rows["complete"].prompt_tokens, rows["complete"].output_tokens, rows["complete"].actual_wt) == (
        4000,
        1000,
        wt,
    )
    # the two refused requests at the served ones' mean size
    assert (rows["throttle"].requests, rows["throttle"].estimated_wt) == (2, wt / 8 * 2)
    # and the day rollups, folded from the hours, are imported too
    day = DayRollup.objects.get(decision="admit")
    assert (day.bucket, day.requests, day.imported) == (h.replace(hour=0), 8, True)


def test_a_bad_row_is_refused_by_row_and_field_and_the_rest_is_kept(fleet):
    hours = _hours(8)
    rows = [_row(h) for h in hours]
    rows[1]["model"] = "gpt-ghost"
    rows[3]["output_tokens"] = "many"
    rows[4]["throttled"] = 11
    rows[5]["hour"] = (hours[5] + timedelta(minutes=30)).isoformat()
    rows[6]["hour"] = (NOW - timedelta(days=401)).replace(minute=0, second=0, microsecond=0).isoformat()
    result = import_history(rows, now=NOW)
    assert result.errors == [
        {"index": 1, "field": "model", "message": "unknown model 'gpt-ghost'"},
        {"index": 3, "field": "output_tokens", "message": "must be a whole number"},
        {"index": 4, "field": "throttled", "message": "more than requests"},
        {"index": 5, "field": "hour", "message": "must be on the hour (the hour's start, e.g. 2026-03-01T13:00:00Z)"},
        {"index": 6, "field": "hour", "message": "must be a past hour at most 400 days back"},
    ]
    assert result.accepted == 3
    kept = sorted(HourRollup.objects.filter(decision="admit").values_list("bucket", flat=True))
    assert kept == [hours[0], hours[2], hours[7]]


def test_a_re_import_changes_nothing_and_a_corrected_one_replaces(fleet):
    hours = _hours(30)
    import_history([_row(h) for h in hours], now=NOW)
    before = list(HourRollup.objects.order_by("pk").values())
    again = import_history([_row(h) for h in hours], now=NOW)
    assert (again.accepted, again.duplicates) == (0, 30)
    assert list(HourRollup.objects.order_by("pk").values()) == before
    # a corrected export: the last hour had no throttles after all
    fixed = import_history([_row(hours[-1], throttled=0, requests=8)], now=NOW)
    assert (fixed.accepted, fixed.duplicates) == (1, 0)
    last = HourRollup.objects.filter(bucket=hours[-1])
    assert sorted(last.values_list("decision", "requests")) == [("admit", 8), ("complete", 8)]
    day = hours[-1].replace(hour=0)
    throttled = DayRollup.objects.filter(bucket=day, decision="throttle").aggregate(n=Sum("requests"))["n"]
    assert throttled == 2 * sum(1 for h in hours if h.replace(hour=0) == day) - 2


def test_an_hour_live_telemetry_covers_is_kept_as_measured(fleet):
    h = _hours(1)[0]
    HourRollup.objects.create(
        bucket=h, tenant="acme", model="llama-test", region="us-test", traffic_class="reserved", decision="admit",
        requests=99, estimated_wt=1.0,
    )  # fmt: skip
    result = import_history([_row(h), _row(h - timedelta(hours=1))], now=NOW)
    assert (result.accepted, result.live) == (1, 1)
    assert HourRollup.objects.get(bucket=h, decision="admit").requests == 99
    assert not HourRollup.objects.filter(bucket=h, imported=True).exists()


def test_the_api_is_for_operators_and_takes_json_or_csv(fleet):
    hours = _hours(3, timezone.now())
    body = {"rows": [_row(hours[0]), _row(hours[1], tenant="ghost")]}
    for who in ("gw", "viewer"):
        user = person(who, platform="gateway") if who == "gw" else person(who, tenant=fleet.acme, role="viewer")
        r = client_for(user).post("/api/v1/telemetry/history", body, content_type="application/json")
        assert r.status_code == 403
    op = client_for(fleet.operator)
    r = op.post("/api/v1/telemetry/history", body, content_type="application/json")
    assert r.status_code == 200
    assert r.json() == {
        "accepted": 1,
        "duplicates": 0,
        "live": 0,
        "errors": [{"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"}],
    }
    header = "hour,tenant,model,region,traffic_class,requests,prompt_tokens,output_tokens,throttled\n"
    csv = header + f"{hours[2].isoformat()},acme,llama-test,us-test,reserved,5,100,50,0\n"
    r = op.post("/api/v1/telemetry/history", csv, content_type="text/csv")
    assert (r.status_code, r.json()["accepted"]) == (200, 1)
    r = op.post("/api/v1/telemetry/history", "hour,tenant\n", content_type="text/csv")
    assert r.status_code == 400 and "missing model" in str(r.json())
    # every row bad: 400, nothing stored
    r = op.post("/api/v1/telemetry/history", {"rows": [_row(hours[0], requests=-1)]}, content_type="application/json")
    assert r.status_code == 400
    assert r.json()["errors"] == [{"index": 0, "field": "requests", "message": "must be a non-negative number"}]


def test_the_command_names_bad_lines_and_keeps_the_rest(fleet, tmp_path):
    hours = _hours(3, timezone.now())
    lines = ["hour,tenant,model,region,traffic_class,requests,prompt_tokens,output_tokens,throttled"]
    lines += [f"{h.isoformat()},acme,llama-test,us-test,reserved,5,100,50,1" for h in hours]
    lines[2] = lines[2].replace(",reserved,", ",platinum,")
    f = tmp_path / "atlas.csv"
    f.write_text("\n".join(lines) + "\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 bad row"):
        call_command("import_history", str(f), stdout=out, stderr=err)
    assert "2 hour(s) imported" in out.getvalue()
    assert f"{f}: line 3: traffic_class: unknown traffic class 'platinum'" in err.getvalue()
    assert HourRollup.objects.filter(decision="admit").count() == 2
    assert AdmissionEvent.objects.count() == 0


def test_imported_throttles_carry_imported_and_are_blamed_on_no_one(fleet):
    """The other gateway recorded refusals, not their causes: the throttle rows say IMPORTED (responsible
    unknown), the statement counts them apart from the tenant's and the platform's, and reconciliation does
    not count them as platform throttles (with reason "" the statement once put them on the platform)."""
    from entitlements.reasons import IMPORTED, REASONS
    from entitlements.services import entitlement_grant
    from reconciliation.figures import PLATFORM_REASONS
    from telemetry.statement import statement
    from tests import factories as f

    hours = _hours(3)
    import_history([_row(h) for h in hours], now=NOW)
    assert set(HourRollup.objects.filter(decision="throttle").values_list("reason", flat=True)) == {IMPORTED}
    assert set(DayRollup.objects.filter(decision="throttle").values_list("reason", flat=True)) == {IMPORTED}
    assert REASONS[IMPORTED].responsible == "unknown" and IMPORTED not in PLATFORM_REASONS
    kw = f.grant_kwargs(fleet.pool_a, fleet.acme, 10, start=hours[0] - timedelta(days=1), days=30)
    ent = entitlement_grant(actor=None, reason="test", **kw)
    req = statement(ent, hours[0], hours[-1] + timedelta(hours=1))["requests"]
    assert req["throttled"]["by_party"] == {"tenant": 0, "platform policy": 0, "platform": 0, "unknown": 6}
    assert (req["throttled"]["tenant"], req["throttled"]["platform"]) == (0, 0)
