"""Enforcement parameters from the entitlements database, cached in-process (the snapshot).

The serving path must not query the database per request. A snapshot holds every active
entitlement aggregated per scope (tenant × project × model × region × class) and every pool's
bucket parameters. It follows the database instead of expiring on a timer: every
ADMISSION_SNAPSHOT_CHECK_S (default 0.25 s) one caller reads the change counters that database
triggers keep (admission.snapshot_triggers: one query) and re-reads only the parts whose counter
moved (entitlement sums, pools, health). Entitlements are summed by the database per scope, pool
and window (admission.scope_sums: a rebuild at 10,000 entitlements loops over hundreds of groups,
not the rows); when a window starts or ends the scopes are re-derived from the groups already held
(no query). After a write only the scopes written are summed again (issue 35.2: the change log the
triggers append to, admission.snapshot_delta), and every other scope keeps its object and its plan.
ORM saves in this process mark their part at once (signals); ADMISSION_SNAPSHOT_TTL_S (default 300 s)
is only a safety net full rebuild.

With ADMISSION_SNAPSHOT_BACKGROUND (issue 35.2: the served default; the test suite's is off) the
check runs on a refresher thread per process, so a request thread only reads the held snapshot.
Three refreshes stay on the request thread: the first build, a snapshot past its valid_until (a
window boundary the refresher did not reach first: it wakes at that instant) and this process's own
saves (a transaction only the saving thread's connection sees; its next reserve must see the write).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from admission import (
    atlas_carry,
    scope_sums,
    snapshot_delta,
    snapshot_reads,
    snapshot_triggers,
    spill_params,
    usd_params,
)
from admission.backends import get_backend
from admission.scope_table import derive as derive_table
from admission.snapshot_reads import PoolBase
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot
from admission.usd import EMPTY, UsdBook

log = logging.getLogger(__name__)


# ---- derivation: pure, from rows already held ---------------------------------------------------


@dataclass
class Derived:
    """The scopes and pool totals at one instant (scope_table.derive; tests/admission/scope_spec.py states the same)."""

    scopes: dict[tuple[str, str, str, str, str], ScopeParams]
    reserved_rate: dict[int, float]  # wt/s of active reserved entitlements per pool
    sold: dict[int, float]  # CU of active entitlements that count as sold, per pool
    next_boundary: float | None  # epoch s of the next instant some held entitlement starts or ends
    # wt/s lenders keep back from borrowers per pool: (CU − lending_limit) × R of each active
    # entitlement with a lending limit (issue 36.3)
    withheld: dict[int, float] = field(default_factory=dict)


def derive_pools(bases: list[PoolBase], health: dict[int, tuple[int, int] | None], d: Derived) -> dict[int, PoolParams]:
    depth_s = settings.ADMISSION_BUCKET_DEPTH_S
    margin_frac = settings.ADMISSION_RECLAIM_MARGIN
    pools: dict[int, PoolParams] = {}
    for b in bases:
        h = health.get(b.pool_id)
        ratio = h[0] / h[1] if h and h[1] > 0 else 1.0
        rate = b.deliverable_cu * b.r_wt_per_s * ratio
        kept = d.withheld.get(b.pool_id, 0.0)
        pools[b.pool_id] = PoolParams(
            pool_id=b.pool_id, slug=b.slug, rate=rate, depth=rate * depth_s, margin=margin_frac * rate * depth_s,
            degraded=rate < d.sold.get(b.pool_id, 0.0) * b.r_wt_per_s,
            reserved_floor=-d.reserved_rate.get(b.pool_id, 0.0) * depth_s, health=h,
            lend_rate=max(0.0, rate - kept) if kept > 0 else None,
        )  # fmt: skip
    return pools


# ---- the process's snapshot and what it was read from -------------------------------------------


@dataclass
class _Held:
    """What the snapshot was derived from and the counters it was read under."""

    stamp: tuple[int, ...] | None = None
    scopes: snapshot_delta.Scopes = field(default_factory=snapshot_delta.Scopes)  # issue 35.2
    bases: list[PoolBase] = field(default_factory=list)
    health: dict[int, tuple[int, int] | None] = field(default_factory=dict)
    spill: list[Any] = field(default_factory=list)  # spillover rows (admission.spill_params)
    usd_limits: dict[tuple[str, str], float] = field(default_factory=dict)  # $ budgets (admission.usd_params)
    usd_prices: dict[int, float] | None = None  # $ per wt per pool, read while some $ budget exists
    full_at: float = 0.0  # time.monotonic() of the next safety-net full rebuild


ALL_PARTS = frozenset(snapshot_triggers.PARTS)
_lock = threading.Lock()
_current: Snapshot | None = None
_version = 0
_held = _Held()
_dirty: set[str] = set()  # parts an ORM save in this process changed (signals)
_dirty_scopes: set[scope_sums.IdKey] = set()  # the scopes of the entitlements it saved
_next_check = 0.0  # time.monotonic() of the next counter read


def _changed_parts(old: tuple[int, ...] | None, new: tuple[int, ...] | None) -> set[str]:
    if old is None or new is None:
        return set(ALL_PARTS) if old != new else set()
    return {p for p, a, b in zip(snapshot_triggers.PARTS, old, new, strict=True) if a != b}


def _refresh(snap: Snapshot | None, now: float, *, own: bool = True) -> Snapshot:
    """Read the counters, then re-read the parts that moved (counters first: rows read after them
    are at least as new, so a write is never hidden behind a counter already seen). Entitlements:
    only the scopes written since (admission.snapshot_delta), unless the whole must be read again.
    `own=False` (the refresher): this process's saves are left to the thread that made them, and a
    database error is raised to the refresher, which closes its connection."""
    global _current, _version, _dirty, _dirty_scopes, _next_check
    parts: set[str] = set()
    local: set[scope_sums.IdKey] = set()
    if own:
        parts, _dirty = _dirty, set()
        local, _dirty_scopes = _dirty_scopes, set()
    full_at = _held.full_at
    try:
        stamp, log_last = snapshot_triggers.read_with_log(connection)
        full = snap is None or now >= _held.full_at or snapshot_delta.lost(_held.stamp, stamp)
        if full:
            parts = set(ALL_PARTS)
            _held.full_at = now + settings.ADMISSION_SNAPSHOT_TTL_S
        parts |= _changed_parts(_held.stamp, stamp)
        if "catalogue" in parts:  # slugs and model rates: every scope
            parts |= {"entitlements", "supply"}
            full = True
        t = timezone.now()
        pending = None
        if "entitlements" in parts or local or _held.scopes.table is None:
            pending = _held.scopes.read(connection, log_last, local, t, full=full)
            _held.spill = spill_params.read(t)
            if pending.keys is None:  # a whole read: tenant and project rows (their $ budgets) log `everything`
                _held.usd_limits = usd_params.read_limits()
            # usage an import_atlas in another process handed to this process's store (atlas_carry)
            atlas_carry.apply_pending(get_backend())
        if "supply" in parts:
            _held.bases = snapshot_reads.pool_rows()
        if "supply" in parts or "health" in parts:
            _held.health = snapshot_reads.health_rows([b.pool_id for b in _held.bases])
        if "supply" in parts:
            _held.usd_prices = None
        if _held.usd_limits and _held.usd_prices is None:
            _held.usd_prices = usd_params.read_prices()
    except DatabaseError:
        _held.full_at = full_at  # a full rebuild that failed is still due
        if own:
            _dirty |= parts
            _dirty_scopes |= local
        if snap is None or not own:
            raise
        # The database is away: keep serving what we have, try again at the next check.
        log.warning("admission snapshot: database read failed; serving version %s", snap.version, exc_info=True)
        _next_check = now + settings.ADMISSION_SNAPSHOT_CHECK_S
        return snap
    _held.stamp = stamp
    if own:  # the refresher's tick must not put off a request thread's own save
        _next_check = now + settings.ADMISSION_SNAPSHOT_CHECK_S
    if pending is not None:
        _held.scopes.apply(pending, t.timestamp())
    if not parts and not local and snap is not None and now < snap.valid_until:
        return snap  # nothing moved: same snapshot, its plans kept
    table = _held.scopes.table
    assert table is not None
    table.advance(t.timestamp())  # the scopes a window start or end reached (no query)
    reserved, sold, withheld = table.totals()
    d = _with_spill(Derived(dict(table.scopes), reserved, sold, table.next_boundary(), withheld), _held.spill, t)
    until = _held.full_at
    if d.next_boundary is not None:
        until = min(until, now + max(0.0, d.next_boundary - t.timestamp()))
    placements = frozenset((b.model, b.region) for b in _held.bases)
    pools = derive_pools(_held.bases, _held.health, d)
    plans = {} if snap is None or not snap.plans else snapshot_delta.kept_plans(snap, d.scopes, pools)
    _version += 1
    _current = Snapshot(d.scopes, pools, placements, until, _version, plans, usd=_usd_book())
    if own:
        _kick.set()  # the refresher waits for the old snapshot's boundary: this one's may come sooner
    return _current


def current() -> Snapshot:
    """The live snapshot. When a check is due, one thread reads the counters (and what moved) while
    the others keep serving the previous snapshot (only the first build waits). With the refresher
    running, a request thread refreshes only for the three reasons in the module's docstring."""
    snap = _current
    bg = _pid == os.getpid() or _start()
    if snap is not None:
        now = time.monotonic()
        if now < snap.valid_until and (now < _next_check or (bg and not (_dirty or _dirty_scopes))):
            return snap
    # The refresher may hold the lock: a boundary or an own save waits for it rather than be missed.
    if not _lock.acquire(blocking=snap is None or bg):
        return snap  # type: ignore[return-value]  # someone else is refreshing: serve the previous one
    try:
        snap = _current
        now = time.monotonic()
        if snap is None or now >= snap.valid_until or (now >= _next_check and (not bg or _dirty or _dirty_scopes)):
            snap = _refresh(snap, now)
        return snap
    finally:
        _lock.release()


