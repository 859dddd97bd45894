from decimal import Decimal

import pytest

from entitlements.selectors import pools_with_totals
from entitlements.services import entitlement_grant, reserve_set
from portal.charts.home import PoolBar, Segment, capacity_breakdown_figure, pool_segments
from tests import factories as f
from tests.figures import figures


def segments_for(row):
    b = row["breakdown"]
    return pool_segments(
        physical=row["physical_cu"],
        deliverable=row["deliverable_cu"],
        sold=row["sold_cu"],
        reserve=b.failover_reserve,
        maintenance=b.maintenance,
        safety=b.safety,
        fragmentation=b.fragmentation,
    )


@pytest.mark.django_db
def test_segments_of_a_real_pool_sum_to_physical_exactly(fleet):
    pool = f.make_pool(
        "pool-c",
        op=fleet.pool_a.operating_point,
        replicas_per_zone=(3, 2),
        maintenance_pct=5,
        safety_pct=5,
        fragmentation_pct=2,
    )
    reserve_set(host_pool=pool, protected_pool=fleet.pool_b, cu="30")
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(pool, fleet.acme, "100"))
    row = next(r for r in pools_with_totals() if r["pool"].slug == "pool-c")

    segments = segments_for(row)

    # 5 replicas × 70 CU = 350; 350 − 30 − 17.5 − 17.5 − 7 = 278 deliverable, 100 sold.
    assert segments == [
        Segment("sold", Decimal("100.000")),
        Segment("headroom", Decimal("178.000")),
        Segment("failover reserve", Decimal("30.000")),
        Segment("maintenance", Decimal("17.500")),
        Segment("safety margin", Decimal("17.500")),
        Segment("fragmentation", Decimal("7.000")),
    ]
    assert sum(s.cu for s in segments) == Decimal("350.000") == row["physical_cu"]


def test_segments_absorb_rounding_in_fragmentation():
    # Each term rounds to 0.001 on its own (0.0014 → 0.001, 0.0002 → 0.000): without the remainder
    # going to fragmentation the bar would add up to 0.999, not the table's physical 1.000.
    segments = pool_segments(
        physical=Decimal("1.000"),
        deliverable=Decimal("0.997"),
        sold=Decimal("0"),
        reserve=0,
        maintenance=0.0014,
        safety=0.0014,
        fragmentation=0.0002,
    )
    assert [(s.name, s.cu) for s in segments][-3:] == [
        ("maintenance", Decimal("0.001")),
        ("safety margin", Decimal("0.001")),
        ("fragmentation", Decimal("0.001")),
    ]
    assert sum(s.cu for s in segments) == Decimal("1.000")


def test_oversold_pool_shows_the_excess_beyond_physical():
    segments = pool_segments(
        physical=Decimal("100"),
        deliverable=Decimal("90"),
        sold=Decimal("95"),
        reserve=0,
        maintenance=10,
        safety=0,
        fragmentation=0,
    )
    assert [(s.name, s.cu) for s in segments] == [
        ("sold", Decimal("90.000")),
        ("headroom", Decimal("0.000")),
        ("failover reserve", Decimal("0.000")),
        ("maintenance", Decimal("10.000")),
        ("safety margin", Decimal("0.000")),
        ("fragmentation", Decimal("0.000")),
        ("oversold", Decimal("5.000")),
    ]


def test_figure_stacks_one_bar_per_pool_in_shares_of_physical():
    a = PoolBar(
        "pool-a",
        Decimal("200"),
        pool_segments(
            physical=Decimal("200"),
            deliverable=Decimal("150"),
            sold=Decimal("50"),
            reserve=30,
            maintenance=10,
            safety=6,
            fragmentation=4,
        ),
    )
    b = PoolBar(
        "pool-b",
        Decimal("80"),
        pool_segments(
            physical=Decimal("80"),
            deliverable=Decimal("80"),
            sold=Decimal("20"),
            reserve=0,
            maintenance=0,
            safety=0,
            fragmentation=0,
        ),
    )
    fig = capacity_breakdown_figure([a, b])
    traces = {t["name"]: t for t in fig["data"]}
    assert list(traces) == ["sold", "headroom", "failover reserve", "maintenance", "safety margin", "fragmentation"]
    assert traces["sold"]["y"] == ["pool-a", "pool-b"]
    assert traces["sold"]["x"] == [25.0, 25.0]
    assert traces["headroom"]["x"] == [50.0, 75.0]
    assert traces["failover reserve"]["x"] == [15.0, 0.0]
    assert [sum(t["x"][i] for t in fig["data"]) for i in range(2)] == [100.0, 100.0]
    assert traces["failover reserve"]["hovertext"][0] == "failover reserve: 30.0 CU (15.0 % of 200.0 CU physical)"
    assert all(t["type"] == "bar" and t["orientation"] == "h" for t in fig["data"])
    assert fig["layout"]["barmode"] == "stack"


def test_home_page_and_its_htmx_partial_embed_the_breakdown_figure(client, fleet):
    """The figure reaches the page through json_script (the one way charts.js reads), whole and
    parseable, in the full page and in the pools partial htmx swaps in."""
    client.force_login(fleet.operator)
    for headers in ({}, {"HX-Request": "true"}):
        html = client.get("/", headers=headers).content.decode()
        fig = figures(html)["capacity-breakdown"]
        assert fig["layout"]["barmode"] == "stack"
        assert {"pool-a", "pool-b"} <= set(fig["data"][0]["y"])
