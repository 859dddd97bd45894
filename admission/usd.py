"""$ budgets in the serving path (issue 51.3, docs/contract.md §10): a tenant's or project's $ per
calendar month (UTC), charged at each pool's $ per weighted token. No Django here: the web tier
(admission.usd_params) and the library mode (the snapshot's "usd" block) both hold a `UsdBook`.

A $ account spans every scope of its tenant (or project), so it cannot live under a pool's hash
tag: it has one of its own, `{u:<tenant>}`, shared by the tenant's account and its projects', so
one script call checks both (Redis Cluster: one slot). A reserve whose tenant or project has a $
budget makes that call first: it holds the request's estimate in $ (its estimated weighted tokens ×
the pool's price) and is refused `BUDGET_EXHAUSTED` (`limit: "usd"`) when a hold would take an
account over its month's limit. The token reserve follows; a refusal there releases the hold. The
complete settles the hold at the actual weighted tokens × the price of the pool that served it.
A hold that is never settled (the reservation expired) is charged at its estimate when its expiry
passes, as the token store settles an expired reservation at its estimate. So the month's charged
$ never exceeds the limit by more than what settled above its estimate.
Scopes of tenants without a $ budget make no extra call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

# A hold outlives its reservation by this much before it is charged at its estimate: the token
# store's sweep runs late too, and a complete that arrives just after the expiry still settles.
GRACE_S = 60.0
# How far back a complete looks for the month its hold was made in (reservation TTLs are minutes).
HOLD_LOOKBACK_S = 86_400.0
# A month's account is kept this long after the month starts (a settle at the boundary finds it).
ACCOUNT_TTL_S = 40 * 86_400


@dataclass(frozen=True)
class UsdBook:
    """`limits`: (tenant, project or "" for the tenant) → $ per month; `per_wt`: pool id → $ per
    weighted token (a pool the cost basis cannot price is absent: it charges 0 and says so in the
    log of admission.usd_params)."""

    limits: dict[tuple[str, str], float] = field(default_factory=dict)
    per_wt: dict[int, float] = field(default_factory=dict)

    def accounts(self, tenant: str, project: str) -> tuple[tuple[str, float], ...]:
        """(project or "", limit) of every $ budget a request of (tenant, project) is charged to."""
        if not self.limits:
            return ()
        out = []
        t = self.limits.get((tenant, ""))
        if t is not None:
            out.append(("", t))
        if project:
            p = self.limits.get((tenant, project))
            if p is not None:
                out.append((project, p))
        return tuple(out)


EMPTY = UsdBook()


def month_id(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m")


def month_end(t: float) -> float:
    d = datetime.fromtimestamp(t, UTC)
    nxt = datetime(d.year + (d.month == 12), d.month % 12 + 1, 1, tzinfo=UTC)
    return nxt.timestamp()


def tag(prefix: str, tenant: str) -> str:
    return f"{prefix}{{u:{tenant}}}:"


def account_key(prefix: str, tenant: str, project: str, month: str) -> str:
    """The account's hash (spent, held, and one field per open hold); its hold expiries are in
    `<key>:x` (a sorted set), in the same slot."""
    return f"{tag(prefix, tenant)}usd:{month}" + (f":p:{project}" if project else "")


@dataclass(frozen=True)
class UsdHold:
    keys: tuple[str, ...]  # account hashes, all under one tenant's tag
    limits: tuple[float, ...]
    rid: str  # the reservation's record name (idempotent: a retried reserve finds its hold)
    usd: float  # the estimate in $
    ttl_s: float  # by the store's clock: after it the hold is charged at `usd`


@dataclass(frozen=True)
class UsdAnswer:
    admitted: bool
    remaining: float  # $ left in the tightest account (after this hold when admitted)
    replay: bool = False


def hold_for(
    book: UsdBook, prefix: str, tenant: str, project: str, pool_id: int, wt: float, rid: str, now: float, ttl_s: float
) -> UsdHold | None:
    """The hold a reserve makes, or None when neither the tenant nor the project has a $ budget."""
    acc = book.accounts(tenant, project)
    if not acc:
        return None
    month = month_id(now)
    return UsdHold(
        tuple(account_key(prefix, tenant, p, month) for p, _ in acc), tuple(lim for _, lim in acc), rid,
        wt * book.per_wt.get(pool_id, 0.0), ttl_s + GRACE_S,
    )  # fmt: skip


def settle_keys(book: UsdBook, prefix: str, tenant: str, project: str, now: float) -> tuple[str, ...]:
    """The accounts a complete looks for its hold in: this month's and, when the reservation may
    have been made in the month before, that month's too (a reservation lives at most HOLD_LOOKBACK_S)."""
    acc = book.accounts(tenant, project)
    months = dict.fromkeys((month_id(now - HOLD_LOOKBACK_S), month_id(now)))
    return tuple(account_key(prefix, tenant, p, m) for m in months for p, _ in acc)


def remaining_header(v: float) -> str:
    return f"{max(0.0, v):.2f}"