# ---- the refresher thread (ADMISSION_SNAPSHOT_BACKGROUND) ----------------------------------------

_pid = 0  # the process whose refresher runs (0: none); a forked child has another pid and starts its own
_start_lock = threading.Lock()
_stop = threading.Event()  # the running refresher's; a new one per thread
_kick = threading.Event()  # set: a request thread published a snapshot (or stop): the refresher's wait is stale
_thread: threading.Thread | None = None
IDLE_S = 0.01  # the shortest wait between ticks (a check interval of 0, a boundary passed)


def _start() -> bool:
    """Start this process's refresher when the setting asks for one; → whether it runs."""
    global _pid, _stop, _kick, _thread
    if not settings.ADMISSION_SNAPSHOT_BACKGROUND:
        return False
    with _start_lock:
        if _pid != os.getpid():
            _pid, _stop, _kick = os.getpid(), threading.Event(), threading.Event()
            _thread = threading.Thread(target=_run, args=(_stop, _kick), name="admission-snapshot-refresh", daemon=True)
            _thread.start()
    return True


def _run(stop: threading.Event, kick: threading.Event) -> None:
    failed = False
    try:
        while True:
            kicked = kick.wait(_wait_s(failed))
            if stop.is_set():
                return
            kick.clear()
            if kicked:
                continue  # a snapshot just read: wait again, until its boundary at the latest
            try:
                _tick()
                failed = False
            except Exception:
                failed = True  # the next tick tries again, on a new connection
                log.exception("admission snapshot refresher: refresh failed; serving the held snapshot")
                _close_connection()
    finally:
        _close_connection()


