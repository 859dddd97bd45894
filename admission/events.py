"""Admission events, batched off the hot path (docs/INTERFACES.md: admission → telemetry).

`emit()` appends to a bounded in-process buffer; a daemon thread flushes every FLUSH_S, and
whole batches as soon as BATCH events wait, calling the sink AdmissionConfig.ready() configures
(admission.tasks.default_sink: telemetry's ingest, inline or in a Celery worker; admission.sinks).
A failing sink keeps the events at the front of the buffer and is retried with exponential
backoff, MAX_ATTEMPTS times for one batch: then the batch is dead-lettered
(admission.sinks.dead_letter_batch, stage "admission.events": an operator sees and can replay
it) and the rest goes on, so one poison batch never stalls the pipeline. Only what overflows the
bound is lost, and it is counted (`stats()["dropped"]`).

Shutdown (issue 12.4): the buffer is not handed off durably per event (a database or broker write
before each answer would cost more than the reserve itself); instead it is flushed when the
process exits, for at most ADMISSION_EVENT_SHUTDOWN_S (10 s). gunicorn and Celery turn SIGTERM
into a normal exit, which runs the flush (atexit); in a process where SIGTERM would kill outright
(runserver, management commands), `install_shutdown_flush` makes it a normal exit first. What the
sink still refuses at the bound is dead-lettered as one batch, so nothing is lost silently.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from admission.event_receipts import Confirm, Receipts

log = logging.getLogger(__name__)

Sink = Callable[[list[dict[str, Any]]], Any]
THREAD_NAME = "admission-events"


class _HandedOff:
    """What a sink returns when it gave the batch to a broker: sent, not yet recorded (receipts follow)."""

    def __repr__(self) -> str:
        return "HANDED_OFF"


HANDED_OFF = _HandedOff()
MAX_ATTEMPTS = 5  # per batch, with exponential backoff between them; then the batch is dead-lettered


DeadLetter = Callable[[list[dict[str, Any]], str], Any]
_sink: Sink | None = None
_dead_letter: DeadLetter | None = None
_confirm: Confirm | None = None


def configure(*, sink: Sink, dead_letter: DeadLetter, confirm: Confirm | None = None) -> None:
    """Where batches go and where a batch the sink gave up on is quarantined. AdmissionConfig.ready()
    sets them (admission.tasks.default_sink, admission.sinks.dead_letter_batch), so this module imports
    neither telemetry nor the tasks that import it. `confirm` (admission.sinks.recorded) says which
    handed-off events PostgreSQL has (admission.event_receipts)."""
    global _sink, _dead_letter, _confirm
    _sink, _dead_letter, _confirm = sink, dead_letter, confirm


def configured_sink(events: list[dict[str, Any]]) -> Any:
    if _sink is None:
        raise RuntimeError("admission events: no sink configured (AdmissionConfig.ready() sets it)")
    return _sink(events)


def configured_confirm(event_ids: list[str]) -> Any:
    if _confirm is None:
        raise RuntimeError("admission events: no confirm configured (AdmissionConfig.ready() sets it)")
    return _confirm(event_ids)


def configured_dead_letter(batch: list[dict[str, Any]], error: str) -> Any:
    if _dead_letter is None:
        raise RuntimeError("admission events: no dead letter configured (AdmissionConfig.ready() sets it)")
    return _dead_letter(batch, error)


class EventBuffer:
    def __init__(
        self, sink: Sink = configured_sink, *, bound: int = 100_000, batch: int = 500, flush_s: float = 1.0,
        max_backoff_s: float = 30.0, autostart: bool = True, max_attempts: int = MAX_ATTEMPTS,
        dead_letter: DeadLetter = configured_dead_letter, receipts: Receipts | None = None,
    ) -> None:  # fmt: skip
        self.sink = sink
        self.bound, self.batch, self.flush_s, self.max_backoff_s = bound, batch, flush_s, max_backoff_s
        self._q: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flusher at a time, or a batch could be sent twice
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.autostart = autostart  # False: only explicit flush() sends (tests, one-shot commands)
        self._backoff = 0.0
        self.max_attempts, self.dead_letter = max_attempts, dead_letter
        self.receipts = receipts  # None: the sink records before it returns (inline ingest, tests)
        self._attempts = 0  # failures of the batch at the front of the buffer
        self.counts = {"emitted": 0, "flushed": 0, "dropped": 0, "rejected": 0, "sink_failures": 0,
                       "dead_lettered": 0}  # fmt: skip

    def emit(self, event: dict[str, Any]) -> None:
        with self._lock:
            if len(self._q) >= self.bound:
                self.counts["dropped"] += 1
                return
            self._q.append(event)
            self.counts["emitted"] += 1
            full = len(self._q) >= self.batch
        if self.autostart and self._pid != os.getpid():
            self._start()
        if full:
            self._wake.set()

    def _start(self) -> None:
        # After a fork (gunicorn workers) the parent's thread does not exist here: start our own.
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            full = self._wake.wait(self._backoff or self.flush_s)
            self._wake.clear()
            with self._flushing:
                # Woken by a full batch: send full batches only and leave the rest for the tick (or the
                # next full batch). Draining to the last event would, under steady load, hand the sink
                # a stream of tiny batches, each paying the sink's whole fixed cost on the web worker.
                self._flush(whole_batches=full and not self._backoff)
                self.check_receipts()

    def check_receipts(self) -> int:
        """Resend what a broker took and PostgreSQL never got (admission.event_receipts). → events resent."""
        if self.receipts is None:
            return 0
        return self.receipts.check(resend=self.sink, dead_letter=self.dead_letter)

    def flush(self) -> int:
        """Send what is buffered, batch by batch; stop at the first failure. → events delivered."""
        with self._flushing:
            return self._flush()

    def _flush(self, whole_batches: bool = False) -> int:
        sent = 0
        while True:
            with self._lock:
                batch = [self._q[i] for i in range(min(self.batch, len(self._q)))]
            if not batch or (whole_batches and len(batch) < self.batch):
                if not batch:
                    self._backoff = 0.0
                return sent
            try:
                result = self.sink(batch)
            except Exception as exc:
                log.warning("admission events: sink failed; %d events kept for retry", len(self._q), exc_info=True)
                self.counts["sink_failures"] += 1
                self._attempts += 1
                if self._attempts < self.max_attempts or not self._quarantine(batch, exc):
                    self._backoff = min(self.max_backoff_s, max(self.flush_s, self._backoff * 2 or self.flush_s))
                    return sent
                continue  # the batch is quarantined: go on with the rest
            self._attempts = 0
            if result is HANDED_OFF and self.receipts is not None:
                self.receipts.track(batch)
            with self._lock:
                for _ in batch:
                    self._q.popleft()
                errors = getattr(result, "errors", None) or (result.get("errors") if isinstance(result, dict) else [])
                self.counts["rejected"] += len(errors or [])
                self.counts["flushed"] += len(batch)
            sent += len(batch)

    def _quarantine(self, batch: list[dict[str, Any]], exc: Exception) -> bool:
        """Dead-letter the front batch after its last attempt; False (keep it) if that fails too."""
        try:
            self.dead_letter(batch, f"{type(exc).__name__}: {exc} (after {self._attempts} attempts)")
        except Exception:
            log.error("admission events: dead letter failed too; %d events kept", len(batch), exc_info=True)
            return False
        with self._lock:
            for _ in batch:
                self._q.popleft()
            self.counts["dead_lettered"] += len(batch)
        self._attempts = 0
        return True

    def shutdown(self, bound_s: float) -> int:
        """Process exit: stop the flusher, send what is buffered for at most `bound_s` (a sink that
        refuses three times in a row is not waited for), then dead-letter what is left.
        → events left unrecorded (both the sink and the dead letter failed)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(bound_s)
        self._pid = 0
        deadline, refusals = time.monotonic() + bound_s, 0
        while self.pending() and time.monotonic() < deadline and refusals < 3:
            before = self.pending()
            self.flush()
            if self.pending() >= before:  # the sink refused: a short wait, three times at most
                refusals += 1
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        left = [self._q.popleft() for _ in range(self.pending())]
        if left:
            try:
                self.dead_letter(left, f"sink still failing at shutdown after {bound_s} s")
                self.counts["dead_lettered"] += len(left)
                return 0
            except Exception:
                log.error("admission events: %d events lost at shutdown", len(left), exc_info=True)
                self.counts["dropped"] += len(left)
                return len(left)
        return 0

    def stop(self, *, flush: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self._pid = 0
        if flush:
            self.flush()

    def pending(self) -> int:
        return len(self._q)

    def stats(self) -> dict[str, int]:
        receipts = self.receipts.counts if self.receipts is not None else {}
        tracked = {"awaiting_receipt": self.receipts.pending()} if self.receipts is not None else {}
        with self._lock:
            return {**self.counts, **receipts, **tracked, "pending": len(self._q), "bound": self.bound}


_buffer: EventBuffer | None = None
_buffer_lock = threading.Lock()


def buffer() -> EventBuffer:
    global _buffer
    if _buffer is None:
        with _buffer_lock:
            if _buffer is None:
                from django.conf import settings

                install_shutdown_flush()
                receipts = Receipts(configured_confirm, after_s=settings.ADMISSION_EVENT_CONFIRM_S,
                                    tries=settings.ADMISSION_EVENT_CONFIRM_TRIES, bound=settings.ADMISSION_EVENT_BUFFER)  # fmt: skip
                _buffer = EventBuffer(
                    bound=settings.ADMISSION_EVENT_BUFFER,
                    batch=settings.ADMISSION_EVENT_BATCH,
                    flush_s=settings.ADMISSION_EVENT_FLUSH_S,
                    receipts=receipts,
                )
    return _buffer


def set_buffer(buf: EventBuffer | None) -> EventBuffer | None:
    global _buffer
    with _buffer_lock:
        prev, _buffer = _buffer, buf
    return prev


def emit(event: dict[str, Any]) -> None:
    buffer().emit(event)


_installed = False


def _flush_at_exit() -> None:
    from django.conf import settings

    buf = _buffer
    if buf is not None and (buf.pending() or buf._thread is not None):
        buf.shutdown(settings.ADMISSION_EVENT_SHUTDOWN_S)


def _sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # a normal exit: atexit handlers (the flush) run


def install_shutdown_flush() -> None:
    """Flush the buffer at process exit (atexit), and make SIGTERM an exit where it would kill
    outright. Servers that handle SIGTERM themselves (gunicorn, Celery) keep their handler: their
    graceful stop ends in a normal exit, which flushes."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_flush_at_exit)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm)


def stats() -> dict[str, int]:
    return buffer().stats()
