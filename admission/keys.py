"""The store's key names, in one place (docs/contract.md §5: Redis Cluster).

Every key of one scope and of its pool carries the pool's hash tag, `{p<pool id>}`, so a script's
keys always sit in one cluster slot: the scope's buckets (own, borrow, request rate, period
budgets), its in-flight zset, the pool's bucket, the pool's set of in-flight zsets, and every
reservation record (the signed id carries the pool, so a
complete finds the record without the snapshot). The prefix must not contain '{'.
"""

from __future__ import annotations


def tag(prefix: str, pool_id: int | str) -> str:
    """The pool's key prefix: '<prefix>{p<pool id>}:'; every other name below starts with it."""
    return f"{prefix}{{p{pool_id}}}:"


def own(t: str, scope_key: str) -> str:
    return f"{t}b:{scope_key}"


def borrow(t: str, scope_key: str) -> str:
    return f"{t}bb:{scope_key}"


def inflight(t: str, scope_key: str) -> str:
    return f"{t}if:{scope_key}"


def pool(t: str) -> str:
    return f"{t}p"


def record(t: str, reservation_id: str) -> str:
    return f"{t}r:{reservation_id}"


def inflight_sets(t: str) -> str:
    """The pool's set of non-empty in-flight zsets (what its sweep walks)."""
    return f"{t}ifs"


def pools_registry(prefix: str) -> str:
    """Every pool tag the store has seen (written outside scripts, once per scope and snapshot)."""
    return f"{prefix}pools"


def token_epoch(prefix: str) -> str:
    """The token-revocation epoch the web tier's token checks are made under (docs/serving-path-faults.md)."""
    return f"{prefix}token-epoch"


def lend(t: str) -> str:
    """The pool's lend bucket (issue 36.3): what borrowed admissions may still take under the lenders' limits."""
    return f"{t}ln"


def keep(t: str, scope_key: str) -> str:
    """A limited lender's keep-back bucket (issue 36.3): what it keeps from borrowers, (CU − limit) × R
    wt/s; its own admissions pay there first, the rest from the pool's lend bucket."""
    return f"{t}kb:{scope_key}"


def fair(t: str) -> str:
    """The pool's fair-share table (issue 36.3): per borrowing scope its borrowed tokens in the
    window, when it was written, its weight and until when it counts as waiting."""
    return f"{t}fs"


def spill(t: str, scope_key: str) -> str:
    """A scope's spill budget bucket (issue 36.1), under the TARGET pool's tag `t`: the second call of a
    spilled reserve charges it with the target's pool bucket in one slot."""
    return f"{t}sp:{scope_key}"


def spill_inflight(t: str, scope_key: str) -> str:
    """A scope's spilled reservations in flight, under the target pool's tag (its sweep walks them)."""
    return f"{t}sif:{scope_key}"


def scope_hash_of(key: str, prefix: str) -> str | None:
    """The scope's hash (its own bucket's key, `own`) that holds, as a field named `key` (reserve.lua,
    issue 49.1), a request-rate bucket ('<tag>rq:<scope key>', admission.budgets.rps_key), a period
    budget's spend ('<tag>bd:<scope key>:d|m:<period id>', budgets.period_key) or the bound of an
    in-flight zset ('<tag>if:<scope key>'); None for a key of another kind. `prefix`: the backend's,
    for keys without a pool's tag (tests)."""
    cut = key.find("}:") + 2 if "}:" in key else (len(prefix) if key.startswith(prefix) else 0)
    rest = key[cut:]
    if rest.startswith(("rq:", "if:")):
        return key[:cut] + "b:" + rest[3:]
    if rest.startswith("bd:") and rest.count(":") >= 3:
        return key[:cut] + "b:" + rest[3:].rsplit(":", 2)[0]
    return None
