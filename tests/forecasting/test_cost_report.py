"""Cost per million useful output tokens over the demand curve, beside (never mixed with) marginal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from capacity.cost import CostBasisError, compare_costs
from entitlements.services import entitlement_grant
from forecasting import cost_report
from telemetry.models import HourRollup
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END


@pytest.fixture
def owned(fleet, settings):
    """Owned accelerators at 1.00 USD/h capital (35,040 over 4 years × 8,760 h) + 0.50 host, 1 kW busy,
    0.3 kW idle, PUE 1, 0.10 USD/kWh. pool-a: 4 replicas × 8 = 32 accelerators → 48 USD/h fixed."""
    settings.COST_PUE, settings.COST_ELECTRICITY_PER_KWH, settings.COST_IDLE_POWER_SHARE = 1.0, 0.10, 0.3
    acc = fleet.pool_a.accelerator
    acc.purchase_price_usd, acc.depreciation_years, acc.lifetime_utilization = 35_040.0, 4.0, 1.0
    acc.maintenance_pct_per_year, acc.power_watts, acc.host_cost_per_hour = 0.0, 1000.0, 0.5
    acc.save()
    hour = END - timedelta(hours=1)
    common = {"bucket": hour, "tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved"}
    # acme holds equal entitlements in both pools (reserved in pool-a, shared in pool-b), so each pool
    # carries half of its usage. One busy hour.
    for pool, cls in ((fleet.pool_a, "reserved"), (fleet.pool_b, "shared")):
        entitlement_grant(
            actor=fleet.operator,
            reason="t",
            **grant_kwargs(pool, fleet.acme, "10", traffic_class=cls, start=hour, days=30),
        )
    HourRollup.objects.bulk_create(
        [
            HourRollup(decision="complete", output_tokens=7_200_000, slo_met=9, slo_total=10, **common),
            # 140 CU for the hour → 70 CU in pool-a's half = a quarter of its 280 CU
            HourRollup(decision="admit", estimated_wt=140 * 1000 * 3600, **common),
        ]
    )
    return fleet


def test_fully_loaded_over_the_curve_pays_for_quiet_hours(owned):
    row = next(r for r in cost_report.pool_cost_report(days=1, end=END) if r["pool"] == "pool-a")
    busy = 48 + 32 * 0.3 * 0.10 + 32 * 0.7 * 0.25 * 0.10  # fixed + idle draw + load above idle = 49.52
    quiet = 48 + 32 * 0.3 * 0.10  # 48.96, for 23 hours with no traffic
    useful = 3_600_000 * 0.9
    assert row["cost_usd"] == round(busy + 23 * quiet, 2)
    assert row["useful_output_tokens"] == useful
    assert row["fully_loaded"].value == pytest.approx((busy + 23 * quiet) / useful * 1e6)
    assert row["fully_loaded_at_busiest_hour"].value == pytest.approx(busy / useful * 1e6)
    # Marginal: energy above idle of one replica (8 × 0.7 kW × 0.10) per its 36M output tokens an hour
    assert row["marginal"].value == pytest.approx(8 * 0.7 * 0.10 / 36)
    # One of four replicas busy in the busy hour, none in the quiet ones: the rest is idle reserve
    assert row["idle_reserve_share"] == round((0.75 * busy_fixed_and_idle() + 23 * quiet) / (busy + 23 * quiet), 4)


def busy_fixed_and_idle() -> float:
    return 48 + 32 * 0.3 * 0.10


def test_fully_loaded_and_marginal_refuse_to_be_compared(owned):
    row = cost_report.pool_cost_report(days=1, end=END)[0]
    with pytest.raises(CostBasisError, match="cannot compare a fully_loaded cost with a marginal cost"):
        compare_costs(row["fully_loaded"], row["marginal"])


def test_a_replica_hour_is_priced_fully_loaded(owned):
    assert cost_report.replica_hour_cost(owned.pool_a) == pytest.approx(8 * 1.5 + 8 * 0.3 * 0.10)


def test_slo_met_share_is_measured_where_telemetry_has_it(owned):
    row = next(r for r in cost_report.pool_cost_report(days=1, end=END) if r["pool"] == "pool-a")
    assert (row["slo_met_share"], row["slo_met_basis"]) == (0.9, "measured: 5 settled requests in the window")


def test_hours_without_slo_counts_use_sizing_s_assumed_share_and_say_so(owned):
    HourRollup.objects.filter(decision="complete").update(slo_met=0, slo_total=0)
    row = next(r for r in cost_report.pool_cost_report(days=1, end=END) if r["pool"] == "pool-a")
    assert row["useful_output_tokens"] == 3_600_000 * 0.99
    assert (row["slo_met_share"], row["slo_met_basis"]) == (
        0.99,
        "assumed: sizing's default, no settled request in the window",
    )


def test_fully_loaded_carries_network_storage_and_software(owned):
    acc = owned.pool_a.accelerator
    acc.network_cost_per_hour, acc.storage_cost_per_hour, acc.software_cost_per_hour = 0.2, 0.1, 0.25
    acc.overhead_basis = "assumption"
    acc.save()
    owned.pool_a.refresh_from_db()
    # 8 accelerators × (1.00 capital + 0.50 host + 0.20 network + 0.25 software) + 8 × 0.10 storage
    # (per replica: its 8 accelerators) + 8 × 0.3 kW idle × 0.10 USD/kWh
    assert cost_report.replica_hour_cost(owned.pool_a) == pytest.approx(8 * 1.95 + 0.8 + 0.24)
    row = next(r for r in cost_report.pool_cost_report(days=1, end=END) if r["pool"] == "pool-a")
    assert row["overheads_per_accelerator_hour"] == {
        "host": 0.5,
        "network": 0.2,
        "storage": 0.1,
        "software": 0.25,
        "basis": "assumption",
    }
    # 24 hours × 4 replicas × (8 × 0.45 network + software, + 0.8 storage) more than without them
    assert row["cost_usd"] == pytest.approx(round(49.52 + 23 * 48.96 + 24 * 4 * (8 * 0.45 + 0.8), 2))
