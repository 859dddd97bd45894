"""Issue 12.3: Redis restarts under load, with AOF (appendfsync everysec) as production runs it.

Threads reserve and complete through the serving path (admission.services) against a private
redis-server while it is restarted gracefully, or killed with SIGKILL, mid-load. What must hold:
every decision and every complete has its event, ids do not change, and a kill -9 loses at most
about a second of store writes, each of which still settles from its signed id.
"""

from __future__ import annotations

import threading
import time

import pytest

from admission import backends, events, ids, keys, params, services
from admission.backends.redis import RedisBackend
from tests.admission.world import body, build_world
from tests.servers.redis import RedisServer


@pytest.fixture
def aof_server(tmp_path):
    s = RedisServer(tmp_path, aof=True)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def loaded(fleet, sink, aof_server, settings):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600  # the threads never read the database: the snapshot is warm
    settings.ADMISSION_SNAPSHOT_TTL_S = 3600
    backend = RedisBackend(aof_server.url, socket_timeout=0.5, probe_every_s=0.05)
    prev = backends.set_backend(backend)
    params.invalidate()
    w = build_world(fleet)
    params.current()
    yield w, backend
    backends.set_backend(prev)
    params.invalidate()


STORE_SOURCES = ("entitlement", "borrowed")  # answers the store decided (not a fail mode's)
PER_SIDE = 60  # store-admitted reservations before the fault, and again after it


class Load:
    """4 threads: reserve, then complete (retried while the store answers 503), as fast as they can."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.reserves: dict[str, tuple[float, dict]] = {}  # request id → (answered at, body)
        self.completes: dict[str, int] = {}
        self.errors: list[BaseException] = []

    def worker(self, n: int) -> None:
        i = 0
        try:
            while not self.stop.is_set():
                rid = f"t{n}-{i}"
                i += 1
                d = services.reserve(services.parse_reserve(body("acme", "reserved", rid, prompt=1, out=1)))
                with self.lock:
                    self.reserves[rid] = (time.time(), d.body)
                if d.status != 200:
                    continue
                for _ in range(400):
                    status, _ = services.complete(services.parse_complete(
                        {"reservation_id": d.body["reservation_id"], "prompt_tokens": 1, "output_tokens": 1,
                         "status": "ok"}))  # fmt: skip
                    if status != 503:
                        break
                    time.sleep(0.025)
                with self.lock:
                    self.completes[rid] = status
        except BaseException as exc:  # noqa: BLE001 - any failure of the serving path is the finding
            self.errors.append(exc)

    def stored_since(self, t: float) -> int:
        with self.lock:
            return sum(at >= t and b.get("source") in STORE_SOURCES for at, b in self.reserves.values())

    def until(self, predicate) -> None:  # type: ignore[no-untyped-def]
        """Polls the load (not a fixed sleep: a loaded machine takes longer to get as far)."""
        guard = time.monotonic() + 120  # a hang guard, not a timing assertion
        while not predicate() and not self.errors and time.monotonic() < guard:
            time.sleep(0.01)

    def run(self, fault) -> float:  # type: ignore[no-untyped-def]
        ts = [threading.Thread(target=self.worker, args=(n,)) for n in range(4)]
        for t in ts:
            t.start()
        self.until(lambda: self.stored_since(0.0) >= PER_SIDE)  # reservations the fault can lose
        at = time.time()
        fault()
        back = time.time()
        self.until(lambda: self.stored_since(back) >= PER_SIDE)  # the store serves again after it
        self.stop.set()
        for t in ts:
            t.join()
        return at


def _check_events(load: Load, sink) -> None:
    events.buffer().flush()
    decided = {e["event_id"] for e in sink.events if e["decision"] in ("admit", "throttle")}
    completed = {e["event_id"] for e in sink.of("complete")}
    admitted = {rid for rid, (_, b) in load.reserves.items() if b["decision"] == "admit"}
    assert decided == set(load.reserves)  # every decision has its event
    assert completed == {f"{rid}:complete" for rid in admitted}  # every complete has its event
    assert set(load.completes.values()) == {200}


def _store_admitted(load: Load) -> dict[str, tuple[float, dict]]:
    return {r: (t, b) for r, (t, b) in load.reserves.items() if b.get("source") in STORE_SOURCES}


@pytest.mark.redis
@pytest.mark.slow
def test_graceful_restart_mid_load_loses_no_event_and_changes_no_id(loaded, aof_server, sink):
    w, backend = loaded
    load = Load()

    def restart() -> None:
        aof_server.stop()  # SIGTERM: Redis fsyncs its AOF and exits
        time.sleep(0.3)
        aof_server.start()

    load.run(restart)
    assert load.errors == []
    _check_events(load, sink)
    stored = _store_admitted(load)
    assert len(stored) > 100  # the load was real on both sides of the restart
    client = aof_server.client()
    for rid, (_, b) in stored.items():
        key = services.reservation_id(ids.record_key(), "acme", rid)
        assert client.exists(backend.record_key(key, keys.tag(backend.prefix, w.pool.pk))) == 1, rid  # nothing lost
        again = services.reserve(services.parse_reserve(body("acme", "reserved", rid, prompt=1, out=1)))
        assert again.body == {**b, "settled": True}, rid  # the same id, the same answer


@pytest.mark.redis
@pytest.mark.slow
def test_kill_9_mid_load_loses_at_most_about_a_second_and_every_complete_still_settles(loaded, aof_server, sink):
    w, backend = loaded
    load = Load()

    def kill_and_restart() -> None:
        aof_server.kill()  # SIGKILL: what the AOF had not fsynced yet is gone
        time.sleep(0.3)
        aof_server.start()

    killed_at = load.run(kill_and_restart)
    assert load.errors == []
    _check_events(load, sink)  # lost reservations included: their completes settled from the ids
    client = aof_server.client()
    lost_ages = []
    for rid, (t, _) in _store_admitted(load).items():
        key = services.reservation_id(ids.record_key(), "acme", rid)
        if t < killed_at and not client.exists(backend.record_key(key, keys.tag(backend.prefix, w.pool.pk))):
            lost_ages.append(killed_at - t)
    print(f"kill -9: {len(lost_ages)} confirmed reservations lost, oldest {max(lost_ages, default=0):.3f} s before")
    # everysec: Redis fsyncs once a second (up to 2 s when an fsync is slow): nothing older is lost.
    assert max(lost_ages, default=0.0) <= 2.0
