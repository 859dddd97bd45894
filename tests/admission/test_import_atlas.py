"""`manage.py import_atlas` (issues 24.1, 33, 29) against a real Redis written the way Atlas writes it
(github.com/BugVanquisher/Atlas at e2aa4ae09b57: `QuotaManager.set_limits` HSETs `limits:{key}`,
`add_tokens` INCRBYs `usage:d:{key}:{YYYYMMDD}` / `usage:m:{key}:{YYYYMM}`), on both admission stores:
the embedded default's in-process store and Redis. Each key is throttled where Atlas throttles it:
limit 0, a hash missing fields (Atlas's defaults), `urgent` priority (normal in Atlas), two keys on
one scope (summed), usage Atlas has exhausted; the dry run's diff is what --apply writes and a second
apply changes nothing."""

from __future__ import annotations

import http.client
import io
import json
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from admission.models import CarriedUsage
from entitlements import models as m
from entitlements import token_services
from telemetry.budgets import budget_usage
from tests.admission.cluster import store_url
from tests.admission.conftest import redis_backend
from tests.admission.world import client_for
from tests.servers import child_db_env, free_port

pytestmark = pytest.mark.redis  # Atlas's own Redis (a throwaway redis-server without REDIS_URL)

RESERVE = "/api/v1/admission/reserve"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def atlas(redis_url):
    """Atlas's keys (unique names per test, deleted after) and writers in its layout."""
    import redis

    client = redis.Redis.from_url(redis_url)
    tag = uuid.uuid4().hex[:8]
    written: list[bytes | str] = []

    def key(name: str) -> str:
        return f"sk-{tag}-{name}"

    def put(api_key: str, limits: dict | None = None, day: int | None = None, month: int | None = None) -> None:
        now = datetime.now(UTC)
        if limits:
            client.hset(f"limits:{api_key}", mapping=limits)  # QuotaManager.set_limits
            written.append(f"limits:{api_key}")
        for k, v in ((f"usage:d:{api_key}:{now:%Y%m%d}", day), (f"usage:m:{api_key}:{now:%Y%m}", month)):
            if v is not None:
                client.delete(k)
                client.incrby(k, v)  # QuotaManager.add_tokens
                written.append(k)

    def raw(name: bytes, limits: dict) -> None:
        client.hset(name, mapping=limits)
        written.append(name)

    yield redis_url, key, put, raw, tag
    if written:
        client.delete(*written)
    client.close()


@pytest.fixture(params=["memory", "redis"])
def store(request, redis_url):
    """Headroom's admission store: the embedded default's in-process one, or Redis."""
    b = MemoryBackend() if request.param == "memory" else redis_backend(store_url(redis_url))
    prev = backends.set_backend(b)
    params.invalidate()
    yield b
    b.clear()
    backends.set_backend(prev)
    params.invalidate()


@pytest.fixture
def keyset(fleet, atlas, tmp_path):
    """Keys as an Atlas operator has them, one per behaviour, and two rows that cannot be imported."""
    url, key, put, raw, tag = atlas
    m.Project.objects.create(tenant=fleet.globex, slug="web", name="web")
    full = {"monthly_limit": 20_000_000, "rate_per_sec": 10, "burst": 20, "safety_tier3_daily_limit": 100,
            "safety_tier3_monthly_limit": 1000}  # fmt: skip
    # acme reserved: 999,900 of 1,000,000 tokens spent today
    put(key("crit"), {"daily_limit": 1_000_000, "priority": "critical", **full}, day=999_900, month=5_000_000)
    # acme shared: `urgent` (Atlas reads it as normal), a hash without monthly/rate/burst, exhausted today
    put(key("urgent"), {"daily_limit": 50_000, "priority": "urgent"}, day=50_000, month=50_000)
    # acme best_effort: a daily limit of 0 blocks every request in Atlas
    put(key("zero"), {"daily_limit": 0, "priority": "low", **full})
    # globex shared: two keys of one team on one scope (summed: 30,000 a day, 7,000 spent)
    put(key("team1"), {"daily_limit": 10_000, "priority": "normal", **full}, day=6_000, month=6_000)
    put(key("team2"), {"daily_limit": 20_000, "priority": "normal", **full}, day=1_000, month=1_000)
    # globex/web shared: no hash at all, Atlas's defaults throughout
    put(key("bare"), None, day=99_000)
    raw(f"limits:sk-{tag}-".encode() + b"\xff\xfe", {"daily_limit": 1})  # issue 29: a non-UTF-8 key name
    rows = [
        "api_key,tenant,project,model,region",
        f"{key('crit')},acme,,llama-test,us-test",
        f"{key('urgent')},acme,,llama-test,us-test",
        f"{key('zero')},acme,,llama-test,us-test",
        f"{key('team1')},globex,,llama-test,us-test",
        f"{key('team2')},globex,,llama-test,us-test",
        f"{key('bare')},globex,web,llama-test,us-test",
        f"{key('ghost')},nobody,,llama-test,us-test",
        f"{key('half')},acme,,llama-test,",
        f"{key('nul')}\x00,acme,,llama-test,us-test",  # issue 29: reported by line, skipped
    ]
    path = tmp_path / "map.csv"
    path.write_bytes(("\ufeff" + "\n".join(rows) + "\n").encode())  # issue 29: a BOM, as Excel writes it
    return url, key, path


