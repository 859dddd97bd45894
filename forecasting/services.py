"""Writes: request a run, claim it, plan it into chunks (forecasting.chunks does the rest).

A run is claimed with a compare-and-swap `update()`; a redelivered task may take over a run only
when its heartbeat is stale, i.e. its worker died. The claimant splits the run into chunks that
workers forecast in parallel, each claimed and written once; the last chunk to land finishes the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from forecasting import chunks, history, launch
from forecasting.models import ForecastRun
from runs import claims

HORIZON_WEEKS = chunks.HORIZON_WEEKS


ClaimLost = chunks.ClaimLost
stale_after = chunks.stale_after


class BadParameters(ValueError):
    pass


@dataclass(frozen=True)
class Parameters:
    lookback_days: int = 252  # 36 weeks: enough to score the 26-week horizon (docs/forecasting.md)
    batch_size: int = 100
    n_jobs: int = 1
    spike_pct: float = 20.0
    spike_hours: int = 3
    end: str | None = None
    # Sleep between batches: lets a background run yield the CPU on a small host (and lets a test
    # catch a run mid-way); it never changes results.
    pause_between_batches_s: float = 0.0
    # Series per chunk (a Celery task each); 0: FORECAST_CHUNK_SIZE.
    chunk_size: int = 0

    LIMITS = {
        "lookback_days": (3, 365),
        "batch_size": (1, 1000),
        "n_jobs": (1, 2),
        "spike_pct": (0, 500),
        "spike_hours": (0, 24),
        "pause_between_batches_s": (0, 60),
        "chunk_size": (0, 10_000),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Parameters:
        raw = dict(raw or {})
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise BadParameters(f"unknown parameter {sorted(unknown)[0]}")
        values: dict[str, Any] = {}
        for name, (lo, hi) in cls.LIMITS.items():
            if name in raw:
                kind = type(getattr(cls, name))
                try:
                    v = kind(raw[name])
                except (TypeError, ValueError):
                    raise BadParameters(f"{name} must be a number")
                if not lo <= v <= hi:
                    raise BadParameters(f"{name} must be within {lo}–{hi}")
                values[name] = v
        if raw.get("end") is not None:
            end = parse_datetime(str(raw["end"]))
            if end is None or end.tzinfo is None:
                raise BadParameters("end must be an ISO datetime with a timezone")
            values["end"] = end.isoformat()
        return cls(**values)

    def end_at(self) -> datetime:
        # self.end was parsed (and required to be an aware datetime) when the parameters were made.
        return history.floor_hour(parse_datetime(self.end) if self.end else timezone.now())  # type: ignore[arg-type]


def forecast_run_request(
    *,
    requested_by: Any = None,
    parameters: dict[str, Any] | None = None,
    trigger: str = "manual",
    background: bool | None = None,
) -> ForecastRun:
    """Create a queued run and hand it to a worker once the row is committed (forecasting.launch:
    under the embedded default, a thread beside the request unless background=False)."""
    params = Parameters.parse(parameters)
    with transaction.atomic():
        run = ForecastRun.objects.create(
            parameters={k: getattr(params, k) for k in Parameters.__dataclass_fields__},
            requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            trigger=trigger,
        )
        run_id = str(run.pk)
        transaction.on_commit(lambda: launch.dispatch(run_id, background=background))
    return run


def forecast_run_claim(*, run_id: Any, worker: str) -> str:
    """'claimed', 'busy' (a live worker has it) or 'done': runs.claims.claim, progress back to 0."""
    return claims.claim(ForecastRun, pk=run_id, worker=worker, progress=0)


def forecast_run_release(*, run_id: Any, worker: str) -> bool:
    """Give a claimed run back to the queue (before a retry for a transient error)."""
    return claims.release(ForecastRun, pk=run_id, worker=worker)


def forecast_run_fail(*, run_id: Any, worker: str, error: str) -> None:
    claims.fail(ForecastRun, pk=run_id, worker=worker, error=error)


def forecast_run_plan(*, run_id: Any, worker: str) -> list[int]:
    """Split the claimed run into chunks (forecasting.chunks); the ids of the chunks still to do."""
    params = Parameters.parse(ForecastRun.objects.values_list("parameters", flat=True).get(pk=run_id))
    return chunks.plan(run_id=run_id, worker=worker, chunk_size=params.chunk_size or settings.FORECAST_CHUNK_SIZE)
