"""Which minute-rate CV an envelope is replayed at, and where it came from (docs/planning.md "The
minute-rate CV", docs/contract.md §3, issue 45.3). `envelope_cv` is the one place the default is chosen:
the calculator (sizing.parsing) and intake (portal.selectors) both ask it.

In order: the CV the caller stated; else what the same tenant × model × traffic class sent over the
last RECORDED_DAYS (its minute rollups, every reservation admitted or throttled, measured hour by hour
as capacity.minute_cv does); else the catalogue's default for the workload kind (data/workload_cv.csv,
each measured from a public trace). A stated CV below the recorded one is answered as stated, with a
MINUTE_CV_BELOW_RECORDED warning beside it: the tenant's own traffic has been burstier than that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db.models import Q
from django.utils import timezone

from capacity.minute_cv import DEFAULT_KIND, MinuteCv, catalogue_cv, of_counts
from telemetry.usage import sums

RECORDED_DAYS = 28
# An hour counts once it holds this many requests (one a minute on average): a quieter hour's counts
# are mostly Poisson noise, and its CV says little about bursts.
MIN_HOUR_REQUESTS = 60
# Differences below this are rounding (the CV is shown to two places).
TOLERANCE = 0.005
BELOW_RECORDED = "MINUTE_CV_BELOW_RECORDED"


@dataclass(frozen=True)
class EnvelopeCv:
    value: float
    source: str  # words, shown beside the answer
    origin: str  # "stated" | "recorded" | "catalogue"
    recorded: float | None = None
    warnings: tuple[dict[str, Any], ...] = field(default=())

    @property
    def is_default(self) -> bool:
        return self.origin != "stated"

    def to_dict(self) -> dict[str, Any]:
        return {"minute_rate_cv": self.value, "cv_source": self.source, "recorded_minute_rate_cv": self.recorded}


def recorded_cv(tenant: str, model: str, traffic_class: str, *, now: datetime | None = None) -> MinuteCv | None:
    """The tenant × model × class's minute-rate CV over the last RECORDED_DAYS (None without one busy hour)."""
    end = (now or timezone.now()).replace(second=0, microsecond=0)
    # Not cached: one grouped read of at most 40,320 minutes, and a cached figure would outlive new traffic.
    rows = sums(
        "minute",
        Q(tenant=tenant, model=model, traffic_class=traffic_class),
        end - timedelta(days=RECORDED_DAYS),
        end,
        by=("bucket",),
        fields=("n",),
        decision__in=("admit", "throttle"),
    )
    return _measure(rows)


def _measure(rows: list[dict[str, Any]]) -> MinuteCv | None:
    if not rows:
        return None
    minute = np.array([int(r["bucket"].timestamp() // 60) for r in rows], dtype=np.int64)
    n = np.array([float(r["n"] or 0) for r in rows])
    hour = minute // 60
    counts = np.zeros((int(hour.max() - hour.min()) + 1, 60))
    np.add.at(counts, (hour - hour.min(), minute % 60), n)
    busy = counts[counts.sum(axis=1) >= MIN_HOUR_REQUESTS]
    return of_counts(busy) if len(busy) else None


def envelope_cv(
    *,
    stated: float | None = None,
    tenant: str | None = None,
    model: str | None = None,
    traffic_class: str | None = None,
    kind: str | None = None,
    now: datetime | None = None,
) -> EnvelopeCv:
    """The envelope's minute-rate CV and its source (module docstring). `kind` defaults to conversation."""
    rec = recorded_cv(tenant, model, traffic_class, now=now) if tenant and model and traffic_class else None
    scope = f"{tenant} × {model} × {(traffic_class or '').replace('_', ' ')}"
    if stated is not None:
        warnings: tuple[dict[str, Any], ...] = ()
        if rec is not None and stated < rec.minute_rate_cv - TOLERANCE:
            warnings = (
                {
                    "code": BELOW_RECORDED,
                    "message": (
                        f"the stated minute-rate CV {stated:g} is below the {rec.minute_rate_cv:.2f} that "
                        f"{scope} sent over the last {RECORDED_DAYS} days: the answer assumes calmer traffic than "
                        f"recorded and may throttle more than its target"
                    ),
                },
            )
        return EnvelopeCv(float(stated), "stated", "stated", rec.minute_rate_cv if rec else None, warnings)
    if rec is not None:
        return EnvelopeCv(
            round(rec.minute_rate_cv, 2),
            f"recorded: what {scope} sent over the last {RECORDED_DAYS} days ({rec.words()})",
            "recorded",
            rec.minute_rate_cv,
        )
    cat = catalogue_cv(kind or DEFAULT_KIND)
    return EnvelopeCv(cat.minute_rate_cv, f"the catalogue default for {cat.kind} traffic: {cat.source}", "catalogue")