def run(url, path, *extra, bad=3):
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"{bad} row"):  # the bad rows, every time
        call_command("import_atlas", "--redis-url", url, "--map", str(path), *extra, stdout=out)
    return out.getvalue()


def table(out: str) -> list[str]:
    """The diff's scope lines (the header and one line per scope)."""
    return [ln for ln in out.splitlines() if ln.startswith(("key ", "sk-"))]


def line_of(out: str, key: str) -> str:
    return next(ln for ln in table(out) if key[:6] + "…" + key[-2:] in ln)


def reserve(gateway, tenant: str, cls: str, rid: str, prompt: int, out: int, project: str | None = None):
    body = {"request_id": rid, "tenant": tenant, "model": "llama-test", "region": "us-test", "traffic_class": cls,
            "prompt_tokens": prompt, "max_output_tokens": out}  # fmt: skip
    if project:
        body["project"] = project
    return gateway.post(RESERVE, body, format="json")


def reason(resp) -> str:
    return "OK" if resp.status_code == 200 else resp.json()["reason"]


def test_dry_run_says_what_apply_writes_and_a_second_apply_changes_nothing(keyset, store):
    url, key, path = keyset
    dry = run(url, path)
    assert m.Entitlement.objects.count() == 0 and not CarriedUsage.objects.exists()
    lines = table(dry)
    assert len(lines) == 6  # header + five scopes (team1 and team2 share one)
    assert all(" create " in ln for ln in lines[1:])
    assert "10 req/s × 1,800 wt/req (1000 + 4×200) ÷ R 1,000 = 18.0 CU" in line_of(dry, key("crit"))
    # limit 0 is a budget of 0 and the dry run says it refuses everything
    zero = line_of(dry, key("zero"))
    assert "best_effort" in zero and "d 0 / m 20,000,000" in zero
    assert "daily limit 0: every request refused (BUDGET_EXHAUSTED), as Atlas refuses it" in dry
    # fields the hash lacks take Atlas's defaults (gateway/config.py 29-32), and `urgent` is normal
    urgent = line_of(dry, key("urgent"))
    assert " shared " in urgent and "d 50,000 / m 1,000,000" in urgent and "2/5" in urgent
    assert "priority 'urgent' read as normal, as Atlas does" in dry
    assert "monthly_limit 1,000,000 (Atlas default)" in dry
    bare = line_of(dry, key("bare"))
    assert "globex/web" in bare and "d 100,000 / m 1,000,000" in bare and "(Atlas defaults)" in bare
    # two keys, one scope: one line, limits summed
    team = line_of(dry, key("team1"))
    assert key("team2")[:6] in team and "d 30,000 / m 40,000,000" in team and "20/40" in team and "36.0" in team
    assert "d 7,000 m 7,000" in team
    for bad in ("tenant: unknown tenant 'nobody'", "map line 9: region: is empty",
                "map line 10: line: contains a NUL character; skipped"):  # fmt: skip
        assert bad in dry
    assert "not UTF-8, so no map can name it (skipped)" in dry

    applied = run(url, path, "--apply")
    assert table(applied) == lines  # the same diff, now written
    ents = {
        (e.tenant.slug, e.project.slug if e.project else "", e.traffic_class_id): e
        for e in m.Entitlement.objects.select_related("tenant", "project")
    }
    assert set(ents) == {("acme", "", "reserved"), ("acme", "", "shared"), ("acme", "", "best_effort"),
                         ("globex", "", "shared"), ("globex", "web", "shared")}  # fmt: skip
    crit = ents["acme", "", "reserved"]
    assert (crit.cu, crit.daily_budget, crit.monthly_budget, crit.budget_unit, crit.max_rps, crit.burst) == (
        Decimal("18.0"), 1_000_000, 20_000_000, "tokens", 10.0, 20)  # fmt: skip
    assert ents["acme", "", "best_effort"].daily_budget == 0
    assert budget_usage(ents["acme", "", "best_effort"])["daily"]["share"] == 1.0  # a budget of 0 is spent
    team_ent = ents["globex", "", "shared"]
    assert (team_ent.daily_budget, team_ent.max_rps, team_ent.burst) == (30_000, 20.0, 40)
    history = m.EntitlementHistory.objects.filter(op="insert")
    assert history.count() == 5 and {h.actor.username for h in history} == {"atlas-importer"}
    # every budgeted period with usage (limit 0 and the bare key's month had none): 7 buckets
    carried = sorted(CarriedUsage.objects.values_list("carried", flat=True))
    assert carried == [7_000.0, 7_000.0, 50_000.0, 50_000.0, 99_000.0, 999_900.0, 5_000_000.0]
    if isinstance(store, MemoryBackend):
        assert "through the database (admission_carriedusage)" in applied
    else:
        assert "usage carried into 7 period bucket(s) of the admission store" in applied

    rows_before = m.EntitlementHistory.objects.count()
    again = run(url, path, "--apply")
    assert all(" unchanged " in ln for ln in table(again)[1:]), again
    assert "applied: 0 create, 0 update, 5 unchanged" in again
    assert "usage carried: nothing new since the last import" in again
    assert m.EntitlementHistory.objects.count() == rows_before and CarriedUsage.objects.count() == 7


