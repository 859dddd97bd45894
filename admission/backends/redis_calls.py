"""The Redis backend's calls: the client and the hot path's bounded connections (one set per node on
a Redis Cluster), the circuit breaker, and EVALSHA with its retries (see redis.py's docstring).
RedisBackend (redis.py) is these plus the operations' keys and arguments.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import AskError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from admission.backends import inputs
from admission.backends.base import StoreUnavailable
from admission.backends.breaker import Breaker
from admission.backends.connections import BoundedConnections, Exhausted

LUA = Path(__file__).with_name("lua")
DOWN = (RedisConnectionError, RedisTimeoutError, OSError)
ATTEMPTS = 3  # per call while the breaker stays closed: a slow answer is waited for, then retried

# The client timeout (ADMISSION_REDIS_TIMEOUT_S). It must sit well above what a healthy Redis
# takes under load, or the serving path fails open on slow answers (issue 12.1: 26 of 185 admits
# at 50 ms). Measured 2026-11-30 on this 2-core machine, load average 6-10 (five other test
# suites running): tests/admission/hammer.py, 2 spawned processes x 16 threads, one reserved
# scope, reserve (EVALSHA reserve.lua, timed around RedisBackend.reserve, so pool checkout and GIL
# waits included) + complete per request, 10 s, three runs: p99 43 / 56 / 96 ms, p99.9 89-185 ms,
# max 248-852 ms. 3 x the worst p99 is 288 ms: the default is 300 ms, and an answer slower than
# that is asked again (ATTEMPTS) before the breaker's count can open it.
DEFAULT_TIMEOUT_S = 0.3
POOL_SIZE = 64  # connections per process (ADMISSION_REDIS_MAX_CONNECTIONS)


def _script(name: str) -> str:
    """lib.lua, then for the reserve its generated preamble (the inputs by name), then the operation."""
    pre = inputs.lua_preamble() if name == "reserve" else ""
    return (LUA / "lib.lua").read_text() + "\n" + pre + (LUA / f"{name}.lua").read_text()


class Script:
    def __init__(self, name: str) -> None:
        self.source = _script(name).encode()
        self.sha = hashlib.sha1(self.source).hexdigest().encode()  # noqa: S324  (Redis names scripts by SHA-1)


class RedisCalls:
    """A Redis server or cluster behind a breaker: `client` for the general commands, `_eval` for the scripts."""

    def __init__(
        self, url: str, *, socket_timeout: float = DEFAULT_TIMEOUT_S, pool_size: int = POOL_SIZE,
        breaker_threshold: int = 5, probe_every_s: float = 0.5, cluster: bool | None = None,
    ) -> None:  # fmt: skip
        """`cluster`: a Redis Cluster (redis.cluster.RedisCluster; default: when the URL's scheme is
        `redis+cluster://`, which is read as `redis://` with any node of the cluster)."""
        if cluster is None:
            cluster = url.startswith("redis+cluster://")
        url = url.replace("redis+cluster://", "redis://", 1)
        self.cluster = cluster
        kw = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout, "retry_on_timeout": False,
              "health_check_interval": 0}  # fmt: skip
        self._conn_kw, self._pool_size, self._wait_s = kw, pool_size, max(1.0, 4 * socket_timeout)
        self._node_conns: dict[str, BoundedConnections] = {}
        if cluster:
            from redis.cluster import RedisCluster

            # The general client routes each command by its key's slot; the hot path routes itself
            # (_conns_for) with a bounded set of connections per node.
            self.client: Any = RedisCluster.from_url(url, socket_timeout=socket_timeout,
                                                     socket_connect_timeout=socket_timeout)  # fmt: skip
            self.connections = None
        else:
            # The general client: the sweep, introspection and tests (bounded too: it is shared by threads).
            self.client = redis.Redis(
                connection_pool=redis.BlockingConnectionPool.from_url(url, max_connections=8, timeout=5, **kw)
            )
            hot = redis.ConnectionPool.from_url(url, max_connections=pool_size, **kw)
            self.connections = BoundedConnections(hot.make_connection, size=pool_size, wait_s=self._wait_s)
        self.breaker = Breaker(self._ping, threshold=breaker_threshold, probe_every_s=probe_every_s)

    def _conns_for(self, key: bytes | str | None) -> BoundedConnections:
        """The connections to the node holding `key`'s slot (Redis Cluster), else the one server's."""
        if self.connections is not None:
            return self.connections
        from redis.cluster import key_slot

        k = key.encode() if isinstance(key, str) else (key or b"")
        node = self.client.nodes_manager.get_node_from_slot(key_slot(k))
        got = self._node_conns.get(node.name)
        if got is None:
            host, port, kw = node.host, node.port, self._conn_kw
            got = self._node_conns.setdefault(
                node.name,
                BoundedConnections(
                    lambda: redis.Connection(host=host, port=port, **kw), size=self._pool_size, wait_s=self._wait_s
                ),  # fmt: skip
            )
        return got

    # ---- the hot path's connection ------------------------------------------------------------

    def _ping(self) -> bool:
        if self.connections is None:
            try:
                return bool(self.client.ping())  # every primary of the cluster
            except (*DOWN, redis.RedisError):
                return False
        try:
            conn = self.connections.acquire()
        except Exhausted:
            return True  # every connection is busy with a call: the store is not known to be down
        try:
            conn.send_packed_command((pack_command((b"PING",)),), check_health=False)
            return conn.read_response() in (b"PONG", "PONG", True)
        except DOWN:
            conn.disconnect()
            return False
        finally:
            self.connections.release(conn)

    def _eval(
        self, script: Script, nkeys: int, args: tuple[Any, ...], tail: tuple[int, bytes] = (0, b""),
        extra: tuple[Any, ...] = (),
    ) -> Any:  # fmt: skip
        """EVALSHA with `args`, then `tail`: more arguments already packed (their count, their RESP),
        then `extra` (per-call values after the static ones: budgets).
        → (reply, attempts): more than one attempt means an earlier one may have run unseen."""
        head = pack_command((b"EVALSHA", script.sha, nkeys, *args))
        if tail[0] or extra:
            more = pack_command(extra).split(b"\r\n", 1)[1] if extra else b""
            n = 3 + len(args) + tail[0] + len(extra)
            head = b"*%d\r\n%s%s%s" % (n, head.split(b"\r\n", 1)[1], tail[1], more)
        breaker = self.breaker
        for attempt in range(1, ATTEMPTS + 1):
            if not breaker.allow():
                raise StoreUnavailable("admission store circuit open")
            conns = self._conns_for(args[0] if nkeys else None)  # KEYS[1]: every key shares its slot
            try:
                conn = conns.acquire()
            except Exhausted as exc:
                raise StoreUnavailable(str(exc)) from exc  # saturated here, not down there: no breaker count
            try:
                try:
                    conn.send_packed_command((head,), check_health=False)
                    out = conn.read_response()
                except NoScriptError:
                    conn.send_packed_command(
                        (pack_command((b"SCRIPT", b"LOAD", script.source)),),  # type: ignore[arg-type]  # stub: 1-tuple
                        check_health=False,
                    )
                    conn.read_response()
                    conn.send_packed_command((head,), check_health=False)
                    out = conn.read_response()
            except DOWN as exc:
                conn.disconnect()  # a timed-out socket may still deliver the late answer: never reuse it as is
                breaker.failure()
                if attempt == ATTEMPTS or breaker.is_open:
                    raise StoreUnavailable(str(exc)) from exc
                continue
            except ResponseError as exc:
                # A cluster that moved the slot (resharding, failover): learn the slots again, retry.
                if self.connections is None and isinstance(exc, AskError) and attempt < ATTEMPTS:  # MOVED too
                    self.client.nodes_manager.initialize()
                    continue
                raise
            finally:
                conns.release(conn)
            breaker.success()
            return out, attempt
        raise AssertionError("unreachable")
