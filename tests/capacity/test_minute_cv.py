"""The minute-rate CV measurement and the catalogue per workload kind (capacity.minute_cv, issue 45.3):
the catalogue's rows are what the measurement gives on the traces in data/, so the figures are
reproducible (python -m capacity.minute_cv …)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from capacity.minute_cv import catalogue, catalogue_cv, of_arrivals, of_counts
from capacity.traces import parse_trace

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize(("kind", "expected"), [("conversation", 0.21), ("coding", 1.04)])
def test_the_catalogue_is_what_the_public_traces_measure(kind, expected):
    row = catalogue_cv(kind)
    got = of_arrivals(parse_trace((DATA / row.trace).read_bytes()).arrival_s)
    assert got is not None
    assert round(got.minute_rate_cv, 2) == row.minute_rate_cv == expected
    # The words shown beside an answer carry the measurement's own figures.
    assert f"CV {got.count_cv:.3f}" in row.source and f"{got.poisson_cv:.3f}" in row.source
    assert f"{got.requests:,} requests in {got.minutes} whole minutes" in row.source


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match="coding, conversation"):
        catalogue_cv("chat")
    assert set(catalogue()) >= {"conversation", "coding"}


def test_poisson_noise_is_taken_out():
    """A steady Poisson stream's counts vary by 1/√mean; its rate does not vary at all."""
    rng = np.random.default_rng(1)
    steady = rng.poisson(300, size=(40, 60))
    got = of_counts(steady)
    assert got is not None
    assert got.count_cv == pytest.approx(300**-0.5, rel=0.05)
    assert got.minute_rate_cv < 0.02
    # Rates that are lognormal with CV 0.8 measure near 0.8 through the Poisson noise.
    sigma = np.sqrt(np.log1p(0.8**2))
    rates = 300 * np.exp(sigma * rng.standard_normal((200, 60)) - sigma**2 / 2)
    assert of_counts(rng.poisson(rates)).minute_rate_cv == pytest.approx(0.8, abs=0.04)


def test_a_daily_cycle_is_not_a_burst():
    """Hours at very different steady rates: each hour is measured against its own mean."""
    rng = np.random.default_rng(2)
    hours = [rng.poisson(rate, 60) for rate in (20, 300, 2000, 50)]
    assert of_counts(hours).minute_rate_cv < 0.05
    assert of_counts([np.concatenate(hours)]).minute_rate_cv > 1.0  # measured as one span it would look bursty


def test_only_whole_minutes_count():
    """A trace's last, partial minute would look calm: it is left out."""
    t = np.r_[np.arange(0, 120, 0.5), 120.1]  # two full minutes of 120, one request in a third
    got = of_arrivals(t)
    assert got is not None and got.minutes == 2 and got.requests == 240 and got.minute_rate_cv == 0
