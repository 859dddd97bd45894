"""Issue 51 must-show: no commitment quotes more per month than on demand, as a property over the demo's own price
list (data/prices.csv, loaded through demo.prices like `load_demo`): every accelerator × region it prices, any CU,
any window, any overheads the catalogue may add, one pool or a launch request's regions summed."""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime, timedelta

import pytest
from django.conf import settings as dj_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demo.prices import load_prices
from entitlements.models import Accelerator, Pool, Price
from entitlements.prices import prices_read_once
from entitlements.quotes import pool_quotes, summed_quotes
from tests.factories import AcceleratorFactory, OperatingPointFactory, RegionFactory, ServedModelFactory, make_pool

pytestmark = pytest.mark.django_db
PROPS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _demo_rows() -> list[dict[str, str]]:
    with (dj_settings.DATA_DIR / "prices.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _demo_pairs() -> list[tuple[str, str]]:
    return sorted({(r["accelerator"], r["region"]) for r in _demo_rows()})


@pytest.fixture
def demo_pools(db) -> list[Pool]:
    model = ServedModelFactory()
    pools = []
    for i, (acc, region) in enumerate(_demo_pairs()):
        op = OperatingPointFactory(model=model, accelerator=AcceleratorFactory(slug=acc, name=acc))
        pools.append(make_pool(f"demo-{i}", op=op, region=RegionFactory(slug=region, name=region)))
    # every row's accelerator and region is in the catalogue now: each row is written, once
    rows = _demo_rows()
    assert load_prices() == len(rows) == 30
    assert sorted(Price.objects.values_list("accelerator__slug", "region__slug", "term", "effective_from")) == sorted(
        (r["accelerator"], r["region"], r["term"], date.fromisoformat(r["effective_from"])) for r in rows
    )
    assert load_prices() == 0  # loaded again: nothing changes
    assert len(pools) >= 2
    return pools


@PROPS
@given(
    cu=st.floats(min_value=0.1, max_value=5_000),
    days=st.integers(min_value=1, max_value=4 * 365),
    open_ended=st.booleans(),
    overhead=st.floats(min_value=0, max_value=5),
    start_day=st.integers(min_value=0, max_value=364),
)
def test_no_commitment_quotes_more_per_month_than_on_demand(demo_pools, cu, days, open_ended, overhead, start_day):
    Accelerator.objects.update(host_cost_per_hour=overhead, software_cost_per_hour=overhead / 2)
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=start_day)
    end = None if open_ended else start + timedelta(days=days)
    parts = []
    with prices_read_once():
        for pool in Pool.objects.select_related("accelerator", "region", "operating_point"):
            rows = pool_quotes(pool, cu=cu, start=start, end=end, useful_output_tokens_per_hour=1e6)
            assert len(rows) == 5, pool.slug  # the demo prices every term everywhere it prices at all
            _check(rows)
            parts.append(rows)
    _check(summed_quotes(parts))  # a launch request over every region


def _check(rows: list[dict]) -> None:
    by_term = {r["term"]: r for r in rows}
    od = by_term["on_demand"]
    assert od["commitment_end"] is None
    for r in rows:
        assert r["usd_per_month"] <= od["usd_per_month"], r["term"]
        assert r["usd_per_million_useful_output_tokens"] <= od["usd_per_million_useful_output_tokens"], r["term"]
    assert sum(r["cheapest"] for r in rows) == 1
