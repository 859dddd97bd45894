"""A private redis-server: started, stopped, killed and restarted on one port.

`aof=True` runs it as production does (docs/contract.md §5: `--appendonly yes --appendfsync everysec`),
with its files in the test's own directory, so a restart finds what the last run wrote; `fsync="always"`
makes every write durable before Redis answers it (a kill then loses nothing Redis acknowledged).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from tests.servers import free_port, on_pytest_death, unavailable


def redis_server_binary() -> str:
    """redis-server on PATH (Debian's is /usr/bin/redis-server); skips, or under CI=true fails, without it."""
    found = shutil.which("redis-server")
    if found is None:
        unavailable("redis-server is not installed (apt-get install redis-server), and REDIS_URL is not set")
    return found


class RedisServer:
    def __init__(self, workdir: Path, *, aof: bool = False, fsync: str = "everysec") -> None:
        self.dir, self.fsync = workdir, fsync
        self.binary = redis_server_binary()
        self.port = free_port()
        self.aof = aof
        self.proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def start(self) -> None:
        durability = ["--appendonly", "yes", "--appendfsync", self.fsync] if self.aof else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *durability,
             "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if self._watchdog is None:  # ends the server (on this port, whichever run of it) if pytest dies
            self._watchdog = on_pytest_death("redis-cli", "-p", str(self.port), "shutdown", "nosave")
        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(500):  # up to ~10 s on a busy machine; a hang guard, not a timing assertion
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode} on port {self.port}")
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """Graceful: SIGTERM, which makes Redis fsync its AOF before it exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        self.proc = None
        if self._watchdog is not None:
            self._watchdog.terminate()
            self._watchdog.wait()
            self._watchdog = None

    def kill(self) -> None:
        """kill -9: whatever the AOF had not fsynced yet is lost."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None
