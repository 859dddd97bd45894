"""The row-by-row specification the snapshot's scopes are tested equal to (tests/admission/test_scope_sums.py):
every live entitlement read as one row, folded into scopes in Python. The snapshot itself sums in SQL
(admission.scope_sums) and derives per scope (admission.scope_table); this is the independent
statement of the same rules, so it lives with the tests, not on the serving path.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import FloatField, Q, TextField

from admission import budgets
from admission.budgets import LimitSpec
from admission.params import Derived
from admission.snapshot_reads import Epoch, FloatCast, TextCast
from admission.snapshot_types import ScopeParams
from entitlements.models import Entitlement

# One entitlement as a plain tuple, read by index in derive_scopes below.
# Plain values: no Decimal or datetime objects. Timestamps are epoch seconds.
ENT_FIELDS = (
    "pk", "uuid_s", "tenant__slug", "project__slug", "model__slug", "region__slug", "traffic_class_id", "pool_id",
    "starts", "ends", "cu_f", "borrow_f", "max_prompt_tokens", "max_output_tokens", "output_p95", "max_concurrency",
    "ttft_p99_ms", "tpot_p99_ms", "overage", "model__r_wt_per_s", "model__w_out", "model__w_cached",
    "traffic_class__may_borrow", "traffic_class__counts_as_sold",
    "daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst", "lending_f", "weight",
)  # fmt: skip
(PK, UUID, TENANT, PROJECT, MODEL, REGION, CLASS, POOL, STARTS, ENDS, CU, BORROW, MAX_PROMPT, MAX_OUTPUT, OUT_P95,
 MAX_CONC, TTFT, TPOT, OVERAGE, R, W_OUT, W_CACHED, MAY_BORROW, SOLD,
 DAILY_BUDGET, MONTHLY_BUDGET, BUDGET_UNIT, BUDGET_TZ, MAX_RPS, BURST, LENDING, WEIGHT) = range(len(ENT_FIELDS))  # fmt: skip
LIMITS = slice(DAILY_BUDGET, BURST + 1)  # the entitlement's budgets and request rate (issue 23)
EntRow = tuple[Any, ...]


def entitlement_rows(t: datetime) -> list[EntRow]:
    """Every entitlement not revoked and not ended at t (active now or starting later), by pk."""
    qs = (
        Entitlement.objects.filter(revoked_at__isnull=True)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        .annotate(
            uuid_s=TextCast("uuid", TextField()),  # a str: no uuid.UUID object per row
            starts=Epoch("starts_at"),
            ends=Epoch("ends_at"),
            cu_f=FloatCast("cu", FloatField()),
            borrow_f=FloatCast("borrowing_limit_cu", FloatField()),
            lending_f=FloatCast("lending_limit_cu", FloatField()),
        )  # fmt: skip
        .order_by("pk")
        .values_list(*ENT_FIELDS)
    )
    return list(qs)


LIMIT_NAMES = ENT_FIELDS[LIMITS]


def derive_scopes(rows: list[EntRow], t: float) -> Derived:
    """The specification admission.scope_sums and scope_table are tested equal to (the snapshot sums in SQL).
    Several active entitlements in one scope add up (rate, borrowing, concurrency); the envelope is
    the widest; the scope names its lowest-pk entitlement (rows come by pk). `t`: epoch seconds.
    """
    acc: dict[tuple[str, str, str, str, str], list[Any]] = {}
    reserved: dict[int, float] = {}
    sold: dict[int, float] = {}
    withheld: dict[int, float] = {}
    nxt: float | None = None
    lims: dict[tuple[str, str, str, str, str], LimitSpec | None] = {}  # scopes with budgets or a request rate
    for e in rows:
        starts, ends = e[STARTS], e[ENDS]
        if starts > t:
            nxt = starts if nxt is None or starts < nxt else nxt
            continue
        if ends is not None:
            if ends <= t:
                continue
            nxt = ends if nxt is None or ends < nxt else nxt
        pool, r = e[POOL], e[R]
        rate = e[CU] * r
        if e[CLASS] == "reserved":
            reserved[pool] = reserved.get(pool, 0.0) + rate
        if e[SOLD]:
            sold[pool] = sold.get(pool, 0.0) + e[CU]
        borrow = e[BORROW] * r if e[MAY_BORROW] and e[OVERAGE] == "borrow" else 0.0
        lend = e[LENDING]
        kept = 0.0 if lend is None else (e[CU] - lend) * r
        if lend is not None:
            withheld[pool] = withheld.get(pool, 0.0) + kept
        weight = 1.0 if e[WEIGHT] is None else e[WEIGHT]
        key = (e[TENANT], e[PROJECT] or "", e[MODEL], e[REGION], e[CLASS])
        if e[DAILY_BUDGET] is not None or e[MONTHLY_BUDGET] is not None or e[MAX_RPS] is not None:
            lims[key] = budgets.combine(lims.get(key), budgets.spec_of(dict(zip(LIMIT_NAMES, e[LIMITS], strict=True))))
        a = acc.get(key)
        if a is None:
            acc[key] = [e, rate, borrow, e[MAX_PROMPT], e[MAX_OUTPUT], e[OUT_P95], e[MAX_CONC],
                        e[TTFT], e[TPOT], e[CU] if lend is None else lend, lend is not None, weight,
                        kept]  # fmt: skip
            continue
        a[1] += rate
        a[2] += borrow
        a[3] = max(a[3], e[MAX_PROMPT])
        a[4] = max(a[4], e[MAX_OUTPUT])
        a[5] = max(a[5], e[OUT_P95])
        a[6] += e[MAX_CONC]
        a[7] = max(a[7], e[TTFT])
        a[8] = max(a[8], e[TPOT])
        a[9] += e[CU] if lend is None else lend
        a[10] = a[10] or lend is not None
        a[11] += weight
        a[12] += kept
    scopes = {
        k: ScopeParams(
            ":".join(k),
            str(uuid.UUID(a[0][UUID])),
            k[4],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            a[6],
            a[7],
            a[8],
            a[0][W_OUT],
            a[0][W_CACHED],
            a[0][POOL],
            lims.get(k),
            a[9] if a[10] else None,
            a[11],
            keep_back=a[12],
        )
        for k, a in acc.items()
    }
    return Derived(scopes, reserved, sold, nxt, withheld)
