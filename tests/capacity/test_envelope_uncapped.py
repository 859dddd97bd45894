"""An envelope without a max length (the launch form before the max is filled in) has the plain
lognormal mean, not NaN (issue 22: the live sizing panel answered 500 while the person typed)."""

import math

import pytest

from capacity.envelope import envelope_lengths
from capacity.lengths import Z95


def test_uncapped_mean_is_the_lognormal_mean_and_caps_converge_to_it():
    q = envelope_lengths(800, 3000, math.inf)
    sigma = math.log(3000 / 800) / Z95
    assert q.mean == pytest.approx(math.exp(math.log(800) + sigma * sigma / 2), rel=1e-12)
    assert envelope_lengths(800, 3000, 1e9).mean == pytest.approx(q.mean, rel=1e-9)
    assert envelope_lengths(800, 3000, 6000).mean < q.mean
