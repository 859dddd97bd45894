"""A private redis-server for store-failure tests: started, stopped, killed and restarted on one port.

`aof=True` runs it as production does (CONTRACT §5: `--appendonly yes --appendfsync everysec`),
with its files in the test's own directory, so a restart finds what the last run wrote.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, workdir: Path, *, aof: bool = False) -> None:
        self.dir = workdir
        self.port = free_port()
        self.aof = aof
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def start(self) -> None:
        durability = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            ["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             *durability, "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(500):  # up to ~10 s on a busy machine; a hang guard, not a timing assertion
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

    def kill(self) -> None:
        """kill -9: whatever the AOF had not fsynced yet is lost."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None
