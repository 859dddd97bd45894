"""The reserve's inputs, named once (issues 49.1 and 50.1).

One table says what a reserve decides with and in which order the Redis script receives it:
`admission/backends/redis.py` packs the values in this order and generates `reserve.lua`'s preamble
from it (`lua_preamble`), which reads each ARGV and KEYS entry by number once, into locals `A_<name>` and
`K_<name>`; the script's body reads names only. `base.decide` and the in-process backend read the same
names from `of(scope)` (tests/admission/test_reserve_inputs.py checks the three against this table, and
that they decide alike on generated states). Adding a limit means adding a row here; the order of the
rows is the wire order, nothing else depends on it.

A kind says how the preamble reads an argument: 's' a string as sent, 'n' a number (tonumber once),
'ns' both (`A_x` the number, `A_x_s` the string as sent: copied into records and answers verbatim, so
the text the in-process twin writes with repr() is the text Redis writes), 'b' a flag ('1' / '0').
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from entitlements import reasons

# Per call, in front of the static values.
PER_CALL: tuple[tuple[str, str], ...] = (
    ("epoch", "s"),  # the revocation-epoch check (lib.lua: epoch_stale)
    ("rid", "s"),  # the reservation id (its record's name and idempotency key)
    ("cost", "ns"),  # weighted tokens asked
    ("meta", "s"),  # JSON for the complete / expiry events
)

# Per scope, formatted once per snapshot (Scope is immutable while a snapshot lasts).
STATIC: tuple[tuple[str, str], ...] = (
    ("traffic_class", "s"),
    ("max_concurrency", "n"),
    ("own_rate", "n"),
    ("own_depth", "n"),
    ("pool_rate", "n"),
    ("pool_depth", "n"),
    ("borrow_rate", "n"),  # 0 / 0: may not borrow
    ("borrow_depth", "n"),
    ("margin", "n"),  # borrowers need pool level − cost ≥ margin
    ("degraded", "b"),
    ("reserved_floor", "n"),
    ("ttl", "s"),  # whole seconds as an integer where it is one (added to Redis' clock without a float)
    ("record_ttl", "s"),
    ("retry_concurrency", "s"),  # retry advice for CONCURRENCY_LIMIT, RECLAIMED, PLATFORM_CAPACITY
    ("retry_reclaimed", "s"),
    ("retry_platform", "s"),
    ("record_own", "s"),  # the record's static middle (lib.lua) when the own / borrow bucket pays
    ("record_borrowed", "s"),
    # Lending and fair share (issue 36.3): the pool's lend bucket (depth 0: no lender limits lending)...
    ("lend_rate", "ns"),
    ("lend_depth", "ns"),
    ("weight", "ns"),  # ...this scope's fair-share weight (0: it does not borrow)...
    ("member", "s"),  # ...its name in the pool's fair-share table...
    ("window_s", "ns"),
    ("active_s", "n"),  # ...how long a borrowed attempt keeps it active
    ("lender_charges", "b"),  # its own admissions charge the lend bucket (base.Lends)
    ("keep_rate", "ns"),  # its keep-back bucket (depth 0: no lending limit)
    ("keep_depth", "ns"),
)

# Numbers only borrowing or lending reads: they travel as ONE argument, tab-separated in the table's order, where
# the first of them is (each argument costs Redis ~0.2 µs to pass: issue 49's bench), and the preamble splits and
# converts them only for a scope that may borrow (borrow depth > 0) or whose admissions charge lenders (most calls
# need none of them).
LAZY = frozenset({"lend_rate", "lend_depth", "weight", "window_s", "active_s", "keep_rate", "keep_depth"})
LAZY_ORDER = tuple(name for name, _ in STATIC if name in LAZY)

# With budgets or a request rate (issue 23): then PERIOD per period.
LIMITS: tuple[tuple[str, str], ...] = (
    ("unit", "s"),
    ("units", "ns"),  # the estimate in the budget's unit
    ("rq_rate", "n"),  # the request-rate bucket (depth 0: none)
    ("rq_depth", "n"),
    ("n_periods", "n"),
)
# One period: its limit, the current period's start and end, the next one's end (the caller's
# candidates around its own clock; the script's clock picks one).
PERIOD: tuple[tuple[str, str], ...] = (("limit", "ns"), ("start", "ns"), ("stop", "ns"), ("next_stop", "s"))

# The last argument: '1' for the remaining quota, then '1' when a spill may follow (issue 36.1).
FLAGS = ("want_quota", "spill_ok")

# KEYS, all under the pool's hash tag: then, with limits, the request-rate bucket and per period its
# previous, current and next key; the keep-back bucket is always the last key (K.keep).
KEYS: tuple[str, ...] = ("record", "own", "pool", "borrow", "inflight", "inflight_sets", "lend", "fair")


def names() -> set[str]:
    """Every name the script's body may read as A_<name> (a 'ns' argument's string as `<name>_s`)."""
    out = {*FLAGS, "limited", "periods"}
    for name, kind in (*PER_CALL, *STATIC, *LIMITS):
        out.add(name)
        if kind == "ns":
            out.add(name + "_s")
    return out


_OF: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def of(s: Any) -> dict[str, Any]:
    """A scope's static inputs by name (STATIC), as numbers, strings and flags; cached per Scope."""
    got = _OF.get(s)
    if got is not None:
        return got
    b, sh, lends = s.borrow, s.share, s.lends
    d = s.retry_defaults
    ln = sh.lend if sh is not None and sh.lend is not None else (lends.lend if lends is not None else None)
    kb = lends.keep if lends is not None else None
    middle = [s.inflight_key, s.own.key, repr(s.own.rate), repr(s.own.depth), s.pool.key, repr(s.pool.rate),
              repr(s.pool.depth), repr(s.w_out), repr(s.w_cached), str(s.max_output)]  # fmt: skip
    borrowed = [*middle[:1], b.key, repr(b.rate), repr(b.depth), *middle[4:]] if b else middle
    got = {
        "traffic_class": s.traffic_class,
        "max_concurrency": s.max_concurrency,
        "own_rate": s.own.rate,
        "own_depth": s.own.depth,
        "pool_rate": s.pool.rate,
        "pool_depth": s.pool.depth,
        "borrow_rate": b.rate if b else 0.0,
        "borrow_depth": b.depth if b else 0.0,
        "margin": s.margin,
        "degraded": s.degraded,
        "reserved_floor": s.reserved_floor,
        "ttl": s.ttl_s,
        "record_ttl": math.ceil(s.ttl_s) + s.idem_ttl_s,
        "retry_concurrency": d[reasons.CONCURRENCY_LIMIT],
        "retry_reclaimed": d[reasons.RECLAIMED],
        "retry_platform": d[reasons.PLATFORM_CAPACITY],
        "record_own": "\t".join(middle),
        "record_borrowed": "\t".join(borrowed),
        "lend_rate": ln.rate if ln else 0.0,
        "lend_depth": ln.depth if ln else 0.0,
        "weight": sh.weight if sh else 0.0,
        "member": sh.member if sh else "",
        "window_s": sh.window_s if sh else 60.0,
        "active_s": sh.active_s if sh else 0.0,
        "lender_charges": lends is not None,
        "keep_rate": kb.rate if kb else 0.0,
        "keep_depth": kb.depth if kb else 0.0,
    }
    _OF[s] = got
    return got


