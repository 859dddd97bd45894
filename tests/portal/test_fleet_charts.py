from portal.charts.live import fleet_figures, with_range


def test_fleet_figures_one_line_per_pool_on_shared_axes():
    series = {
        "pool-b": [{"t": "t0", "util": 0.5, "kv": 0.25, "healthy": 6, "total": 9}],
        "pool-a": [{"t": "t0", "util": 0.75, "kv": 0.5, "healthy": 4, "total": 4},
                   {"t": "t1", "util": 0.25, "kv": 0.125, "healthy": 2, "total": 4}],
    }  # fmt: skip
    figs = fleet_figures(series)
    assert list(figs) == ["util", "kv", "healthy"]
    assert [t["name"] for t in figs["util"]["data"]] == ["pool-a", "pool-b"]
    assert figs["util"]["data"][0]["y"] == [0.75, 0.25]
    assert figs["kv"]["data"][1]["y"] == [0.25]
    # A zone failure shows as the healthy share stepping down: 4/4 → 2/4.
    assert figs["healthy"]["data"][0]["y"] == [1.0, 0.5]
    assert figs["healthy"]["data"][1]["y"] == [6 / 9]


def test_empty_range_is_pinned_and_labelled():
    fig = {"data": [{"type": "bar", "y": [0, 0]}], "layout": {}}
    out = with_range(fig, {"t": ["2026-01-01T00:00", "2026-01-01T01:00"]}, "nothing here")
    assert out["layout"]["xaxis"] == {"type": "date", "range": ["2026-01-01T00:00", "2026-01-01T01:00"]}
    assert out["layout"]["annotations"][0]["text"] == "nothing here"
