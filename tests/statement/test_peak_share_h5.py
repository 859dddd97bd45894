"""The statement page's per-minute peak and p95 of use ÷ rate read as percentages, as the meters beside them
do: the demo's borrower showed its raw float (2.901816 / 0.0) next to "share of bought 28 %"."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.statement.test_borrowed_spilled import _period, mixed  # noqa: F401 - the fixture, reused
from tests.telemetry.helpers import client_for, person


@pytest.mark.django_db
def test_peak_and_p95_minute_read_as_percentages(mixed: Any, fleet: Any) -> None:  # noqa: F811
    _, borrower, _ = mixed
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    page = viewer.get(f"/entitlements/{borrower.uuid}/statement/", _period()).content.decode()
    csv = viewer.get(f"/entitlements/{borrower.uuid}/statement.csv", _period()).content.decode()
    shown = {
        k: _one(rf'data-figure="used\.{k}">([^<]*)<', page).replace("\xa0", " ")
        for k in ("peak_share_1m", "p95_share_1m")
    }
    # 90,000 wt in one minute against 1 CU × 1,000 wt/s = 60,000 wt a minute: 150 %; the CSV keeps the share
    assert shown == {"peak_share_1m": "150.0 %", "p95_share_1m": shown["p95_share_1m"]}
    assert "used.peak_share_1m,1.5\r\n" in csv
    p95 = float(_one(r"used\.p95_share_1m,([0-9.]+)", csv))
    assert shown["p95_share_1m"] == f"{p95 * 100:.1f} %"


def _one(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, pattern
    return m[1]