def wire(name: str, v: Any) -> str:
    """A value as the script receives it: floats by repr (read back exactly), flags '1' / '0', the TTL
    as a whole number where it is one."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if name == "ttl":
        return str(int(v)) if v == int(v) else repr(v)
    return repr(v) if isinstance(v, float) else str(v)


def static_wire(s: Any) -> list[str]:
    """A scope's STATIC values in wire order: the LAZY ones as one argument, where the first of them is; a scope
    that cannot borrow sends its borrowed record's static middle as '' (the script never writes that record)."""
    v = of(s)
    out = []
    for name, _ in STATIC:
        if name in LAZY:
            if name == LAZY_ORDER[0]:
                out.append("\t".join(wire(n, v[n]) for n in LAZY_ORDER))
            continue
        if name == "record_borrowed" and not v["borrow_depth"] > 0:
            out.append("")
            continue
        out.append(wire(name, v[name]))
    return out


def _read(target: str, name: str, kind: str, at: str) -> list[str]:
    """Lua that reads one argument into the local `<target>_<name>` (a register, not a table lookup)."""
    v = f"{target}_{name}"
    if kind == "n":
        return [f"local {v} = tonumber({at})"]
    if kind == "b":
        return [f"local {v} = {at} == '1'"]
    if kind == "ns":
        return [f"local {v}_s = {at}", f"local {v} = tonumber({v}_s)"]
    return [f"local {v} = {at}"]


