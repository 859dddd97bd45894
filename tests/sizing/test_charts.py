"""Pure figure builders of the calculator."""

from __future__ import annotations

from portal.charts.sizing import day_cost_figure, kv_distribution_figure


def test_kv_figure_marks_p99_and_replica_capacity_within_scale():
    fig = kv_distribution_figure(edges=[0, 100, 200], time_fraction=[0.25, 0.75], p99=190, capacity_per_replica=250)

    assert fig["data"][0]["x"] == [50, 150]
    assert fig["data"][0]["y"] == [25.0, 75.0]
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [190, 250]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["p99 190", "1 replica holds 250"]


def test_kv_figure_names_a_far_away_capacity_instead_of_squashing_the_chart():
    fig = kv_distribution_figure(edges=[0, 100, 200], time_fraction=[0.5, 0.5], p99=150, capacity_per_replica=3_000_000)

    assert [s["x0"] for s in fig["layout"]["shapes"]] == [150]
    assert fig["layout"]["annotations"][1]["text"] == "1 replica holds 3,000,000 KV tokens (off scale →)"
    assert fig["layout"]["xaxis"]["range"] == [0, 206.0]


def test_day_figure_draws_provisioned_needed_and_cost():
    rows = [{"hour": h, "replicas_provisioned": 3, "replicas_needed": 1 + h % 3, "cost": 10.0 + h} for h in range(24)]
    fig = day_cost_figure(rows, currency="USD")

    assert [t["name"] for t in fig["data"]] == ["replicas provisioned", "replicas needed", "cost per hour (USD)"]
    assert fig["data"][1]["y"][:4] == [1, 2, 3, 1]
    assert fig["data"][2]["yaxis"] == "y2"
    assert fig["data"][2]["y"][23] == 33.0
