"""The evidence statement (issue 17.1, docs/contract.md §8): one entitlement, one period, what was promised
and what happened, read from the rollups only (never from raw events: a statement of a busy year must
not scan a year of events).

Totals read hour rollups for the whole hours of the period and minute rollups for its ragged edges,
so the work is bounded by the period's length, not by traffic. Per-minute figures (peak and p95 share,
borrowing above the own rate) read the minute rollups, which are kept 35 days (docs/contract.md §6): older
minutes are gone and those figures then cover the kept minutes only.

What was bought comes from the entitlement's history (entitlements.bought), so an amendment changes
the CU from the moment it was made, and a window or a revocation stops it; what was used is read
through telemetry.usage (the entitlement's scope, the hour/minute split, the rollup sums).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.apps import apps
from django.utils import timezone

from entitlements import roles
from entitlements.bought import Step, bought_steps, cu_at, cu_hours, when
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Entitlement
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
    ROLLUP_SOURCE_KINDS,
    ROLLUP_SOURCES,
    TTFT_BINS,
)
from telemetry.periods import check_period
from telemetry.usage import period_sums, ratio, scope, sums

_FIELDS = ("n", "est", "act", "prompt", "out", "slo", "slo_n", *ROLLUP_OUTCOMES, *ROLLUP_SOURCES)
_BINS = TTFT_BINS + E2E_BINS + PROMPT_BINS + OUTPUT_BINS


class _Totals:
    """(decision, reason) → summed columns (and the latency and length histogram bins, and the maxima)
    over the period, and the figures read from them."""

    def __init__(self, where: Any, start: datetime, end: datetime) -> None:
        self.by: dict[tuple[str, str], dict[str, float]] = {}
        rows = period_sums(where, start, end, by=("decision", "reason"), fields=_FIELDS + _BINS, maxima=ROLLUP_MAX)
        for r in rows:
            acc = self.by.setdefault((r["decision"], r["reason"]), {})
            for k, v in r.items():
                if k in ROLLUP_MAX:
                    acc[k] = max(acc.get(k, 0), v or 0)
                elif k not in ("decision", "reason"):
                    acc[k] = acc.get(k, 0) + (v or 0)

    def total(self, decision: str, key: str = "n") -> float:
        return sum(v.get(key, 0) for (d, _), v in self.by.items() if d == decision)

    def bins(self, fields: tuple[str, ...], decision: str = "complete") -> list[int]:
        return [int(self.total(decision, f)) for f in fields]

    def largest(self, field: str, decision: str) -> int:
        return int(max((v.get(field, 0) for (d, _), v in self.by.items() if d == decision), default=0))

    def shortest(self, field: str) -> int | None:
        """The shortest settled length (stored reversed, telemetry.models.ROLLUP_MAX); None: rows from
        before it was kept."""
        rev = self.largest(field, "complete")
        return MIN_REV_BASE - rev if rev else None

    def throttled_by_reason(self) -> dict[str, int]:
        return {reason: int(v["n"]) for (d, reason), v in sorted(self.by.items()) if d == "throttle"}


def _minutes(where: Any, start: datetime, end: datetime) -> dict[datetime, float]:
    """Settled wt per minute of [start, end) (a request counts in the minute it completed)."""
    rows = sums("minute", where, start, end, by=("bucket",), fields=("act",), decision="complete")
    return {when(r["bucket"]): float(r["act"] or 0) for r in rows if r["act"]}  # type: ignore[misc]


def _platform_hours(where: Any, start: datetime, end: datetime) -> dict[str, int]:
    """Per hour of the period, the platform's latency misses (served requests inside their envelope that
    missed the SLO, telemetry.envelopes): hour rollups for whole hours, minute rollups at the edges."""
    hours: dict[str, int] = {}
    rows = period_sums(
        where, start, end, by=("bucket",), fields=("slo_inside_missed",), decision="complete", slo_inside_missed__gt=0
    )
    for r in rows:
        hour = when(r["bucket"]).replace(minute=0).isoformat()  # type: ignore[union-attr]
        hours[hour] = hours.get(hour, 0) + int(r["slo_inside_missed"])
    return dict(sorted(hours.items()))


def minute_figures(steps: list[Step], used: dict[datetime, float], r_wt_per_s: float) -> dict[str, Any]:
    """Peak and p95 (nearest rank, idle minutes counted as 0) of per-minute use ÷ the rate bought in
    that minute, over the minutes something was bought; and the wt above the own rate (borrowed)."""
    active = sum(math.ceil((s.end - s.start).total_seconds() / 60) for s in steps)
    shares: list[float] = []
    above = 0.0
    for t, wt in used.items():
        rate = float(cu_at(steps, t)) * r_wt_per_s * 60
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
    check_period(start, end)  # floored to the minute: "after" means at least a minute after
    return start, end


def statement(ent: Entitlement, start: datetime, end: datetime) -> dict[str, Any]:
    """docs/contract.md §8's shape, with a few extra keys that show where a figure came from. Each figure is
    computed once, by the block that shows it; the blocks that show it again take it from there."""
    where = scope(ent)
    r_wt = ent.model.r_wt_per_s
    steps = bought_steps(ent, start, end)
    bought_cu_h = cu_hours(steps)
    tot = _Totals(where, start, end)
    requests = _Requests.read(tot)
    used_wt = tot.total("complete", "act")
    used_cu_h = used_wt / r_wt / 3600 if r_wt else 0.0
    minutes = minute_figures(steps, _minutes(where, start, end), r_wt)
    borrowed = ent.traffic_class_id == BORROWING_CLASS
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
            "share": ratio(used_cu_h, bought_cu_h),
            "peak_share_1m": minutes["peak"],
            "p95_share_1m": minutes["p95"],
        },
        "requests": requests.block(),
        "latency": _latency(ent, tot, _platform_hours(where, start, end)),
        "envelope": _envelope(ent, tot, requests),
        "borrowing": {
            # only best_effort borrows (docs/contract.md §5): settled wt above its own rate, minute by
            # minute, an estimate kept for compatibility; `sources.borrowed` counts what was admitted as borrowed
            "cu_hours": round(minutes["above_wt"] / r_wt / 3600, 6) if borrowed and r_wt else 0.0,
            "reclaims": requests.by_reason.get(RECLAIMED, 0),
            "reclaim_latency_p95_s": _reclaim_p95_s(ent, start, end) if borrowed else None,
        },
        "sources": _sources(tot, r_wt, _served_from(where, start, end)),
        "cost": _cost(ent, used_cu_h if borrowed else bought_cu_h, borrowed),
        # period budgets (issue 23) as settled in the budget's day and month containing the period's end
        "budget": budget_usage(ent, at=min(end, timezone.now())),
    }


@dataclass(frozen=True)
class _Requests:
    """Attempts, admissions, completions and throttles of the period, counted once."""

    admitted: int
    by_reason: dict[str, int]
    party: dict[str, int]
    completed: int
    not_served: dict[str, int]

    @classmethod
    def read(cls, tot: _Totals) -> _Requests:
        by_reason = tot.throttled_by_reason()
        party = {"tenant": 0, "platform policy": 0, "platform": 0, "unknown": 0}  # unknown: IMPORTED history
        for reason, n in by_reason.items():
            party[REASONS[reason].responsible if reason in REASONS else "platform"] += n
        # Served is `status: ok` (issue 33); an errored, cancelled or expired completion is shown apart
        not_served = {k: int(tot.total("complete", f"status_{k}")) for k in ("error", "cancelled", "expired")}
        return cls(int(tot.total("admit")), by_reason, party, int(tot.total("complete")), not_served)

    @property
    def throttled(self) -> int:
        return sum(self.by_reason.values())

    @property
    def attempted(self) -> int:
        return self.admitted + self.throttled

    @property
    def served(self) -> int:
        return self.completed - sum(self.not_served.values())

    def block(self) -> dict[str, Any]:
        served = self.served
        return {
            "attempted": self.attempted,
            "admitted": self.admitted,
            "served": served,
            # completions that were not served, by status; served + these = every completion
            "not_served": {**self.not_served, "total": self.completed - served},
            "throttled": {
                "total": self.throttled,
                "tenant": self.party["tenant"],
                "platform": self.party["platform policy"] + self.party["platform"],
                "by_party": self.party,
                "by_reason": self.by_reason,
            },
        }


def _sources(tot: _Totals, r_wt: float, served_from: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Traffic by where its capacity came from, as the events say (issue 36): requests admitted on borrowed
    pool room or spilled to the entitlement's spillover target, and the wt they settled; spilled traffic
    also by the pool that served it (`served_from`)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ROLLUP_SOURCE_KINDS:
        wt = tot.total("complete", f"{kind}_wt")
        out[kind] = _source(
            int(tot.total("admit", f"{kind}_requests")), int(tot.total("complete", f"{kind}_requests")), wt, r_wt
        )
    out["spilled"]["served_from"] = {
        pool: _source(int(v["admitted"]), int(v["settled"]), v["wt"], r_wt) for pool, v in sorted(served_from.items())
    }
    return out


def _source(admitted: int, settled: int, wt: float, r_wt: float) -> dict[str, Any]:
    return {
        "admitted": admitted,
        "settled": settled,
        "wt": round(wt, 3),
        "cu_hours": round(wt / r_wt / 3600, 6) if r_wt else 0.0,
    }


def _served_from(where: Any, start: datetime, end: datetime) -> dict[str, dict[str, float]]:
    """Spilled requests admitted and settled, and their settled wt, per serving pool. Events that named
    no pool (gateways from before served_from was kept) count in `sources.spilled` only."""
    out: dict[str, dict[str, float]] = {}
    rows = period_sums(
        where,
        start,
        end,
        by=("decision", "served_from"),
        fields=("spilled_requests", "spilled_wt"),
        spilled_requests__gt=0,
    )
    for r in rows:
        if not r["served_from"] or r["decision"] == "throttle":
            continue
        acc = out.setdefault(r["served_from"], {"admitted": 0, "settled": 0, "wt": 0.0})
        if r["decision"] == "admit":
            acc["admitted"] += r["spilled_requests"]
        else:
            acc["settled"] += r["spilled_requests"]
            acc["wt"] += r["spilled_wt"] or 0.0
    return out


def _latency(ent: Entitlement, tot: _Totals, platform_hours: dict[str, int]) -> dict[str, Any]:
    slo_n, slo_met = int(tot.total("complete", "slo_n")), int(tot.total("complete", "slo"))
    blame = {k: int(tot.total("complete", k)) for k in ROLLUP_OUTCOMES[:4]}
    inside_n = blame["slo_inside_met"] + blame["slo_inside_missed"]
    return {
        "served": slo_n,
        "met": slo_met,
        "attainment": ratio(slo_met, slo_n),
        "target": {"ttft_p99_ms": ent.ttft_p99_ms, "tpot_p99_ms": ent.tpot_p99_ms},
        # misses by whose they are, request by request (telemetry.envelopes): a served request inside
        # its envelope that missed is the platform's, whatever else happened in its minute; rollups
        # written before requests were judged one by one hold misses no one can judge: unclassified
        "missed": {
            "total": slo_n - slo_met,
            "platform": blame["slo_inside_missed"],
            "outside_envelope": blame["slo_outside_missed"],
            "unclassified": slo_n - slo_met - blame["slo_inside_missed"] - blame["slo_outside_missed"],
            "platform_hours": platform_hours,
        },
        # attainment of the requests the promise covers: served, inside their envelope
        "inside_envelope": {
            "served": inside_n,
            "met": blame["slo_inside_met"],
            "attainment": ratio(blame["slo_inside_met"], inside_n),
        },
        # merged log-spaced histograms: within one bin (±26 %) of the exact value
        "observed": {"ttft_p99_ms": _pct(tot.bins(TTFT_BINS), 0.99), "e2e_p99_ms": _pct(tot.bins(E2E_BINS), 0.99)},
    }


def _envelope(ent: Entitlement, tot: _Totals, requests: _Requests) -> dict[str, Any]:
    completed = requests.completed
    prompts, outputs = tot.bins(PROMPT_BINS), tot.bins(OUTPUT_BINS)
    # the percentiles are read from log-spaced bins narrowed to the settled lengths' exact range, so
    # none lies above the longest or below the shortest (issue 33)
    p_max, o_max = tot.largest("prompt_max", "complete"), tot.largest("output_max", "complete")
    p_min, o_min = tot.shortest("prompt_min_rev"), tot.shortest("output_min_rev")
    observed = {
        "prompt_p50": _pct(prompts, 0.5, p_min, p_max),
        "prompt_p95": _pct(prompts, 0.95, p_min, p_max),
        "prompt_max": p_max if completed else None,
        "output_p50": _pct(outputs, 0.5, o_min, o_max),
        "output_p95": _pct(outputs, 0.95, o_min, o_max),
        "output_max": o_max if completed else None,
        # the store's in-flight count right after each admit: the peak is reached at an admit
        "concurrency_peak": tot.largest("inflight_max", "admit") if requests.admitted else None,
        "prompt_mean": ratio(tot.total("complete", "prompt"), completed),
        "output_mean": ratio(tot.total("complete", "out"), completed),
    }
    outside = requests.by_reason.get(OUTSIDE_ENVELOPE, 0)
    return {
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
        "outside": outside,
        "share_outside": ratio(outside, requests.attempted),
    }


def _cost(ent: Entitlement, billed: float, borrowed: bool) -> dict[str, Any]:
    """What the period costs: settled CU-hours for a borrowing class, bought ones otherwise, at the pool's
    one $ per CU-hour (issue 33) with its accelerators priced at the entitlement's term (docs/contract.md §10:
    the pool's own term gives the figure the cost page and planning show)."""
    rate = pool_cu_hour_rate(ent.pool, ent.term)
    price = rate.usd_per_cu_hour
    return {
        "term": ent.term,
        "usd": round(billed * price, 2) if price is not None else None,
        "cu_hours": round(billed, 6),
        "usd_per_cu_hour": round(price, 4) if price is not None else None,
        "basis": (
            f"{'settled' if borrowed else 'bought'} {billed:,.4f} CU-hours × ${price:,.4f} per CU-hour"
            if price is not None
            else rate.derivation
        ),
        "derivation": rate.derivation,
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
