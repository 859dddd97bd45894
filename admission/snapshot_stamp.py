"""The gateway snapshot's stamp (issue 35.1): a poll naming the current ETag is answered 304 from the
change counters, without building the snapshot (entitlements.api.snapshot.STAMP, registered at ready()).

The key is the trigger-kept counters (admission.snapshot_triggers: every table the snapshot reads,
entitlement and pool rows, the catalogue, fleet samples and alerts, bumps one) with the version of
this process's serving snapshot (admission.params), which the snapshot's "admission" block is.
Time moves the snapshot with no write: an entitlement window starting or ending, and health the
serving path re-reads only on its safety-net rebuild. A key vouches for a build until the serving
snapshot's own `valid_until` (its next window boundary, at most ADMISSION_SNAPSHOT_TTL_S away), so
a 304 is never staler than what the serving path enforces.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

from django.conf import settings
from django.db import connection

from admission import params, snapshot_triggers


class CounterStamp:
    def read(self) -> Hashable:
        """One query. An ORM save in this process not yet taken in by the serving snapshot (it marks
        params dirty at once, but its counter bump on PostgreSQL only lands at commit) gives a key no
        build is remembered under, so the poll builds."""
        counters = snapshot_triggers.read(connection)
        snap = params._current
        dirty = bool(params._dirty or params._dirty_scopes)
        return (counters, None if snap is None or dirty else snap.version)

    def vouch(self, key: Hashable) -> tuple[Hashable, float] | None:
        """After a build: its "admission" block is the serving snapshot now held; it stands for the
        counters read before the build only if that snapshot was read at those very counters (it
        checks them every ADMISSION_SNAPSHOT_CHECK_S, so it may lag a write another process made)."""
        counters = key[0]  # type: ignore[index]  # the tuple read() returns
        snap = params._current
        if snap is None or params._held.stamp != counters or params._dirty or params._dirty_scopes:
            return None
        until = min(snap.valid_until, time.monotonic() + settings.ADMISSION_SNAPSHOT_TTL_S)
        return (counters, snap.version), until


stamp = CounterStamp()
