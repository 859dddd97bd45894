"""`manage.py import_atlas` (issue 24.1) against a real Redis filled in Atlas's documented layout:
the dry run's diff is what --apply writes, a second apply changes nothing, and the usage carried
makes a reserve over the budget throttle BUDGET_EXHAUSTED."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from admission import events, params
from admission.backends import set_backend
from entitlements import models as m
from tests.admission.cluster import store_url
from tests.admission.conftest import redis_backend
from tests.admission.world import client_for

pytestmark = pytest.mark.redis

RESERVE = "/api/v1/admission/reserve"


@pytest.fixture
def atlas(redis_url):
    """Atlas's keys (unique names per test, deleted after) and a writer in its layout."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    tag = uuid.uuid4().hex[:8]
    written: list[str] = []

    def key(name: str) -> str:
        return f"sk-{tag}-{name}"

    def put(api_key: str, limits: dict | None = None, day: int | None = None, month: int | None = None) -> None:
        now = datetime.now(UTC)
        if limits:
            client.hset(f"limits:{api_key}", mapping=limits)
            written.append(f"limits:{api_key}")
        for k, v in ((f"usage:d:{api_key}:{now:%Y%m%d}", day), (f"usage:m:{api_key}:{now:%Y%m}", month)):
            if v is not None:
                client.set(k, v)
                written.append(k)

    yield redis_url, key, put
    if written:
        client.delete(*written)
    client.close()


@pytest.fixture
def store(redis_url):
    b = redis_backend(store_url(redis_url))
    prev = set_backend(b)
    params.invalidate()
    yield b
    b.clear()
    set_backend(prev)
    params.invalidate()


@pytest.fixture
def keyset(fleet, atlas, tmp_path):
    """A realistic key set: a critical key with limits and usage, a normal key with a budget only,
    a key with no limits hash (Atlas's defaults), and three rows that cannot be imported."""
    url, key, put = atlas
    put(key("crit"), {"daily_limit": 1_000_000, "monthly_limit": 20_000_000, "rate_per_sec": 10, "burst": 20,
                      "priority": "critical"}, day=999_900, month=5_000_000)  # fmt: skip
    put(key("norm"), {"daily_limit": 864_000, "priority": "normal"}, day=1_000, month=2_000)
    put(key("low"), None, day=50)  # no limits hash: the options' defaults, priority low
    put(key("odd"), {"daily_limit": 10, "priority": "urgent"})
    rows = [
        "api_key,tenant,project,model,region",
        f"{key('crit')},acme,,llama-test,us-test",
        f"{key('norm')},globex,,llama-test,us-test",
        f"{key('low')},acme,,llama-test,us-test",
        f"{key('odd')},acme,,llama-test,us-test",
        f"{key('ghost')},nobody,,llama-test,us-test",
        f"{key('half')},acme,,llama-test,",
    ]
    path = tmp_path / "map.csv"
    path.write_text("\n".join(rows) + "\n")
    return url, key, path


def run(url, path, *extra):
    out = io.StringIO()
    args = ["import_atlas", "--redis-url", url, "--map", str(path), "--default-daily", "100000",
            "--default-priority", "low", *extra]  # fmt: skip
    with pytest.raises(CommandError, match="3 row"):  # the three bad rows, every time
        call_command(*args, stdout=out)
    return out.getvalue()


def table(out: str) -> list[str]:
    """The diff's key lines (the header and one line per key)."""
    return [ln for ln in out.splitlines() if ln.startswith(("key ", "sk-"))]