def _wait_s(failed: bool) -> float:
    wait = settings.ADMISSION_SNAPSHOT_CHECK_S
    snap = _current
    if snap is not None and not failed:  # wake at the window boundary, before a request thread meets it
        wait = min(wait, snap.valid_until - time.monotonic())
    return max(IDLE_S, wait)


REFRESHER_APP_NAME = "headroom-snapshot-refresher"
_named: object | None = None  # the raw connection the refresher last named (only its thread sets it)


def _name_connection() -> None:
    """Name the refresher's PostgreSQL session, so an operator tells it apart in pg_stat_activity
    (and a test can end exactly this connection)."""
    global _named
    if connection.vendor != "postgresql":
        return
    connection.ensure_connection()
    if connection.connection is _named:
        return
    with connection.cursor() as cur:
        cur.execute("SET application_name = %s", [REFRESHER_APP_NAME])
    _named = connection.connection


def _tick() -> None:
    if not settings.ADMISSION_SNAPSHOT_BACKGROUND:
        return
    _name_connection()
    with _lock:
        snap = _current
        if snap is not None:  # the first build (and one after invalidate()) is a request thread's
            _refresh(snap, time.monotonic(), own=False)


def _close_connection() -> None:
    try:
        connection.close()
    except Exception:  # a connection the server already dropped may fail to close: it is gone either way
        log.debug("admission snapshot refresher: closing its connection failed", exc_info=True)


