"""Pure pieces: figure builders and the mergeable latency histogram."""

from __future__ import annotations

from portal.charts import live as charts_live
from telemetry.histogram import EDGES_MS, N_BINS, bin_of, percentile

USAGE = {
    "t": ["2026-01-05T12:00:00+00:00", "2026-01-05T12:01:00+00:00"],
    "series": {
        "entitled_wt_per_s": [1000.0, 1000.0],
        "arrived_wt_per_s": [10.0, 20.0],
        "admitted_wt_per_s": [5.0, 20.0],
        "arrived_requests": [4, 2],
        "admitted_requests": [1, 2],
        "throttled_requests": {"QUOTA_EXCEEDED": [2, 0], "PLATFORM_CAPACITY": [1, 0]},
        "estimated_wt": [100.0, 200.0],
        "actual_wt": [90.0, 0.0],
    },
}


def test_throttles_are_split_by_who_caused_them():
    tenant_fig, platform_fig = charts_live.throttle_split(USAGE)
    assert [t["name"] for t in tenant_fig["data"]] == ["QUOTA_EXCEEDED (tenant)"]
    assert [t["name"] for t in platform_fig["data"]] == ["PLATFORM_CAPACITY (platform)"]
    assert tenant_fig["data"][0]["y"] == [2, 0]


def test_decisions_stack_admitted_under_reasons():
    fig = charts_live.decisions_figure(USAGE)
    assert [t["name"] for t in fig["data"]] == ["admitted", "PLATFORM_CAPACITY (platform)", "QUOTA_EXCEEDED (tenant)"]
    assert fig["layout"]["barmode"] == "stack"


def test_totals():
    assert charts_live.totals(USAGE) == {
        "arrived": 6,
        "admitted": 3,
        "tenant_throttled": 2,
        "platform_throttled": 1,
        "by_reason": [
            {"reason": "PLATFORM_CAPACITY", "n": 1, "responsible": "platform"},
            {"reason": "QUOTA_EXCEEDED", "n": 2, "responsible": "tenant"},
        ],
        "estimated_wt": 300.0,
        "actual_wt": 90.0,
    }


def test_rate_figure_draws_the_promise_dashed():
    fig = charts_live.rate_figure(USAGE)
    assert [(t["name"], t["line"].get("dash")) for t in fig["data"]] == [
        ("entitled", "dash"),
        ("arrived", None),
        ("admitted", None),
    ]


def test_histogram_bins_and_percentiles():
    assert (N_BINS, bin_of(0.5), bin_of(1.0), bin_of(10**6)) == (32, 0, 1, 31)
    counts = [0] * N_BINS
    counts[bin_of(150)] = 99
    counts[bin_of(5000)] = 1
    p50, p99, p100 = percentile(counts, 0.5), percentile(counts, 0.99), percentile(counts, 1.0)
    lo, hi = EDGES_MS[bin_of(150) - 1], EDGES_MS[bin_of(150)]
    assert lo <= p50 <= hi and lo <= p99 <= hi
    assert EDGES_MS[bin_of(5000) - 1] <= p100 <= EDGES_MS[bin_of(5000)]
    assert percentile([0] * N_BINS, 0.5) is None
