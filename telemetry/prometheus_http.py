"""Prometheus's HTTP API, read: one range query, and what a pull reports (issue 34.7).

Its own module so both pulls use it without importing each other: telemetry.prometheus (fleet
samples) dispatches the Atlas preset to telemetry.atlas_pull (usage samples), and both read through
here. It used to live in telemetry.prometheus, which atlas_pull imported back: a cycle.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TIMEOUT_S = 10


class PrometheusError(Exception):
    """Prometheus answered, but not with a usable result (bad query, error status)."""


@dataclass
class PullResult:
    samples: int = 0
    unknown_pools: set[str] = field(default_factory=set)
    unmapped_keys: set[str] = field(default_factory=set)  # the Atlas preset's api_keys not in its map
    dropped_series: int = 0  # series with no pool label: nothing to store them under
    errors: list[dict[str, Any]] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:  # noqa: S310 - operator-configured http(s) URL
        body = json.loads(resp.read())
    if body.get("status") != "success":
        raise PrometheusError(f"{body.get('errorType', 'error')}: {body.get('error', 'unknown')}")
    return body["data"]


def query_range(base_url: str, query: str, start: datetime, end: datetime, step_s: int) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}", "step": f"{step_s}s"}
    )
    data = _get(f"{base_url.rstrip('/')}/api/v1/query_range?{params}")
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"expected a matrix, got {data.get('resultType')}")
    return data["result"]