def test_each_key_is_throttled_where_atlas_throttles_it(keyset, store, sink):
    """Atlas refuses when used + tokens > limit (gateway/quota.py 153-158); so does a budget here."""
    url, key, path = keyset
    gateway = client_for("gw", "gateway")
    run(url, path, "--apply")
    if isinstance(store, MemoryBackend):
        bucket = CarriedUsage.objects.filter(carried=999_900).get().bucket
        assert store.used(bucket) is None  # the command never touched this process's store itself...
    # acme reserved: 999,900 of 1,000,000 spent: 101 more tokens is over, 100 is not
    assert reason(reserve(gateway, "acme", "reserved", "c-1", 50, 51)) == "BUDGET_EXHAUSTED"
    if isinstance(store, MemoryBackend):
        assert store.used(bucket) == 999_900  # ...it reached it through the database, at the snapshot check
    assert reason(reserve(gateway, "acme", "reserved", "c-2", 50, 50)) == "OK"
    spent = reserve(gateway, "acme", "reserved", "c-3", 1, 0)
    assert reason(spent) == "BUDGET_EXHAUSTED"
    assert spent.json()["retry_after_s"] >= 1 and "Retry-After" in spent and "message" not in spent.json()
    # limit 0: every request refused, as in Atlas; no time to retry at (the day's end would reset nothing)
    zero = reserve(gateway, "acme", "best_effort", "z-1", 1, 0)
    assert reason(zero) == "BUDGET_EXHAUSTED"
    assert zero.json()["retry_after_s"] is None and "Retry-After" not in zero
    assert zero.json()["message"] == "the daily budget is 0: every request is refused, no retry passes"
    again = reserve(gateway, "acme", "best_effort", "z-1", 1, 0)  # the same request id, replayed
    assert (again.json()["retry_after_s"], again.json()["message"]) == (None, zero.json()["message"])
    # `urgent` (normal in Atlas) with its day exhausted in Atlas
    assert reason(reserve(gateway, "acme", "shared", "u-1", 1, 0)) == "BUDGET_EXHAUSTED"
    # two keys, one scope: 30,000 a day, 7,000 spent → two 10,000-token requests fit, a third does not
    assert [reason(reserve(gateway, "globex", "shared", f"t-{i}", 8000, 2000)) for i in range(3)] == [
        "OK", "OK", "BUDGET_EXHAUSTED"]  # fmt: skip
    # no hash: Atlas's default 100,000 a day, 99,000 spent
    assert reason(reserve(gateway, "globex", "shared", "b-1", 800, 201, project="web")) == "BUDGET_EXHAUSTED"
    assert reason(reserve(gateway, "globex", "shared", "b-2", 800, 200, project="web")) == "OK"
    events.buffer().flush()
    assert {e["reason"] for e in sink.of("throttle")} == {"BUDGET_EXHAUSTED"}