def lua_preamble() -> str:
    """reserve.lua's preamble: every ARGV and KEYS entry read once, by number, into locals named
    A_<name> (arguments) and K_<name> (keys); a period's values into the fields of its table."""
    out = ["-- Generated by admission/backends/inputs.py (lua_preamble): the reserve's inputs by name."]
    n = 0
    lazy = []
    for name, kind in (*PER_CALL, *STATIC):
        if (
            name in LAZY
        ):  # one argument for all of them: split and converted below, only where borrowing or lending needs it
            if name == LAZY_ORDER[0]:
                n += 1
                out.append(f"local a_lazy = ARGV[{n}]")
            lazy.append((name, f"A_{name}_s" if kind == "ns" else f"a_{name}"))
            continue
        n += 1
        out += _read("A", name, kind, f"ARGV[{n}]")
    out.append("local " + ", ".join(f"A_{name}, {raw}" for name, raw in lazy))
    out.append("if A_borrow_depth > 0 or A_lender_charges then")
    pattern = "^" + "\\t".join(["([^\\t]*)"] * len(lazy)) + "$"
    out.append(f"  {', '.join(raw for _, raw in lazy)} = string.match(a_lazy, '{pattern}')")
    out += [f"  A_{name} = tonumber({raw})" for name, raw in lazy]
    out.append("end")
    for i, name in enumerate(KEYS, 1):
        out.append(f"local K_{name} = KEYS[{i}]")
    out.append("local K_keep = KEYS[#KEYS]")
    out.append("local flags = ARGV[#ARGV]")
    out.append(f"local A_{FLAGS[0]} = string.sub(flags, 1, 1) == '1'")
    out.append(f"local A_{FLAGS[1]} = string.sub(flags, 2, 2) == '1'")
    out.append(f"local A_limited = #ARGV > {n + 1}")
    limits = ", ".join(f"A_{name}" + (f", A_{name}_s" if kind == "ns" else "") for name, kind in LIMITS)
    out.append(f"local {limits}, K_rq, A_periods")
    out.append("if A_limited then")
    out.append("  A_periods = {}")
    for name, kind in LIMITS:
        n += 1
        out += ["  " + line.removeprefix("local ") for line in _read("A", name, kind, f"ARGV[{n}]")]
    k0 = len(KEYS) + 1
    out.append(f"  K_rq = KEYS[{k0}]")
    out.append("  for i = 1, A_n_periods do")
    out.append(f"    local a, k = {n} + (i - 1) * {len(PERIOD)}, {k0} + (i - 1) * 3")
    # One constructor (its table sized once) rather than fields added one by one (a rehash at each power of 2).
    out.append("    local " + ", ".join(f"p_{name}" for name, _ in PERIOD) + " = "
               + ", ".join(f"ARGV[a + {j}]" for j in range(1, len(PERIOD) + 1)))  # fmt: skip
    fields = []
    for name, kind in PERIOD:
        if kind == "ns":
            fields += [f"{name}_s = p_{name}", f"{name} = tonumber(p_{name})"]
        elif kind == "n":
            fields.append(f"{name} = tonumber(p_{name})")
        else:
            fields.append(f"{name} = p_{name}")
    fields.append("keys = {KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]}")
    out.append("    A_periods[i] = {" + ", ".join(fields) + "}")
    out.append("  end")
    out.append("end")
    return "\n".join(out) + "\n"
