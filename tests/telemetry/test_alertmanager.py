"""Alertmanager's webhook (issue 24): validation by field, episodes by (fingerprint, startsAt), unbound pools."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from telemetry.alert_rules import is_supply
from telemetry.models import PoolAlert
from telemetry.selectors import pool_alerts, supply_alerts_down
from tests.telemetry.helpers import client_for, person

URL = "/api/v1/telemetry/alertmanager"
T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GEN_UP = "http://prom:9090/graph?g0.expr=up%7Bjob%3D%22hyperion%22%7D+%3D%3D+0&g0.tab=1"


def alert(name="ServiceDown", *, status="firing", pool="pool-a", fp="aaa1", instance="10.0.0.1:8000", **kw):
    labels = {"alertname": name, "instance": instance, "severity": "critical"}
    if pool is not None:
        labels["pool"] = pool
    a = {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{name} on {instance}"},
        "startsAt": "2026-11-30T12:00:00.123456789Z",
        "endsAt": "2026-11-30T12:05:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prom:9090/graph?g0.expr=x",
        "fingerprint": fp,
    }
    a.update(kw)
    return a


def hook(*alerts, status="firing"):
    return {
        "version": "4",
        "groupKey": '{}:{alertname="x"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "headroom",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://am:9093",
        "alerts": list(alerts),
    }


def _post(client, body):
    return client.post(URL, body, content_type="application/json")


def test_supply_rule_reads_the_name_list_or_an_up_is_zero_expression(settings):
    settings.ALERTMANAGER_SUPPLY_ALERTS = ["ServiceDown", "NodeLost"]
    assert is_supply("ServiceDown") and is_supply("NodeLost")
    assert not is_supply("GPUMemoryHigh", "http://prom/graph?g0.expr=gpu_memory_allocated_bytes+%3E+0.9")
    assert is_supply("Whatever", GEN_UP)
    assert is_supply("Whatever", "http://prom/graph?g0.expr=up+%3D%3D+0")
    assert not is_supply("Whatever", "http://prom/graph?g0.expr=up+%3D%3D+1")
    assert not is_supply("Whatever", "http://prom/graph?g0.expr=sum(up)+%3D%3D+0")


def test_firing_then_resolved_is_one_episode_and_replays_change_nothing(fleet):
    gw = client_for(person("am", platform="gateway"))
    r = _post(gw, hook(alert(), alert("GPUMemoryHigh", fp="bbb2")))
    assert r.status_code == 200, r.content
    assert r.json() == {"accepted": 2, "unchanged": 0, "unbound": [], "errors": []}
    assert _post(gw, hook(alert(), alert("GPUMemoryHigh", fp="bbb2"))).json()["unchanged"] == 2
    row = PoolAlert.objects.get(fingerprint="aaa1")
    assert (row.pool, row.kind, row.state, row.ends_at) == (fleet.pool_a, "supply", "firing", None)
    assert row.starts_at == datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    assert PoolAlert.objects.get(fingerprint="bbb2").kind == "load"

    resolved = _post(gw, hook(alert(status="resolved"), status="resolved"))
    assert resolved.json()["accepted"] == 1
    row.refresh_from_db()
    assert (row.state, row.ends_at) == ("resolved", datetime(2026, 11, 30, 12, 5, tzinfo=UTC))
    # Alertmanager may deliver an older firing notification after the resolved one: it stays resolved.
    assert _post(gw, hook(alert())).json() == {"accepted": 0, "unchanged": 1, "unbound": [], "errors": []}
    row.refresh_from_db()
    assert row.state == "resolved"
    assert PoolAlert.objects.count() == 2


def test_a_new_firing_after_a_resolve_is_a_new_episode(fleet):
    gw = client_for(person("am", platform="gateway"))
    _post(gw, hook(alert(status="resolved")))
    _post(gw, hook(alert(startsAt="2026-11-30T13:00:00Z")))
    assert sorted(PoolAlert.objects.values_list("state", flat=True)) == ["firing", "resolved"]
    assert supply_alerts_down(fleet.pool_a.pk) == 1


def test_bad_alerts_are_named_and_good_ones_kept(fleet):
    gw = client_for(person("am", platform="gateway"))
    no_fp = alert(fp="")
    bad_time = alert(fp="c3", startsAt="yesterday")
    no_name = alert(fp="c4")
    del no_name["labels"]["alertname"]
    resolved_no_end = alert(fp="c5", status="resolved", endsAt="0001-01-01T00:00:00Z")
    odd_labels = alert(fp="c6", labels={"alertname": "X", "n": 3})
    r = _post(gw, hook(no_fp, bad_time, alert(fp="ok"), no_name, resolved_no_end, odd_labels, "x"))
    assert r.status_code == 200
    assert [(e["index"], e["field"]) for e in r.json()["errors"]] == [
        (0, "fingerprint"),
        (1, "startsAt"),
        (3, "labels.alertname"),
        (4, "endsAt"),
        (5, "labels"),
        (6, "alert"),
    ]
    assert list(PoolAlert.objects.values_list("fingerprint", flat=True)) == ["ok"]
    all_bad = _post(gw, hook(no_fp))
    assert all_bad.status_code == 400 and all_bad.json()["errors"][0]["field"] == "fingerprint"


def test_a_body_that_is_not_a_webhook_is_400_naming_the_field(fleet):
    gw = client_for(person("am", platform="gateway"))
    assert _post(gw, {"version": "4"}).json() == {"alerts": ["required, a list"]}
    assert _post(gw, dict(hook(alert()), version="3")).status_code == 400
    assert "version" in _post(gw, dict(hook(alert()), version="3")).json()
    assert _post(gw, [1, 2]).status_code == 400
    assert PoolAlert.objects.count() == 0


def test_unknown_pool_is_kept_unbound_and_reported(fleet):
    gw = client_for(person("am", platform="gateway"))
    r = _post(gw, hook(alert(pool="pool-zz", fp="u1"), alert(pool=None, fp="u2")))
    assert r.status_code == 200
    assert r.json()["unbound"] == [
        {"index": 0, "alertname": "ServiceDown", "pool": "pool-zz"},
        {"index": 1, "alertname": "ServiceDown", "pool": None},
    ]
    assert set(PoolAlert.objects.values_list("pool", "pool_label")) == {(None, "pool-zz"), (None, "")}


def test_the_pool_label_is_a_setting(fleet, settings):
    settings.ALERTMANAGER_POOL_LABEL = "hyperion_pool"
    gw = client_for(person("am", platform="gateway"))
    a = alert(pool=None)
    a["labels"]["hyperion_pool"] = "pool-b"
    assert _post(gw, hook(a)).json()["unbound"] == []
    assert PoolAlert.objects.get().pool == fleet.pool_b


def test_only_gateway_tokens_post(fleet):
    for user in (fleet.operator, person("viewer", tenant=fleet.acme)):
        assert _post(client_for(user), hook(alert())).status_code == 403
    assert PoolAlert.objects.count() == 0


def test_supply_alerts_count_replicas_by_instance(fleet):
    gw = client_for(person("am", platform="gateway"))
    _post(gw, hook(alert(fp="s1"), alert(fp="s2", instance="10.0.0.2:8000"), alert("GPUMemoryHigh", fp="l1")))
    # the same instance reported by a second rule is still one replica
    _post(gw, hook(alert("Custom", fp="s3", generatorURL=GEN_UP)))
    assert supply_alerts_down(fleet.pool_a.pk) == 2
    assert supply_alerts_down(fleet.pool_b.pk) == 0


def test_pool_alerts_selector_and_the_pool_api(fleet):
    gw = client_for(person("am", platform="gateway"))
    early = alert("HighInferenceLatency", fp="e1", status="resolved", startsAt="2026-11-30T10:00:00Z",
                  endsAt="2026-11-30T10:30:00Z")  # fmt: skip
    _post(gw, hook(early, alert("GPUMemoryHigh", fp="g1")))
    names = [a["alertname"] for a in pool_alerts(fleet.pool_a, T - timedelta(hours=3), T + timedelta(hours=1))]
    assert names == ["HighInferenceLatency", "GPUMemoryHigh"]
    assert [a["alertname"] for a in pool_alerts(fleet.pool_a, T - timedelta(minutes=59), T)] == []
    assert [a["alertname"] for a in pool_alerts(fleet.pool_a.pk, T, T + timedelta(days=9))] == ["GPUMemoryHigh"]

    op = client_for(fleet.operator)
    body = op.get("/api/v1/pools/pool-a").json()
    assert [(a["alertname"], a["state"], a["kind"]) for a in body["alerts"]] == [
        ("GPUMemoryHigh", "firing", "load"),
        ("HighInferenceLatency", "resolved", "load"),
    ]
    assert body["alerts"][0]["summary"] == "GPUMemoryHigh on 10.0.0.1:8000"
    assert op.get("/api/v1/pools/pool-b").json()["alerts"] == []
    assert all("alerts" not in p for p in op.get("/api/v1/pools").json()["results"])


def test_nul_characters_are_named_not_a_server_error(fleet):
    """PostgreSQL refuses NUL in text and jsonb; the field says so instead of a 500."""
    gw = client_for(person("am", platform="gateway"))
    in_pool = alert(fp="n1", pool="pool-a\x00")
    in_note = alert(fp="n2", annotations={"summary": "a\x00b"})
    r = _post(gw, hook(in_pool, in_note, alert(fp="n3\x00"), alert(fp="ok")))
    assert r.status_code == 200
    assert [(e["index"], e["field"]) for e in r.json()["errors"]] == [
        (0, "labels.pool"),
        (1, "annotations.summary"),
        (2, "fingerprint"),
    ]
    assert _post(gw, dict(hook(alert()), receiver="r\x00")).json() == {"receiver": ["contains a NUL character"]}
    assert list(PoolAlert.objects.values_list("fingerprint", flat=True)) == ["ok"]