def test_a_changed_limit_in_atlas_is_an_update_audited_by_the_importer(keyset, store, atlas):
    url, key, path = keyset
    run(url, path, "--apply")
    _, _, put, _, _ = atlas
    before = m.Entitlement.objects.get(traffic_class_id="reserved").cu
    put(key("crit"), {"rate_per_sec": 5}, day=999_950)  # halve the rate; today's use moves on in Atlas
    out = run(url, path)
    line = line_of(out, key("crit"))
    # The dry run shows each change old → new, and that this one lowers the CU (issue 48).
    assert f"update (cu {before} → 9.0, max_rps 10 → 5, usage day)" in line and "= 9.0 CU" in line, line
    assert f"lowers CU {before} → 9.0: written only with --allow-lower" in out
    # An apply without --allow-lower refuses that scope, naming it; nothing of it is written.
    refused = run(url, path, "--apply", bad=4)
    assert f"cu: would lower acme/- llama-test@us-test from {before} to 9.0 CU; --allow-lower to write it" in refused
    crit = m.Entitlement.objects.get(traffic_class_id="reserved")
    assert (crit.cu, crit.max_rps, crit.version) == (before, 10.0, 1)
    run(url, path, "--apply", "--allow-lower")
    crit = m.Entitlement.objects.get(traffic_class_id="reserved")
    assert (crit.cu, crit.max_rps, crit.version) == (Decimal("9.0"), 5.0, 2)
    assert m.EntitlementHistory.objects.filter(entitlement_id=crit.pk).last().actor.username == "atlas-importer"
    # Atlas's day moved on by 50: that much is added, so what Headroom counted meanwhile is kept
    gateway = client_for("gw", "gateway")
    assert reason(reserve(gateway, "acme", "reserved", "c-1", 25, 25)) == "OK"  # 999,950 + 50
    assert reason(reserve(gateway, "acme", "reserved", "c-2", 1, 0)) == "BUDGET_EXHAUSTED"


def test_a_map_without_a_header_is_read_and_a_reordered_header_is_refused(fleet, atlas, tmp_path, store):
    url, key, _, _, _ = atlas
    path = tmp_path / "map.csv"
    path.write_text(f"{key('x')},acme,,llama-test,us-test\n")
    out = io.StringIO()
    call_command("import_atlas", "--redis-url", url, "--map", str(path), stdout=out)
    assert "1 create" in out.getvalue()
    path.write_text(f"api_key,tenant,model,project,region\n{key('x')},acme,,llama-test,us-test\n")
    with pytest.raises(CommandError, match="1 row"):
        call_command("import_atlas", "--redis-url", url, "--map", str(path), stdout=out)
    assert "map line 1: header: must be exactly api_key,tenant,project,model,region" in out.getvalue()


@pytest.mark.slow
def test_on_the_embedded_default_a_running_server_enforces_the_usage_carried(transactional_db, keyset, tmp_path):
    """The command and the web server are two processes: the server's in-process store gets Atlas's
    usage through the database, and refuses the exhausted key (gunicorn, one worker, no REDIS_URL)."""
    url, key, path = keyset
    gw = client_for("gw", "gateway")  # noqa: F841 - creates the gateway user
    user = m.ApiToken.objects.get(user__username="gw").user
    _, token = token_services.token_create(actor=user, name="litellm", scope="gateway")
    port = free_port()
    env = {**child_db_env(), "DJANGO_SETTINGS_MODULE": "config.settings", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
           "HEADROOM_SIMULATE": "0", "ADMISSION_SWEEP_IN_PROCESS": "0"}  # fmt: skip
    for name in ("REDIS_URL", "ADMISSION_REDIS_URL", "CELERY_BROKER_URL", "ADMISSION_BACKEND"):
        env.pop(name, None)
    log = (tmp_path / "gunicorn.log").open("w")
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "1"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def post(rid: str, prompt: int, out: int) -> str:
        doc = {"request_id": rid, "tenant": "acme", "model": "llama-test", "region": "us-test",
               "traffic_class": "reserved", "prompt_tokens": prompt, "max_output_tokens": out}  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", RESERVE, json.dumps(doc), {"Authorization": f"Token {token}",
                                                        "Content-Type": "application/json"})  # fmt: skip
        r = conn.getresponse()
        body = json.loads(r.read())
        return "OK" if r.status == 200 else body.get("reason", str(body))

    try:
        for _ in range(1200):  # a hang guard for a slow boot, not a timing assertion
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=5).request("GET", "/login/")
                break
            except OSError:
                assert web.poll() is None, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.1)
        backends.set_backend(MemoryBackend())  # this process's store: the command must not rely on it
        out = run(url, path, "--apply")
        assert "through the database (admission_carriedusage)" in out
        got = [post(f"s-{i}", 50, 51) for i in range(1, 4)]
        assert got == ["BUDGET_EXHAUSTED"] * 3, (tmp_path / "gunicorn.log").read_text()[-2000:]
        assert post("s-9", 50, 50) == "OK"
    finally:
        web.terminate()
        web.wait(timeout=60)
        backends.set_backend(None)
        params.invalidate()
