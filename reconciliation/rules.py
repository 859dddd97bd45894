"""Figures → recommendations (issue 17.2). Each rule returns a Proposal or None; thresholds are the
RECONCILE_* settings (config/settings.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from capacity.planning import PlanningAnswer, Replay, Workload, percent, replay
from entitlements.models.grants import BORROWING_CLASS
from forecasting.peak_to_mean import planning_answer
from reconciliation.figures import Figures, p95


def cu_text(cu: Decimal) -> str:
    """A stored CU (three places: 95.800) as the advice beside it reads: 95.8, 100, 28.3."""
    t = f"{cu:f}"
    return t.rstrip("0").rstrip(".") if "." in t else t


STEP = Decimal("0.1")  # recommended CU are rounded up to a tenth


@dataclass
class Proposal:
    kind: str
    action: str
    evidence: dict[str, Any]
    cu_delta: Decimal | None = None
    recommended: dict[str, Any] = field(default_factory=dict)


def planned(f: Figures) -> tuple[PlanningAnswer, Replay] | None:
    """The CU that would have admitted the window's recorded traffic at the class's target, and the
    replay at the CU bought now (docs/planning.md); None when there was no traffic."""
    w = f.history
    if w is None or not len(w):
        return None
    r = float(f.ent.model.r_wt_per_s or 1.0)
    answer = planning_answer(f.ent, w)
    return answer, replay(w, float(f.ent.cu), r, float(settings.ADMISSION_BUCKET_DEPTH_S))


def _planning_evidence(answer: PlanningAnswer, now: Replay, w: Workload | None = None) -> dict[str, Any]:
    recorded = w.recorded_throttled_share if w is not None else None
    return {
        **answer.to_dict(),
        "replay_at_current": {**now.to_dict()},
        "check_at_current": f"at the {now.cu:.1f} CU bought now {percent(now.throttled_share)} throttled"
        + (f" (recorded: {percent(recorded)})" if recorded is not None else ""),
        **({"recorded_throttled_share": recorded} if recorded is not None else {}),
    }


def right_size_down(f: Figures) -> Proposal | None:
    ent = f.ent
    if ent.traffic_class_id == BORROWING_CLASS or not f.bought_all_window or not f.hours:
        return None
    share = p95(f.use_share)
    if share >= settings.RECONCILE_RIGHTSIZE_SHARE:
        return None
    got = planned(f)
    if got is None or not got[0].holds:
        return None  # advice whose own check fails is not shown
    answer, now = got
    new = Decimal(str(answer.cu_to_buy))
    if new >= ent.cu:
        return None
    days = settings.RECONCILE_WINDOW_DAYS
    return Proposal(
        "right_size_down",
        f"Amend to {new} CU (from {cu_text(ent.cu)}): the busiest 5 % of hours used {share:.0%} of what was bought "
        f"over {days} days, below the {settings.RECONCILE_RIGHTSIZE_SHARE:.0%} threshold. Check: {answer.check}; "
        f"at the {now.cu:.1f} CU bought now {percent(now.throttled_share)}.",
        {
            "p95_hourly_use_share": round(share, 4),
            "peak_hourly_use_share": round(max(f.use_share), 4),
            "p95_hourly_use_cu": round(p95(f.use_cu), 4),
            "bought_cu": float(ent.cu),
            "hours": f.hours,
            "threshold": settings.RECONCILE_RIGHTSIZE_SHARE,
            **_planning_evidence(answer, now, f.history),
        },
        new - ent.cu,
        {"cu": float(new), "target_throttled_share": answer.target_throttled_share},
    )


def grow(f: Figures) -> Proposal | None:
    ent, req = f.ent, f.statement["requests"]
    by_reason = req["throttled"]["by_reason"]
    tenant_throttles = sum(by_reason.get(c, 0) for c in ("QUOTA_EXCEEDED", "CONCURRENCY_LIMIT", "BUDGET_EXHAUSTED"))
    attempted = req["attempted"]
    share = tenant_throttles / attempted if attempted else 0.0
    borrow_share = f.borrow_days / f.days if f.days else 0.0
    borrowing = ent.traffic_class_id == BORROWING_CLASS and borrow_share > settings.RECONCILE_BORROW_DAYS_SHARE
    got = planned(f)
    if got is None or not got[0].holds:
        return None  # advice whose own check fails is not shown
    answer, now = got
    # Throttled over the class's target on its own recorded requests (raw events: the replay gives back
    # what admission did) at the CU bought: too little, even where the throttles stay under the threshold
    # (0.5 % throttled against a 0.1 % target is a grow). Rollups spread evenly cannot say so.
    recorded = f.history is not None and f.history.recorded_throttled_share is not None
    over_target = recorded and now.throttled_share > answer.target_throttled_share
    if share <= settings.RECONCILE_TENANT_THROTTLE_SHARE and not borrowing and not over_target:
        return None
    need = Decimal(str(answer.cu_to_buy))
    evidence = {
        "tenant_throttles": tenant_throttles,
        "attempted": attempted,
        "tenant_throttle_share": round(share, 4),
        "threshold": settings.RECONCILE_TENANT_THROTTLE_SHARE,
        "borrow_days": f.borrow_days,
        "days": f.days,
        "p95_hourly_demand_cu": round(p95(f.demand_cu), 4),
        "bought_cu": float(ent.cu),
        **_planning_evidence(answer, now, f.history),
    }
    check = f" Check: {answer.check}; at the {now.cu:.1f} CU bought now {percent(now.throttled_share)}."
    if borrowing:
        # best_effort has no guarantee: what it keeps borrowing is capacity to buy as reserved
        return Proposal(
            "grow",
            f"File a launch request for {need} CU reserved: borrowing on {f.borrow_days} of {f.days} days.{check}",
            evidence,
            need,
            {"cu": float(need), "traffic_class": "reserved", "launch_request": True},
        )
    if need <= ent.cu:
        return None  # the replay says the CU bought would have admitted the window at the target
    new = need
    return Proposal(
        "grow",
        f"Amend to {new} CU (from {cu_text(ent.cu)}): {share:.1%} of arrivals were throttled for quota, concurrency or "
        f"budget (threshold {settings.RECONCILE_TENANT_THROTTLE_SHARE:.0%}; the class's target "
        f"{percent(answer.target_throttled_share)}).{check}",
        evidence,
        new - ent.cu,
        {"cu": float(new)},
    )


def _round_up(x: float, to: int = 10) -> int:
    return int(math.ceil(x / to) * to)


def envelope_drift(f: Figures) -> Proposal | None:
    ent, env, req = f.ent, f.statement["envelope"], f.statement["requests"]
    o = env["observed"]
    tol = settings.RECONCILE_P95_TOLERANCE
    outside_share = env["share_outside"] or 0.0
    conc = req["throttled"]["by_reason"].get("CONCURRENCY_LIMIT", 0)
    drift = {
        "outside_share": outside_share > settings.RECONCILE_OUTSIDE_SHARE,
        "prompt_p95": o["prompt_p95"] is not None and o["prompt_p95"] > ent.prompt_p95 * tol,
        "output_p95": o["output_p95"] is not None and o["output_p95"] > ent.output_p95 * tol,
        "concurrency": conc > 0 and (o["concurrency_peak"] or 0) >= ent.max_concurrency,
    }
    if not any(drift.values()):
        return None
    new = {
        "prompt_p50": max(ent.prompt_p50, _round_up(o["prompt_p50"] or 0)),
        "prompt_p95": max(ent.prompt_p95, _round_up(o["prompt_p95"] or 0)),
        "max_prompt_tokens": max(ent.max_prompt_tokens, f.refused_prompt_max, o["prompt_max"] or 0),
        "output_p50": max(ent.output_p50, _round_up(o["output_p50"] or 0)),
        "output_p95": max(ent.output_p95, _round_up(o["output_p95"] or 0)),
        "max_output_tokens": max(ent.max_output_tokens, o["output_max"] or 0),
        "max_concurrency": max(ent.max_concurrency, math.ceil((o["concurrency_peak"] or 0) * 1.25))
        if drift["concurrency"]
        else ent.max_concurrency,
    }
    new["prompt_p95"] = max(new["prompt_p95"], new["prompt_p50"])
    new["output_p95"] = max(new["output_p95"], new["output_p50"])
    new["max_prompt_tokens"] = max(new["max_prompt_tokens"], new["prompt_p95"])
    new["max_output_tokens"] = max(new["max_output_tokens"], new["output_p95"])
    # The CU for the drifted envelope is what the traffic that drifted needs: the planning answer on the
    # window's recorded requests (the one right-size and grow give), named only when its check holds.
    got = planned(f)
    recommended: dict[str, Any] = {"envelope": new}
    delta = None
    planning: dict[str, Any] = {}
    cu_words = "."
    if got is not None and got[0].holds:
        answer, now = got
        cu = Decimal(str(answer.cu_to_buy))
        recommended |= {"cu": float(cu), "target_throttled_share": answer.target_throttled_share}
        delta = cu - ent.cu
        planning = _planning_evidence(answer, now, f.history)
        cu_words = f"; the traffic sent needs {cu} CU (now {cu_text(ent.cu)}). Check: {answer.check}."
    changed = ", ".join(k for k, v in drift.items() if v)
    return Proposal(
        "envelope_drift",
        f"Renegotiate the envelope ({changed} outside it): prompt p50/p95/max {new['prompt_p50']}/"
        f"{new['prompt_p95']}/{new['max_prompt_tokens']}, output {new['output_p50']}/{new['output_p95']}/"
        f"{new['max_output_tokens']}, concurrency {new['max_concurrency']}" + cu_words,
        {
            "drift": drift,
            "observed": o,
            "promised": env["promised"],
            "outside": env["outside"],
            "share_outside": env["share_outside"],
            "concurrency_limit_throttles": conc,
            "refused_prompt_max": f.refused_prompt_max,
            **planning,
        },  # fmt: skip
        delta,
        recommended,
    )


def platform_owes(f: Figures) -> Proposal | None:
    missed = f.statement["latency"]["missed"]
    hours = dict(f.platform_throttle_hours)
    for h, n in missed["platform_hours"].items():
        hours[h] = hours.get(h, 0) + n
    throttles = sum(f.platform_throttle_hours.values())
    total = throttles + missed["platform"]
    if total < settings.RECONCILE_PLATFORM_MIN:
        return None
    pool = f.ent.pool
    return Proposal(
        "platform_owes",
        f"Review pool {pool.slug}: {throttles} platform-caused throttles and {missed['platform']} latency "
        f"misses while the tenant was inside its envelope and entitlement, in {len(hours)} hours.",
        {"platform_throttles": throttles, "platform_misses": missed["platform"], "pool": pool.slug},
        None,
        {"pool": pool.slug, "hours": dict(sorted(hours.items()))},
    )


RULES = (right_size_down, grow, envelope_drift, platform_owes)
