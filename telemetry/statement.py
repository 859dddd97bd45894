"""The evidence statement (issue 17.1, CONTRACT §8): one entitlement, one period, what was promised
and what happened, read from the rollups only (never from raw events: a statement of a busy year must
not scan a year of events).

Totals read hour rollups for the whole hours of the period and minute rollups for its ragged edges,
so the work is bounded by the period's length, not by traffic. Per-minute figures (peak and p95 share,
borrowing above the own rate) read the minute rollups, which are kept 35 days (CONTRACT §6): older
minutes are gone and those figures then cover the kept minutes only.

What was bought comes from the entitlement's history (one snapshot per write, by database trigger),
so an amendment changes the CU from the moment it was made, and a window or a revocation stops it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.db.models import Max, Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from entitlements import roles
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Entitlement, EntitlementHistory
from entitlements.models.grants import BORROWING_CLASS
from entitlements.reasons import OUTSIDE_ENVELOPE, REASONS, RECLAIMED
from telemetry.budgets import budget_usage
from telemetry.histogram import percentile
from telemetry.models import (
    E2E_BINS,
    MIN_REV_BASE,
    OUTPUT_BINS,
    PROMPT_BINS,
    ROLLUP_MAX,
    ROLLUP_OUTCOMES,
    TTFT_BINS,
    HourRollup,
    MinuteRollup,
)

MAX_PERIOD = timedelta(days=400)
HOUR = timedelta(hours=1)


class PeriodError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Step:
    """CU bought over [start, end)."""

    start: datetime
    end: datetime
    cu: Decimal


def _when(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    t = value if isinstance(value, datetime) else parse_datetime(str(value))
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _in_force(snap: dict[str, Any]) -> tuple[datetime | None, datetime | None, Decimal]:
    """(active from, active until, CU) of one history snapshot; until is None when open-ended."""
    stops = [t for t in (_when(snap.get("ends_at")), _when(snap.get("revoked_at"))) if t is not None]
    return _when(snap.get("starts_at")), min(stops) if stops else None, Decimal(str(snap.get("cu") or 0))


def bought_steps(ent: Entitlement, start: datetime, end: datetime, history: list[Any] | None = None) -> list[Step]:
    """The CU bought at every moment of [start, end), from the history.

    The first snapshot governs back to its own window's start (a grant may be backdated); every later
    one governs from the moment it was written. Within each, only its window [starts_at, min(ends_at,
    revoked_at)) counts. `history`: the entitlement's (at, snapshot) rows in order, when the caller read
    many entitlements' at once (portal.usage_meters)."""
    rows = (
        history
        if history is not None
        else list(
            EntitlementHistory.objects.filter(entitlement_id=ent.pk).exclude(op="delete").values_list("at", "snapshot")
        )
    )
    if not rows:  # no trigger ran (rows written before the triggers existed): the row as it is now
        rows = [
            (
                ent.created_at,
                {"starts_at": ent.starts_at, "ends_at": ent.ends_at, "revoked_at": ent.revoked_at, "cu": ent.cu},
            )
        ]
    steps: list[Step] = []
    for i, (at, snap) in enumerate(rows):
        lo = start if i == 0 else max(start, _when(at) or start)
        hi = end if i == len(rows) - 1 else min(end, _when(rows[i + 1][0]) or end)
        active_from, active_until, cu = _in_force(snap)
        a = max(lo, active_from or lo)
        b = min(hi, active_until or hi)
        if b > a and cu > 0:
            if steps and steps[-1].end == a and steps[-1].cu == cu:
                steps[-1] = Step(steps[-1].start, b, cu)
            else:
                steps.append(Step(a, b, cu))
    return steps


def _scope(ent: Entitlement) -> Q:
    """Its own events, plus unattributed events of its exact scope (e.g. platform throttles), as the
    live entitlement page counts them (telemetry.selectors.entitlement_series)."""
    return Q(entitlement=str(ent.uuid)) | Q(
        entitlement="",
        tenant=ent.tenant.slug,
        project=ent.project.slug if ent.project is not None else "",
        model=ent.model.slug,
        region=ent.region.slug,
        traffic_class=ent.traffic_class_id,
    )