def stop_refresher() -> None:
    """End this process's refresher and wait for it (its connection closed); the next current()
    starts another if the setting asks (tests, a setting change)."""
    global _pid, _thread
    with _start_lock:
        _stop.set()
        _kick.set()
        t, _thread, _pid = _thread, None, 0
    if t is not None and t is not threading.current_thread():
        t.join()


def _after_fork() -> None:
    global _lock, _start_lock
    # A fork copies the locks as the parent's threads held them, not those threads: fresh ones.
    _lock, _start_lock = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _with_spill(d: Derived, rows: list[Any], t: datetime) -> Derived:
    """The scopes with their spillover (issue 36.1) at `t`; the next boundary counts the spill rows' too."""
    ts = t.timestamp()
    d.scopes = spill_params.attach(d.scopes, rows, ts)
    nxt = spill_params.next_boundary(rows, ts)
    if nxt is not None and (d.next_boundary is None or nxt < d.next_boundary):
        d.next_boundary = nxt
    return d


def _usd_book() -> UsdBook:
    if not _held.usd_limits:
        return EMPTY
    return UsdBook(dict(_held.usd_limits), dict(_held.usd_prices or {}))


def build(now: datetime | None = None, version: int = 0) -> Snapshot:
    """A whole snapshot read afresh, outside the process's cache (bench/scale.py times this)."""
    t = now or timezone.now()
    bases = snapshot_reads.pool_rows()
    d = _with_spill(Derived(*derive_table(scope_sums.read(t), t.timestamp())), spill_params.read(t), t)
    pools = derive_pools(bases, snapshot_reads.health_rows([b.pool_id for b in bases]), d)
    limits = usd_params.read_limits()
    usd = UsdBook(limits, usd_params.read_prices()) if limits else EMPTY
    return Snapshot(d.scopes, pools, frozenset((b.model, b.region) for b in bases), float("inf"), version, usd=usd)


def changed(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """Signal receiver: an ORM save in this process changed its model's part; the next call
    re-reads that part, an entitlement's scope alone (other processes see it through the counters
    and the change log within one check)."""
    global _next_check
    table = getattr(getattr(sender, "_meta", None), "db_table", "")
    if table == "entitlements_entitlement" and instance is not None:
        e = instance
        _dirty_scopes.add((e.tenant_id, e.project_id, e.model_id, e.region_id, e.traffic_class_id))
    _dirty.add(snapshot_triggers.TABLES.get(table, "catalogue"))
    _next_check = 0.0


def invalidate(*_: Any, **__: Any) -> None:
    """Drop the snapshot in this process: the next call rebuilds every part (tests, the health API)."""
    global _current
    _current = None


def setting_changed(*, setting: str, **_: Any) -> None:
    """The snapshot and its plans hold ADMISSION_* settings: a change (tests) drops them."""
    if setting == "ADMISSION_SNAPSHOT_BACKGROUND":
        stop_refresher()
    if setting.startswith("ADMISSION_") or setting == "SECRET_KEY":
        invalidate()
