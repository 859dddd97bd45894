"""What a scope actually sent in a period, request by request, from the raw admission events
(docs/planning.md "Which workload is replayed", issue 45.1).

Every reservation the scope asked for (admitted, or throttled for its own quota, concurrency or
budget) at its own arrival time and estimated weighted tokens: the bursts inside a minute are kept,
so a replay at the CU bought throttles what admission throttled. One query per scope and period,
streamed (PostgreSQL: one binary COPY, telemetry.recorded_pg; elsewhere the ORM's chunked iterator),
and bounded memory whatever the traffic: past `MAX_EXACT` requests the arrivals are merged into lumps of
one grain (`lump_grain`: 0.25 s, doubled until the window holds at most `MAX_EXACT` grains, 1 s for a
14-day window), each lump charged its requests' summed cost at its first arrival. On PostgreSQL a scope
whose minute rollups say more than `MAX_EXACT` is lumped by the server (10 M events: 0.3 M rows sent,
not 10 M); otherwise the client lumps once it has read more than that. A lump needs its level at once,
so lumping can only ask more CU, never less; the basis says when it happened.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from django.db import connection
from django.db.models import Q

from entitlements.models import Entitlement
from telemetry import recorded_pg
from telemetry.models import AdmissionEvent
from telemetry.usage import scope, scope_key, sums

# Throttles the tenant's own limits caused: the requests asked for the tenant's capacity (a platform
# throttle says nothing about what the tenant needs).
TENANT_GROW_REASONS = frozenset({"QUOTA_EXCEEDED", "CONCURRENCY_LIMIT", "BUDGET_EXHAUSTED"})
# Requests kept exactly (16 bytes each); past this, lumps (module docstring).
MAX_EXACT = 2_000_000
FIRST_GRAIN_S = 0.25
_CHUNK = 200_000

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Recorded:
    """Arrival seconds from the period's start, sorted, each with its cost; `throttled` how many the
    scope's own limits refused; `grain_s` 0 when every request is its own (no lumps)."""

    arrival_s: FloatArray
    cost_wt: FloatArray
    requests: int
    throttled: int
    grain_s: float

    @property
    def throttled_share(self) -> float:
        return self.throttled / self.requests if self.requests else 0.0


def events_q(ent: Entitlement) -> Q:
    """The entitlement's own events plus the unattributed ones of its exact scope (telemetry.usage.scope's
    rule, on the events' columns: there an unattributed event has no entitlement at all)."""
    tenant, project, model, region, traffic_class = scope_key(ent)
    return Q(entitlement=ent.uuid) | Q(
        entitlement__isnull=True,
        tenant=tenant,
        project=project,
        model=model,
        region=region,
        traffic_class=traffic_class,
    )


def asked(ent: Entitlement, start: datetime, end: datetime) -> Recorded:
    """The scope's reservations in [start, end) from the raw events (module docstring)."""
    qs = (
        AdmissionEvent.objects.filter(events_q(ent), ts__gte=start, ts__lt=end)
        .filter(Q(decision="admit") | Q(decision="throttle", reason__in=sorted(TENANT_GROW_REASONS)))
        .values_list("ts", "estimated_wt", "decision")
        .order_by()
    )
    span = (end - start).total_seconds()
    if connection.vendor == "postgresql" and expected(ent, start, end) > MAX_EXACT:
        grain = lump_grain(span)
        t, c, requests, throttled = recorded_pg.lumps(qs, start.timestamp(), grain)
        return Recorded(t, c, requests, throttled, grain)
    acc = _Requests(span)
    for t, c, thr in _chunks(qs, start.timestamp()):
        acc.add(t, c, thr)
    return acc.result()


def expected(ent: Entitlement, start: datetime, end: datetime) -> int:
    """How many reservations the scope's minute rollups say it asked for in the window: whether to lump
    on the server (telemetry.recorded_pg). A count the rollups miss costs time, not memory: the client
    lumps past MAX_EXACT whatever was expected."""
    rows = sums("minute", scope(ent), start, end, by=("decision", "reason"), fields=("n",))
    return sum(
        int(r["n"] or 0)
        for r in rows
        if r["decision"] == "admit" or (r["decision"] == "throttle" and r["reason"] in TENANT_GROW_REASONS)
    )


def lump_grain(span_s: float, bound: int | None = None) -> float:
    """The finest grain (FIRST_GRAIN_S doubling) at which a window of `span_s` holds at most `bound`
    grains: lumps can then never outnumber the bound, whatever the traffic or the order rows arrive in."""
    bound = bound or MAX_EXACT
    grain = FIRST_GRAIN_S
    while span_s / grain > bound:
        grain *= 2
    return grain


class _Requests:
    """Every request kept exactly until more than MAX_EXACT; then one lump per grain (`lump_grain`) in
    two dense arrays (first arrival, summed cost) indexed by the grain, each later chunk folded in with
    a bincount: memory bounded by the window's grains, not by its requests."""

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self.t: list[FloatArray] = []
        self.c: list[FloatArray] = []
        self.held = self.requests = self.throttled = 0
        self.grain = 0.0
        self.first: FloatArray | None = None
        self.total: FloatArray | None = None

    def add(self, t: FloatArray, c: FloatArray, throttled: int) -> None:
        self.requests += len(t)
        self.throttled += int(throttled)
        if self.first is not None:
            self._fold(t, c)
            return
        self.t.append(t)
        self.c.append(c)
        self.held += len(t)
        if self.held > MAX_EXACT:
            self.grain = lump_grain(self.span_s)
            size = int(math.ceil(self.span_s / self.grain)) + 1
            self.first, self.total = np.full(size, np.inf), np.zeros(size)
            for tk, ck in zip(self.t, self.c, strict=True):
                self._fold(tk, ck)
            self.t, self.c = [], []

    def _fold(self, t: FloatArray, c: FloatArray) -> None:
        assert self.first is not None and self.total is not None  # noqa: S101 - set before any fold
        key = np.clip(np.floor(t / self.grain).astype(np.intp), 0, len(self.first) - 1)
        self.total += np.bincount(key, weights=c, minlength=len(self.total))
        np.minimum.at(self.first, key, t)

    def result(self) -> Recorded:
        if self.first is not None and self.total is not None:
            kept = np.flatnonzero(np.isfinite(self.first))  # grains in time order: sorted already
            return Recorded(self.first[kept], self.total[kept], self.requests, self.throttled, self.grain)
        if not self.t:
            return Recorded(np.zeros(0), np.zeros(0), 0, 0, 0.0)
        t, c = np.concatenate(self.t), np.concatenate(self.c)
        order = np.argsort(t, kind="stable")
        return Recorded(t[order], c[order], self.requests, self.throttled, 0.0)


def _chunks(qs: object, origin: float) -> Iterator[tuple[FloatArray, FloatArray, int]]:
    if connection.vendor == "postgresql":
        yield from recorded_pg.each_request(qs, origin)
        return
    rows = qs.iterator(chunk_size=_CHUNK)  # type: ignore[attr-defined]
    while True:
        block = [r for _, r in zip(range(_CHUNK), rows, strict=False)]
        if not block:
            return
        t = np.fromiter((r[0].timestamp() - origin for r in block), dtype=np.float64, count=len(block))
        c = np.fromiter((r[1] or 0.0 for r in block), dtype=np.float64, count=len(block))
        yield t, c, sum(1 for r in block if r[2] == "throttle")
