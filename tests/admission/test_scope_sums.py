"""The snapshot's SQL-summed scopes (admission.scope_sums) equal the row-by-row derivation
(tests/admission/scope_spec.py: derive_scopes over entitlement_rows) on a varied fixture: one scope spanning two
pools, projects, windows ended and not yet started, a revoked grant, borrowing, several envelopes,
budgets in two units and a request rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from admission import scope_sums, scope_table
from entitlements import models as m
from entitlements.models import ServedModel
from tests.admission import scope_spec
from tests.admission.world import grant

pytestmark = pytest.mark.django_db


def _varied(fleet):
    now = timezone.now()
    a, b = fleet.pool_a, fleet.pool_b
    proj = m.Project.objects.create(tenant=fleet.acme, slug="search", name="Search")
    e = [
        grant(fleet, a, fleet.acme, "10", "reserved"),
        grant(fleet, a, fleet.acme, "7.5", "reserved"),  # same scope, the other pool
        grant(fleet, a, fleet.acme, "3", "reserved"),
        grant(fleet, a, fleet.acme, "4", "best_effort", overage="borrow", borrowing_limit_cu="2"),
        grant(fleet, a, fleet.acme, "1.25", "best_effort", overage="borrow", borrowing_limit_cu="5"),
        grant(fleet, a, fleet.acme, "2", "best_effort"),  # throttles: no borrowing
        grant(fleet, a, fleet.globex, "6", "reserved"),
        grant(fleet, a, fleet.globex, "9", "reserved"),  # revoked below
        grant(fleet, a, fleet.globex, "5", "best_effort"),  # starts tomorrow below
        grant(fleet, a, fleet.globex, "8", "reserved"),  # ended an hour ago below
        grant(fleet, a, fleet.acme, "1", "reserved"),  # project scope below
        grant(fleet, a, fleet.acme, "2", "reserved"),  # project scope below
    ]
    q = m.Entitlement.objects.filter
    # A scope lives in one pool for the services; a raw write can still split it (derive handles that).
    q(pk__in=[e[1].pk, e[4].pk, e[7].pk, e[9].pk, e[11].pk]).update(pool=b)
    q(pk=e[1].pk).update(
        max_prompt_tokens=9000, max_concurrency=3, ttft_p99_ms=4000, ends_at=now + timedelta(hours=5), max_rps=0.5
    )
    q(pk=e[2].pk).update(max_output_tokens=5000, output_p95=3000, tpot_p99_ms=250, daily_budget=1000)
    q(pk=e[0].pk).update(daily_budget=500, monthly_budget=9000, max_rps=3.0)
    q(pk=e[4].pk).update(daily_budget=70, budget_unit="tokens", max_rps=2.5, burst=9)
    q(pk=e[3].pk).update(max_rps=1.5)
    q(pk=e[7].pk).update(revoked_at=now)
    q(pk=e[8].pk).update(starts_at=now + timedelta(days=1), ends_at=now + timedelta(days=3), daily_budget=5)
    q(pk=e[9].pk).update(starts_at=now - timedelta(days=2), ends_at=now - timedelta(hours=1))
    q(pk__in=[e[10].pk, e[11].pk]).update(project=proj)
    # Lending and fair share (issue 36.3): two limited lenders (one scope spanning both pools), weights.
    q(pk=e[0].pk).update(lending_limit_cu=4)
    q(pk=e[1].pk).update(lending_limit_cu="2.5")
    q(pk=e[3].pk).update(weight=3.0)
    q(pk=e[4].pk).update(weight=0.5)
    q(pk=e[11].pk).update(ends_at=now + timedelta(minutes=30), max_concurrency=11)
    return now


def _python(t):
    return scope_spec.derive_scopes(scope_spec.entitlement_rows(t), t.timestamp())


def test_sql_sums_equal_the_row_by_row_derivation(fleet):
    t = _varied(fleet)
    a_id, b_id = fleet.pool_a.pk, fleet.pool_b.pk
    want = _python(t)
    held = scope_sums.read(t)
    scopes, reserved, sold, nxt, withheld = scope_table.derive(held, t.timestamp())
    # The database returns groups in no set order: the scope is named by its lowest pk whatever the order.
    backwards = scope_sums.Sums(held.groups[::-1], held.uuids, held.limits)
    assert scope_table.derive(backwards, t.timestamp())[0] == scopes
    assert set(scopes) == set(want.scopes) and len(scopes) == 4
    for k, s in scopes.items():
        w = want.scopes[k]
        # Rates are float sums: the database adds the exact decimals, Python the floats row by row.
        assert (s.rate, s.borrow_rate) == pytest.approx((w.rate, w.borrow_rate), rel=1e-12), k
        assert (s.lending_limit_cu is None) == (w.lending_limit_cu is None), k
        assert (s.lending_limit_cu or 0, s.weight) == pytest.approx((w.lending_limit_cu or 0, w.weight), rel=1e-12), k
        floats = {"rate": 0, "borrow_rate": 0, "lending_limit_cu": 0, "weight": 0}
        assert s.__dict__ | floats == w.__dict__ | floats, k
    assert reserved == pytest.approx(want.reserved_rate, rel=1e-12)
    assert sold == pytest.approx(want.sold, rel=1e-12)
    assert nxt == pytest.approx(want.next_boundary, abs=1e-3)
    assert withheld == pytest.approx(want.withheld, rel=1e-12)
    r = float(ServedModel.objects.get(slug="llama-test").r_wt_per_s)
    # acme reserved: 10 CU lending 4 (pool a) and 7.5 lending 2.5 (pool b): each pool keeps back CU − limit;
    # the scope lends 4 + 2.5 + the unlimited 3 CU grant's all.
    assert withheld == pytest.approx({a_id: 6 * r, b_id: 5 * r}, rel=1e-12)
    acme_lend = scopes[("acme", "", "llama-test", fleet.pool_a.region.slug, "reserved")]
    assert acme_lend.lending_limit_cu == pytest.approx(9.5)
    acme_be = scopes[("acme", "", "llama-test", fleet.pool_a.region.slug, "best_effort")]
    assert acme_be.weight == pytest.approx(4.5)  # 3 + 0.5 + the default 1
    assert scopes[("globex", "", "llama-test", fleet.pool_a.region.slug, "reserved")].lending_limit_cu is None
    # The fixture exercises what it claims: a two-pool scope, borrowing, combined budgets.
    acme_res = scopes[("acme", "", "llama-test", fleet.pool_a.region.slug, "reserved")]
    assert acme_res.limits is not None and acme_res.limits.daily == 1500 and acme_res.max_prompt_tokens == 9000
    # The two borrowing grants' limits (2 + 5 CU) at the model's rate; the third does not borrow.
    r_model = ServedModel.objects.get(slug="llama-test").r_wt_per_s
    borrow = scopes[("acme", "", "llama-test", fleet.pool_a.region.slug, "best_effort")].borrow_rate
    assert borrow == pytest.approx(7 * float(r_model), rel=1e-12)


def test_groups_read_now_and_derived_later_follow_started_and_ended_windows(fleet):
    _varied(fleet)
    later = timezone.now() + timedelta(days=1, hours=1)
    want = _python(later)
    held = scope_sums.read(timezone.now())  # read now, derived a day later (no query): as a window boundary
    scopes, _, _, nxt, _ = scope_table.derive(held, later.timestamp())
    assert set(scopes) == set(want.scopes)
    assert ("globex", "", "llama-test", fleet.pool_a.region.slug, "best_effort") in scopes  # started
    assert {k: s.limits for k, s in scopes.items()} == {k: s.limits for k, s in want.scopes.items()}
    assert nxt == pytest.approx(want.next_boundary, abs=1e-3)
