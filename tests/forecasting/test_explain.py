"""The planning pages explain each series (issue 32): method, why, error at the lead time, runner-up,
what the guard refused and the forecast made N weeks ago against what happened."""

from __future__ import annotations

import json
import re

import pytest

from tests.clients import web_client

SELECTION = {
    "lead_weeks": 26,
    "horizons": [1, 4, 13],
    "unscored": [26],
    "weights": {"1": 0.1, "4": 0.3, "13": 0.6},
    "runner_up": "theta",
    "why": "lowest error weighted toward the 26-week lead time (MASE 0.42 at 13 weeks)",
    "trend": {"slope_per_week": 0.4, "p_value": 0.0001, "significant": True, "backtest": "at 13 weeks 0.4 vs 2.1"},
    "chart": {"made_weeks_ago": 13, "forecast": [10.0] * 13, "actual": [11.0] * 13},
}
CANDIDATES = [
    {
        "method": "naive_daily",
        "selection_error": 9.1,
        "holdout_error": 8.0,
        "errors": {"1": 7.0, "4": 8.0, "13": 9.0},
        "refused": "week 1 level 4.20 outside 8.00–13.00",
    },
    {
        "method": "mstl",
        "selection_error": 0.42,
        "holdout_error": 0.5,
        "errors": {"1": 0.3, "4": 0.4, "13": 0.42},
        "refused": "",
    },
    {
        "method": "theta",
        "selection_error": 0.61,
        "holdout_error": 0.7,
        "errors": {"1": 0.5, "4": 0.6, "13": 0.61},
        "refused": "",
    },
]


@pytest.fixture(autouse=True)
def priced(fleet):
    from entitlements.models import Accelerator

    Accelerator.objects.update(cloud_on_demand_per_hour=2.0)


@pytest.fixture
def explained(finished):
    finished.series.filter(tenant_slug="acme").update(
        selection=SELECTION,
        candidates=CANDIDATES,
        realised={
            "lags": {
                "4": {
                    "method": "theta",
                    "forecast_mean": 8.0,
                    "realised_mean": 10.0,
                    "mase": 2.5,
                    "weeks": 4,
                    "peaks_under_p90": 1,
                }
            },
            "widen": 1.4,
        },
    )
    return finished


def _figures(html: str) -> dict[str, dict]:
    return {
        m[0]: json.loads(m[1]) for m in re.findall(r'<script id="([^"]+)" type="application/json">(.*?)</script>', html)
    }


def test_the_operator_page_explains_each_series_with_its_backtest_chart(people, explained):
    html = web_client(people["operator"]).get("/planning/").content.decode()
    assert "Why seasonal-trend decomposition, its error at the lead time, its backtest" in html
    assert "Scored at 1, 4, 13 weeks; not scorable on this history: 26 weeks" in html
    assert "Lead time 26 weeks. Runner-up: theta method." in html
    assert "week 1 level 4.20 outside 8.00–13.00" in html  # what the guard refused, beside its errors
    assert "allowed to carry the forecast out of the recent range" in html
    assert "made 4 wk ago with theta method: 8.00 CU vs 10.00 happened" in html and "Bands × 1.40" in html
    figs = [f for f in _figures(html).values() if "made 13 weeks ago" in f["layout"]["title"]["text"]]
    assert [(t["name"], t["y"][0]) for t in figs[0]["data"]] == [
        ("happened", 11.0),
        ("forecast (seasonal-trend decomposition)", 10.0),
    ]
    # the other series, with no backtest stored, says so instead of drawing one
    assert "history too short to score any horizon" in html


def test_a_tenant_sees_the_explanation_of_its_series(people, explained):
    html = web_client(people["member"]).get("/planning/mine/").content.decode()
    assert "Runner-up: theta method." in html and "made 13 weeks ago" in html
