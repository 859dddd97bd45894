"""Receipts for events handed to a broker: the end-to-end check behind at-least-once delivery.

A batch published to Celery is not yet recorded. kombu's Redis transport pops a message (BRPOP) before
it writes the message to its `unacked` hash, so a worker that loses the broker in between, or exits with
the reply still unread in its socket (celery#4354, kombu#305), loses the batch with nothing left in the
queue or in `unacked` to redeliver it (seen in CI: 500 of 20,686 decisions gone after the third broker
kill). No broker option closes that window, so the process that made the decisions keeps each handed-off
batch until PostgreSQL has it: once `after_s` has passed it asks which of the batch's event ids are
recorded (telemetry's dedup keys, one primary-key lookup per 1,000 ids) and hands the missing ones off
again; ingest dedups, so a resend that crosses a slow delivery costs nothing but the lookup. The wait
doubles with each resend, and after `tries` resends what is still missing is dead-lettered with its
reason, where an operator sees it and can replay it: bounded work, never a silent loss.

Bounded memory: at most `bound` events are tracked; a batch handed off beyond that is sent but not
tracked, and counted (`untracked`). What is tracked when the process exits is not waited for: it was
handed to the broker, and only the window above can lose it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Confirm = Callable[[list[str]], Iterable[str]]  # event ids → those recorded


@dataclass(order=True)
class _Sent:
    due: float
    seq: int
    tries: int = field(compare=False)
    batch: list[dict[str, Any]] = field(compare=False)


class Receipts:
    def __init__(
        self, confirm: Confirm, *, after_s: float = 30.0, tries: int = 5, bound: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.confirm, self.after_s, self.tries, self.bound, self.clock = confirm, after_s, tries, bound, clock
        self._heap: list[_Sent] = []
        self._seq = itertools.count()
        self._tracked = 0
        self._lock = threading.Lock()
        self.counts = {"confirmed": 0, "resent": 0, "untracked": 0, "unrecorded": 0}

    def track(self, batch: list[dict[str, Any]]) -> None:
        """A batch the sink handed off: check on it in `after_s`."""
        keyed = [e for e in batch if isinstance(e, dict) and e.get("event_id")]
        if keyed:
            self._push(self.clock() + self.after_s, 0, keyed)

    def _push(self, due: float, tries: int, batch: list[dict[str, Any]]) -> None:
        with self._lock:
            if self._tracked + len(batch) > self.bound:
                self.counts["untracked"] += len(batch)
                return
            heapq.heappush(self._heap, _Sent(due, next(self._seq), tries, batch))
            self._tracked += len(batch)

    def pending(self) -> int:
        with self._lock:
            return self._tracked

    def check(self, resend: Callable[[list[dict[str, Any]]], Any],
              dead_letter: Callable[[list[dict[str, Any]], str], Any]) -> int:  # fmt: skip
        """Settle every batch whose wait is over: confirmed ones are let go, missing events are resent
        (or dead-lettered after the last try). → events resent."""
        now = self.clock()
        due: list[_Sent] = []
        with self._lock:
            while self._heap and self._heap[0].due <= now:
                sent = heapq.heappop(self._heap)
                self._tracked -= len(sent.batch)
                due.append(sent)
        if not due:
            return 0
        ids = [str(e["event_id"]) for s in due for e in s.batch]
        try:
            recorded = set(self.confirm(ids))
        except Exception:  # the database is away: ask again after the next wait, nothing resent blind
            log.warning("admission events: receipts unreadable; %d events kept", len(ids), exc_info=True)
            for s in due:
                self._push(now + self.after_s, s.tries, s.batch)
            return 0
        resent = 0
        for s in due:
            missing = [e for e in s.batch if str(e["event_id"]) not in recorded]
            self.counts["confirmed"] += len(s.batch) - len(missing)
            if missing:
                resent += self._settle_missing(s, missing, now, resend, dead_letter)
        return resent

    def _settle_missing(self, s: _Sent, missing: list[dict[str, Any]], now: float,
                        resend: Callable[[list[dict[str, Any]]], Any],
                        dead_letter: Callable[[list[dict[str, Any]], str], Any]) -> int:  # fmt: skip
        if s.tries >= self.tries:
            waited = self.after_s * (2 ** (s.tries + 1) - 1)
            try:
                dead_letter(missing, f"not recorded {waited:.0f} s after hand-off, resent {s.tries} times")
            except Exception:
                log.error("admission events: dead letter failed; %d events kept", len(missing), exc_info=True)
                self._push(now + self.after_s, s.tries, missing)
                return 0
            self.counts["unrecorded"] += len(missing)
            return 0
        try:
            resend(missing)
        except Exception:  # the broker is away: the same try again after a wait
            log.warning("admission events: resend failed; %d events kept", len(missing), exc_info=True)
            self._push(now + self.after_s, s.tries, missing)
            return 0
        self.counts["resent"] += len(missing)
        self._push(now + self.after_s * 2 ** (s.tries + 1), s.tries + 1, missing)
        return len(missing)
