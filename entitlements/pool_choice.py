"""Which pool a grant goes to when nobody names one (issue 34.2): one rule, three callers.

`entitlement_grant` (a grant without `pool=`), the launch approval's default pool and the launch
sizing panel's "would take it" all call `choose_pool`, so the panel names the pool the approval
lands in and the pool a plain grant lands in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from entitlements.models import Pool
from entitlements.selectors import Window, pools_sold_peaks


@dataclass(frozen=True)
class PoolChoice:
    """`fits`: the pool has room for the grant (headroom ≥ its CU, or the class takes no headroom).
    `after_cu`: the pool's headroom once the grant is in it."""

    pool: Pool
    fits: bool
    after_cu: Decimal
    why: str


def choose_pool(
    rows: Sequence[tuple[Pool, Decimal]], *, cu: Decimal, home_pk: int | None, counts_as_sold: bool = True
) -> PoolChoice | None:
    """The pool a grant of `cu` goes to, from (pool, headroom before the grant) rows.

    Rule: the scope's home pool if it has room; else the pool with the most headroom after the grant,
    ties to the lowest pk. A scope that already has a home pool can go nowhere else (docs/contract.md §5, one
    scope one pool): when its home lacks room the choice is still the home pool, with `fits` False,
    and the grant is refused naming it. A class that takes no headroom (best_effort) always fits.
    None: no pool at all.
    """
    if not rows:
        return None
    need = cu if counts_as_sold else Decimal(0)
    home = next(((p, h) for p, h in rows if p.pk == home_pk), None) if home_pk is not None else None
    if home is not None:
        pool, headroom = home
        fits = headroom >= need
        why = (
            f"the scope already lives in {pool.slug}"
            if fits
            else f"the scope lives in {pool.slug}, which has {headroom} CU of headroom: grants go there (one scope, "
            "one pool), so this one is refused"
        )
        return PoolChoice(pool, fits, headroom - need, why)
    pool, headroom = max(rows, key=lambda r: (r[1] - need, -r[0].pk))
    fits = headroom >= need
    why = "the most headroom after the grant" if fits else "no pool has room; this one is closest"
    return PoolChoice(pool, fits, headroom - need, why)


def headroom_rows(pools: Iterable[Pool], window: Window) -> list[tuple[Pool, Decimal]]:
    """(pool, deliverable − the most sold at any instant of the window), in the given order: the
    approval's own figure (entitlement_grant reads it), for the whole pool set in one query, which the
    availability read (portal.availability, issue 52) shows as `available_cu`."""
    pools = list(pools)
    peaks = pools_sold_peaks([p.pk for p in pools], window)
    return [(p, p.deliverable_cu - peaks[p.pk]) for p in pools]