def _pieces(start: datetime, end: datetime) -> list[tuple[type, datetime, datetime]]:
    """Hour rollups for the whole hours inside [start, end), minute rollups for the edges."""
    first = start.replace(minute=0, second=0, microsecond=0)
    first = first if first == start else first + HOUR
    last = end.replace(minute=0, second=0, microsecond=0)
    if last <= first:
        return [(MinuteRollup, start, end)]
    return [(MinuteRollup, start, first), (HourRollup, first, last), (MinuteRollup, last, end)]


_SUMS = {"n": "requests", "est": "estimated_wt", "act": "actual_wt", "prompt": "prompt_tokens"}
_SUMS |= {"output": "output_tokens", "slo": "slo_met", "slo_n": "slo_total"}
_SUMS |= {c: c for c in ROLLUP_OUTCOMES}
_BINS = TTFT_BINS + E2E_BINS + PROMPT_BINS + OUTPUT_BINS


def _totals(scope: Q, start: datetime, end: datetime) -> dict[tuple[str, str], dict[str, float]]:
    """(decision, reason) → summed columns (and the latency histogram bins) over the period."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for model, a, b in _pieces(start, end):
        if b <= a:
            continue
        rows = (
            model.objects.filter(scope, bucket__gte=a, bucket__lt=b)  # type: ignore[attr-defined]  # concrete rollups
            .values("decision", "reason")
            .annotate(
                **{k: Sum(v) for k, v in _SUMS.items()}, **{f: Sum(f) for f in _BINS}, **{f: Max(f) for f in ROLLUP_MAX}
            )
            .order_by()
        )
        for r in rows:
            acc = out.setdefault((r["decision"], r["reason"]), {})
            for k, v in r.items():
                if k in ROLLUP_MAX:
                    acc[k] = max(acc.get(k, 0), v or 0)
                elif k not in ("decision", "reason"):
                    acc[k] = acc.get(k, 0) + (v or 0)
    return out


def _minutes(scope: Q, start: datetime, end: datetime) -> dict[datetime, float]:
    """Settled wt per minute of [start, end) (a request counts in the minute it completed)."""
    rows = (
        MinuteRollup.objects.filter(scope, bucket__gte=start, bucket__lt=end, decision="complete")
        .values("bucket")
        .annotate(wt=Sum("actual_wt"))
        .order_by()
    )
    return {_when(r["bucket"]): float(r["wt"] or 0) for r in rows if r["wt"]}  # type: ignore[misc]


def _platform_hours(scope: Q, start: datetime, end: datetime) -> dict[str, int]:
    """Per hour of the period, the platform's latency misses (served requests inside their envelope that
    missed the SLO, telemetry.envelopes): hour rollups for whole hours, minute rollups at the edges."""
    hours: dict[str, int] = {}
    for model, a, b in _pieces(start, end):
        if b <= a:
            continue
        rows = (
            model.objects.filter(scope, bucket__gte=a, bucket__lt=b, decision="complete", slo_inside_missed__gt=0)  # type: ignore[attr-defined]
            .values("bucket")
            .annotate(n=Sum("slo_inside_missed"))
            .order_by()
        )
        for r in rows:
            hour = _when(r["bucket"]).replace(minute=0).isoformat()  # type: ignore[union-attr]
            hours[hour] = hours.get(hour, 0) + int(r["n"])
    return dict(sorted(hours.items()))


def _cu_at(steps: list[Step], t: datetime) -> Decimal:
    for s in steps:
        if s.start <= t < s.end:
            return s.cu
    return Decimal(0)


def _minute_figures(steps: list[Step], used: dict[datetime, float], r_wt_per_s: float) -> dict[str, Any]:
    """Peak and p95 (nearest rank, idle minutes counted as 0) of per-minute use ÷ the rate bought in
    that minute, over the minutes something was bought; and the wt above the own rate (borrowed)."""
    active = sum(math.ceil((s.end - s.start).total_seconds() / 60) for s in steps)
    shares: list[float] = []
    above = 0.0
    for t, wt in used.items():
        rate = float(_cu_at(steps, t)) * r_wt_per_s * 60
        above += max(0.0, wt - rate)
        if rate > 0:
            shares.append(wt / rate)
    if not active:
        return {"peak": None, "p95": None, "above_wt": above}
    shares.sort()
    rank = math.ceil(0.95 * active)  # 1-based; the first (active − len(shares)) ranks are idle minutes
    zeros = active - len(shares)
    p95 = 0.0 if rank <= zeros else shares[rank - zeros - 1]
    return {"peak": round(max(shares), 6) if shares else 0.0, "p95": round(p95, 6), "above_wt": above}


def _reclaim_p95_s(ent: Entitlement, start: datetime, end: datetime) -> float | None:
    """p95 of the pool's reclaim latencies in the period. admission sits above telemetry in the
    layers, so its table is looked up by name (a read, no code of admission runs)."""
    reclaim = apps.get_model("admission", "ReclaimEvent")
    ms = sorted(
        reclaim.objects.filter(pool_id=ent.pool_id, at__gte=start, at__lt=end).values_list("latency_ms", flat=True)
    )
    if not ms:
        return None
    return round(ms[math.ceil(0.95 * len(ms)) - 1] / 1000.0, 3)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 6) if b else None


def statement_entitlement(user: Any, uuid: Any) -> Entitlement | None:
    """The entitlement if this person may read its statement: staff any, members their tenant's. Gateways
    see every entitlement for enforcement, but a statement is for people: None (→ 404) for them."""
    r = roles.roles_of(user)
    qs = Entitlement.objects.select_related(
        "tenant", "project", "model", "region", "pool__accelerator", "traffic_class"
    )
    if r & roles.STAFF_ROLES:
        return qs.filter(uuid=uuid).first()
    tenant = roles.tenant_of(user)
    if tenant is None or not r & {roles.VIEWER, roles.REQUESTER}:
        return None
    return qs.filter(uuid=uuid, tenant=tenant).first()


def resolve_period(start: datetime | None, end: datetime | None, now: datetime) -> tuple[datetime, datetime]:
    """Default: the last 30 days to now. Both are floored to the minute (the finest rollup)."""
    end = (end or now).astimezone(UTC).replace(second=0, microsecond=0)
    start = (start or end - timedelta(days=30)).astimezone(UTC).replace(second=0, microsecond=0)
    if end <= start:
        raise PeriodError("end", "must be at least a minute after start")
    if end - start > MAX_PERIOD:
        raise PeriodError("start", "a statement covers at most 400 days")
    return start, end


def statement(ent: Entitlement, start: datetime, end: datetime) -> dict[str, Any]:
    """CONTRACT §8's shape, with a few extra keys that show where a figure came from."""
    scope = _scope(ent)
    r_wt = ent.model.r_wt_per_s
    steps = bought_steps(ent, start, end)
    bought_cu_h = sum(float(s.cu) * (s.end - s.start).total_seconds() / 3600 for s in steps)
    tot = _totals(scope, start, end)

    def total(decision: str, key: str = "n") -> float:
        return sum(v.get(key, 0) for (d, _), v in tot.items() if d == decision)

    by_reason = {reason: int(v["n"]) for (d, reason), v in sorted(tot.items()) if d == "throttle"}
    party = {"tenant": 0, "platform policy": 0, "platform": 0}
    for reason, n in by_reason.items():
        party[REASONS[reason].responsible if reason in REASONS else "platform"] += n
    admitted, throttled = int(total("admit")), sum(by_reason.values())
    attempted = admitted + throttled
    completed = int(total("complete"))
    # Served is `status: ok` (issue 33); an errored, cancelled or expired completion is shown apart
    not_served = {k: int(total("complete", f"status_{k}")) for k in ("error", "cancelled", "expired")}
    served = completed - sum(not_served.values())
    used_wt = total("complete", "act")
    used_cu_h = used_wt / r_wt / 3600 if r_wt else 0.0
    minutes = _minute_figures(steps, _minutes(scope, start, end), r_wt)

    def bins(fields: tuple[str, ...], decision: str = "complete") -> list[int]:
        return [int(sum(v.get(f, 0) for (d, _), v in tot.items() if d == decision)) for f in fields]

    def largest(field: str, decision: str) -> int:
        return int(max((v.get(field, 0) for (d, _), v in tot.items() if d == decision), default=0))

    def shortest(field: str) -> int | None:
        """The shortest settled length (stored reversed, telemetry.models.ROLLUP_MAX); None: rows from
        before it was kept."""
        rev = largest(field, "complete")
        return MIN_REV_BASE - rev if rev else None

    ttft, e2e = bins(TTFT_BINS), bins(E2E_BINS)
    prompts, outputs = bins(PROMPT_BINS), bins(OUTPUT_BINS)
    slo_n, slo_met = int(total("complete", "slo_n")), int(total("complete", "slo"))
    blame = {k: int(total("complete", k)) for k in ROLLUP_OUTCOMES[:4]}
    inside_n = blame["slo_inside_met"] + blame["slo_inside_missed"]
    # the percentiles are read from log-spaced bins narrowed to the settled lengths' exact range, so
    # none lies above the longest or below the shortest (issue 33)
    p_max, o_max = largest("prompt_max", "complete"), largest("output_max", "complete")
    p_min, o_min = shortest("prompt_min_rev"), shortest("output_min_rev")
    observed = {
        "prompt_p50": _pct(prompts, 0.5, p_min, p_max),
        "prompt_p95": _pct(prompts, 0.95, p_min, p_max),
        "prompt_max": p_max if completed else None,
        "output_p50": _pct(outputs, 0.5, o_min, o_max),
        "output_p95": _pct(outputs, 0.95, o_min, o_max),
        "output_max": o_max if completed else None,
        # the store's in-flight count right after each admit: the peak is reached at an admit
        "concurrency_peak": largest("inflight_max", "admit") if admitted else None,
        "prompt_mean": _ratio(total("complete", "prompt"), completed),
        "output_mean": _ratio(total("complete", "output"), completed),
    }
    borrowed = ent.traffic_class_id == BORROWING_CLASS
    # the pool's one $ per CU-hour, the same the cost page and planning show (issue 33)
    rate = pool_cu_hour_rate(ent.pool)
    price = rate.usd_per_cu_hour
    billed = used_cu_h if borrowed else bought_cu_h
    return {
        "entitlement": str(ent.uuid),
        "period": {"start": start.isoformat(), "end": end.isoformat()},
        "bought": {
            "cu": float(steps[-1].cu) if steps else 0.0,
            "cu_hours": round(bought_cu_h, 6),
            "steps": [{"start": s.start.isoformat(), "end": s.end.isoformat(), "cu": float(s.cu)} for s in steps],
        },
        "used": {
            "wt": round(used_wt, 3),
            "cu_hours": round(used_cu_h, 6),
            "share": _ratio(used_cu_h, bought_cu_h),
            "peak_share_1m": minutes["peak"],
            "p95_share_1m": minutes["p95"],
        },
        "requests": {
            "attempted": attempted,
            "admitted": admitted,
            "served": served,
            # completions that were not served, by status; served + these = every completion
            "not_served": {**not_served, "total": completed - served},
            "throttled": {
                "total": throttled,
                "tenant": party["tenant"],
                "platform": party["platform policy"] + party["platform"],
                "by_party": party,
                "by_reason": by_reason,
            },
        },
        "latency": {
            "served": slo_n,
            "met": slo_met,
            "attainment": _ratio(slo_met, slo_n),
            "target": {"ttft_p99_ms": ent.ttft_p99_ms, "tpot_p99_ms": ent.tpot_p99_ms},
            # misses by whose they are, request by request (telemetry.envelopes): a served request inside
            # its envelope that missed is the platform's, whatever else happened in its minute; rollups
            # written before requests were judged one by one hold misses no one can judge: unclassified
            "missed": {
                "total": slo_n - slo_met,
                "platform": blame["slo_inside_missed"],
                "outside_envelope": blame["slo_outside_missed"],
                "unclassified": slo_n - slo_met - blame["slo_inside_missed"] - blame["slo_outside_missed"],
                "platform_hours": _platform_hours(scope, start, end),
            },
            # attainment of the requests the promise covers: served, inside their envelope
            "inside_envelope": {
                "served": inside_n,
                "met": blame["slo_inside_met"],
                "attainment": _ratio(blame["slo_inside_met"], inside_n),
            },
            # merged log-spaced histograms: within one bin (±26 %) of the exact value
            "observed": {"ttft_p99_ms": _pct(ttft, 0.99), "e2e_p99_ms": _pct(e2e, 0.99)},
        },
        "envelope": {
            "promised": {
                "max_prompt_tokens": ent.max_prompt_tokens,
                "max_output_tokens": ent.max_output_tokens,
                "prompt_p50": ent.prompt_p50,
                "prompt_p95": ent.prompt_p95,
                "output_p50": ent.output_p50,
                "output_p95": ent.output_p95,
                "max_concurrency": ent.max_concurrency,
            },
            # settled requests' lengths: percentiles from the merged length histograms (within one bin,
            # ±26 %), maxima and the concurrency peak exact
            "observed": observed,
            "within": _within(ent, observed),
            "outside": by_reason.get(OUTSIDE_ENVELOPE, 0),
            "share_outside": _ratio(by_reason.get(OUTSIDE_ENVELOPE, 0), attempted),
        },
        "borrowing": {
            # only best_effort borrows (CONTRACT §5): settled wt above its own rate, minute by minute
            "cu_hours": round(minutes["above_wt"] / r_wt / 3600, 6) if borrowed and r_wt else 0.0,
            "reclaims": by_reason.get(RECLAIMED, 0),
            "reclaim_latency_p95_s": _reclaim_p95_s(ent, start, end) if borrowed else None,
        },
        "cost": {
            "usd": round(billed * price, 2) if price is not None else None,
            "cu_hours": round(billed, 6),
            "usd_per_cu_hour": round(price, 4) if price is not None else None,
            "basis": (
                f"{'settled' if borrowed else 'bought'} {billed:,.4f} CU-hours × ${price:,.4f} per CU-hour"
                if price is not None
                else rate.derivation
            ),
            "derivation": rate.derivation,
        },
        # period budgets (issue 23) as settled in the budget's day and month containing the period's end
        "budget": budget_usage(ent, at=min(end, timezone.now())),
    }


def _pct(counts: list[int], q: float, lowest: float | None = None, highest: float | None = None) -> float | None:
    v = percentile(counts, q, lowest, highest)
    return None if v is None else round(v, 1)


def _within(ent: Entitlement, observed: dict[str, Any]) -> dict[str, bool | None]:
    """Each observed figure against its promised one (None: nothing observed)."""
    pairs = {
        "prompt_p50": ent.prompt_p50,
        "prompt_p95": ent.prompt_p95,
        "prompt_max": ent.max_prompt_tokens,
        "output_p50": ent.output_p50,
        "output_p95": ent.output_p95,
        "output_max": ent.max_output_tokens,
        "concurrency_peak": ent.max_concurrency,
    }
    return {k: None if observed[k] is None else observed[k] <= promised for k, promised in pairs.items()}
