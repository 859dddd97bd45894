"""What a scope actually sent in a period, request by request, from the raw admission events
(docs/planning.md "Which workload is replayed", issue 45.1).

Every reservation the scope asked for (admitted, or throttled for its own quota, concurrency or
budget) at its own arrival time and estimated weighted tokens: the bursts inside a minute are kept,
so a replay at the CU bought throttles what admission throttled. One query per scope and period,
streamed (PostgreSQL: each minute's requests packed by the server into one bytea, read through a
server-side cursor; elsewhere the ORM's chunked iterator), and
bounded memory whatever the traffic: past `MAX_EXACT` requests the arrivals are merged into lumps
of one `grain` (0.25 s, doubling as needed), each lump charged its requests' summed cost at its first
arrival. A lump needs its level at once, so lumping can only ask more CU, never less; the basis says
when it happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from django.db import connection
from django.db.models import Q

from entitlements.models import Entitlement
from telemetry.models import AdmissionEvent
from telemetry.usage import scope_key

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
        .values_list("id", "ts", "estimated_wt", "decision")
        .order_by()
    )
    origin = start.timestamp()
    t_all: list[FloatArray] = []
    c_all: list[FloatArray] = []
    held, requests, throttled, grain = 0, 0, 0, 0.0
    for t, c, thr in _chunks(qs, origin):
        requests += len(t)
        throttled += int(thr)
        t_all.append(t)
        c_all.append(c)
        held += len(t)
        while held > MAX_EXACT:
            grain = FIRST_GRAIN_S if grain == 0 else grain * 2
            merged = _lumps(np.concatenate(t_all), np.concatenate(c_all), grain)
            t_all, c_all, held = [merged[0]], [merged[1]], len(merged[0])
    if not t_all:
        return Recorded(np.zeros(0), np.zeros(0), 0, 0, 0.0)
    t, c = np.concatenate(t_all), np.concatenate(c_all)
    if grain:
        t, c = _lumps(t, c, grain)
    order = np.argsort(t, kind="stable")
    return Recorded(t[order], c[order], requests, throttled, grain)


def _lumps(t: FloatArray, c: FloatArray, grain: float) -> tuple[FloatArray, FloatArray]:
    """Arrivals within one grain as one request at the first of them, at their summed cost."""
    order = np.argsort(t, kind="stable")
    t, c = t[order], c[order]
    key = np.floor(t / grain)
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return t[first], np.add.reduceat(c, first)


def _chunks(qs: object, origin: float) -> Iterator[tuple[FloatArray, FloatArray, int]]:
    if connection.vendor == "postgresql":
        yield from _pg_chunks(qs, origin)
        return
    rows = qs.iterator(chunk_size=_CHUNK)  # type: ignore[attr-defined]
    while True:
        block = [r for _, r in zip(range(_CHUNK), rows, strict=False)]
        if not block:
            return
        t = np.fromiter((r[1].timestamp() - origin for r in block), dtype=np.float64, count=len(block))
        c = np.fromiter((r[2] or 0.0 for r in block), dtype=np.float64, count=len(block))
        yield t, c, sum(1 for r in block if r[3] == "throttle")


_PACKED = (
    "SELECT string_agg(float8send(date_part('epoch', s.ts) - %s) || "
    "float8send(COALESCE(s.estimated_wt, 0)::float8), ''::bytea), "
    "count(*) FILTER (WHERE s.decision = 'throttle') "
    "FROM ({inner}) AS s(id, ts, estimated_wt, decision) GROUP BY s.id / 2000"
)
_PAIR = np.dtype([("t", ">f8"), ("c", ">f8")])
_GROUPS_PER_FETCH = 500


def _pg_chunks(qs: object, origin: float) -> Iterator[tuple[FloatArray, FloatArray, int]]:
    """PostgreSQL: the server packs the requests, 2,000 ids at a time (grouping on the id costs less than
    on the time; the order is restored by the caller's sort), into one bytea of (arrival, cost) pairs as
    big-endian float8 (one aggregate, so the two stay paired), read through a server-side cursor a few
    hundred groups at a time and parsed by numpy: no Python object per request."""
    sql, params = qs.query.sql_with_params()  # type: ignore[attr-defined]
    # The ORM's own SQL inside, its values bound as parameters.
    packed = _PACKED.format(inner=sql)
    with connection.chunked_cursor() as cursor:
        cursor.execute(packed, [origin, *params])
        while rows := cursor.fetchmany(_GROUPS_PER_FETCH):
            pairs = np.frombuffer(b"".join(bytes(r[0]) for r in rows), dtype=_PAIR)
            yield pairs["t"].astype(np.float64), pairs["c"].astype(np.float64), sum(int(r[1]) for r in rows)