def test_dry_run_writes_nothing_and_its_diff_is_what_apply_writes_then_a_second_apply_changes_nothing(keyset, store):
    url, key, path = keyset
    dry = run(url, path)
    assert m.Entitlement.objects.count() == 0
    assert store.client.keys(f"{store.prefix}*bd:*") == []
    lines = table(dry)
    assert len(lines) == 4  # header + crit, norm, low
    assert all(" create " in ln for ln in lines[1:])
    assert "18.0" in lines[1] and "10 req/s × 1,800 wt/req (1000 + 4×200) ÷ R 1,000 = 18.0 CU" in lines[1]
    assert "864,000 tok/day ÷ 86,400 s × peak 3 ÷ R 1,000 = 0.1 CU" in lines[2]
    assert "100,000 tok/day ÷ 86,400 s × peak 3 ÷ R 1,000 = 0.1 CU (Atlas defaults)" in lines[3]
    for bad in ("priority: 'urgent' is not one of", "tenant: unknown tenant 'nobody'", "region: is required"):
        assert bad in dry

    applied = run(url, path, "--apply")
    assert table(applied) == lines  # the same diff, now written
    ents = {e.tenant.slug + "/" + e.traffic_class_id: e for e in m.Entitlement.objects.select_related("tenant")}
    assert set(ents) == {"acme/reserved", "globex/shared", "acme/best_effort"}
    crit = ents["acme/reserved"]
    assert (crit.cu, crit.daily_budget, crit.monthly_budget, crit.budget_unit, crit.max_rps, crit.burst) == (
        Decimal("18.0"), 1_000_000, 20_000_000, "tokens", 10.0, 20)  # fmt: skip
    norm = ents["globex/shared"]
    assert (norm.cu, norm.daily_budget, norm.monthly_budget, norm.max_rps, norm.burst) == (
        Decimal("0.1"), 864_000, None, None, None)  # fmt: skip
    low = ents["acme/best_effort"]
    assert (low.cu, low.daily_budget, low.max_rps, low.burst) == (Decimal("0.1"), 100_000, None, None)
    history = m.EntitlementHistory.objects.filter(op="insert")
    assert history.count() == 3
    assert {h.actor.username for h in history} == {"atlas-importer"}
    assert all(h.reason.startswith("import_atlas: Atlas key sk-") for h in history)
    seeded = sorted(float(store.client.get(k)) for k in store.client.keys(f"{store.prefix}*bd:*"))
    assert seeded == [50.0, 1_000.0, 999_900.0, 5_000_000.0]  # low d, norm d, crit d and m

    rows_before = m.EntitlementHistory.objects.count()
    again = run(url, path, "--apply")
    assert all(" unchanged " in ln for ln in table(again)[1:])
    assert "applied: 0 create, 0 update, 3 unchanged" in again
    assert m.EntitlementHistory.objects.count() == rows_before
    assert m.Entitlement.objects.count() == 3


def test_a_changed_limit_in_atlas_is_an_update_audited_by_the_importer(keyset, store, atlas):
    url, key, path = keyset
    run(url, path, "--apply")
    _, _, put = atlas
    put(key("crit"), {"rate_per_sec": 5}, day=10)  # halve the rate; today's use moves on
    out = run(url, path)
    line = next(ln for ln in table(out) if ln.startswith(key("crit")[:6]) and "reserved" in ln)
    assert "update (cu, max_rps, usage day)" in line and "= 9.0 CU" in line
    run(url, path, "--apply")
    crit = m.Entitlement.objects.get(traffic_class_id="reserved")
    assert (crit.cu, crit.max_rps, crit.version) == (Decimal("9.0"), 5.0, 2)
    assert m.EntitlementHistory.objects.filter(entitlement_id=crit.pk).last().actor.username == "atlas-importer"


def test_usage_carried_over_makes_a_reserve_over_the_daily_budget_throttle(keyset, store, sink):
    url, key, path = keyset
    gateway = client_for("gw", "gateway")

    def reserve(rid: str, prompt: int, out: int):
        body = {"request_id": rid, "tenant": "acme", "model": "llama-test", "region": "us-test",
                "traffic_class": "reserved", "prompt_tokens": prompt, "max_output_tokens": out}  # fmt: skip
        return gateway.post(RESERVE, body, format="json")

    run(url, path, "--apply")
    # 999,900 of 1,000,000 tokens spent in Atlas today: 101 more tokens is over, 100 is not.
    over = reserve("a-1", 50, 51)
    assert over.status_code == 429 and over.json()["reason"] == "BUDGET_EXHAUSTED"
    assert reserve("a-2", 50, 50).status_code == 200
    assert reserve("a-3", 1, 0).json()["reason"] == "BUDGET_EXHAUSTED"
    events.buffer().flush()
    assert [e["reason"] for e in sink.of("throttle")] == ["BUDGET_EXHAUSTED", "BUDGET_EXHAUSTED"]


def test_a_map_without_the_header_is_refused_naming_it(fleet, atlas, tmp_path):
    url, key, _ = atlas
    path = tmp_path / "map.csv"
    path.write_text(f"{key('x')},acme,,llama-test,us-test\n")
    with pytest.raises(CommandError, match="header: must be exactly api_key,tenant,project,model,region"):
        call_command("import_atlas", "--redis-url", url, "--map", str(path), stdout=io.StringIO())
