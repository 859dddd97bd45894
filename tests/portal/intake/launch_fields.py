"""A complete launch request's fields (tests.factories.build_fleet's model and region), shared by the
intake, alerts and security tests. Its arithmetic is in tests/portal/intake/conftest.py's docstring."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from entitlements.models import Region


def complete_fields(fleet: Any, **over: Any) -> dict[str, Any]:
    today = timezone.now().date()
    data = {
        "title": "Assistant launch",
        "model": fleet.pool_a.model,
        "regions": [Region.objects.get(slug="us-test")],
        "launch_date": today,
        "end_date": today + timedelta(days=30),
        "traffic_class": "reserved",
        "max_prompt_tokens": 6000,
        "max_output_tokens": 2000,
        "prompt_p50": 1000,
        "prompt_p95": 4000,
        "output_p50": 200,
        "output_p95": 800,
        "max_concurrency": 64,
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 200,
        "streaming": True,
        "committed_basis": "rps",
        "committed_value": 10.0,
        "expected_basis": "rps",
        "expected_value": 12.0,
        "upside_basis": "rps",
        "upside_value": 20.0,
        "stress_basis": "wt_per_min",
        "stress_value": 3_000_000.0,
        "criticality": "high",
        "justification": "Public launch of the assistant.",
    }
    data.update(over)
    return data
