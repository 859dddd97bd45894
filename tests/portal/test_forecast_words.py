"""Forecast method keys and "MASE" stay off people's pages (issue 48): a tenant's forecast page named
its method `ets_damped` and its error MASE. The page's own templates are rendered with a series as the
forecast run stores it (method keys in the method, the candidates, the selection's why and the earlier
forecasts), and the visible text holds none of the keys."""

from __future__ import annotations

import re

from django.template.loader import render_to_string

from forecasting.candidates import LEAD_ORDER, METHOD_WORDS
from tests.portal.test_page_numbers import _Text, machine_text

SERIES = {
    "model": "llama-test", "region": "us-test", "method": "ets_damped", "fig_id": "s1", "fig": {},
    "note": "replaced naive_weekly after the naive check", "holdout_error": 0.41, "best_naive_holdout_error": 0.5,
    "coverage": {"p50": 0.5, "p90": 0.9, "p99": 0.99}, "weekly": {},
    "candidates": [{"method": m, "errors": {"1": 0.5}, "selection_error": 0.5, "holdout_error": 0.6, "refused": ""}
                   for m in LEAD_ORDER],
    "selection": {"horizons": [1], "lead_weeks": 8, "runner_up": "theta", "unscored": [],
                  "why": "lowest error (scored at 1 weeks; MASE 0.50 at 1 weeks); runner-up mstl (0.55 weighted)"},
    "realised": {"lags": {"4": {"method": "level_shift", "forecast_mean": 1.0, "realised_mean": 1.1, "mase": 0.3,
                                "peaks_under_p90": 3, "weeks": 4}}, "widen": 1.0},
}  # fmt: skip
# "theta" is a word too ("theta method"): the keys whose words do not contain them.
KEYS = re.compile(r"\b(" + "|".join(k for k, v in METHOD_WORDS.items() if k not in v) + r")\b")


def _visible(html: str) -> str:
    p = _Text(code=False)
    p.feed(html)
    return " ".join(" ".join(p.parts).split())


def test_a_tenants_forecast_page_names_methods_and_errors_in_words(rf, db):
    request = rf.get("/planning/mine/")
    request.user = None
    html = render_to_string(
        "portal/planning/mine.html", {"tenant": {"name": "Acme", "slug": "acme"}, "series": [SERIES]}, request
    )
    text = _visible(html)
    assert KEYS.findall(text) == [] and machine_text(html) == []
    assert "exponential smoothing, damped trend" in text and "scaled error" in text
    assert "same hour last week" in text and "theta method" in text and "recent level after its last step" in text
