"""The enforcement store behind one interface: `get_backend()` picks Redis or in-process from settings.

Settings read (all optional): ADMISSION_BACKEND ("redis" | "memory"), ADMISSION_REDIS_URL (else
REDIS_URL), ADMISSION_REDIS_TIMEOUT_S (default redis.DEFAULT_TIMEOUT_S, measured: see there),
ADMISSION_REDIS_MAX_CONNECTIONS (per process, default 64), ADMISSION_KEY_PREFIX (default "adm:").
"""

from __future__ import annotations

import threading
from typing import Any

from admission.backends.base import StoreUnavailable

__all__ = ["StoreUnavailable", "get_backend", "set_backend", "build_backend"]

_lock = threading.Lock()
_backend: Any = None


def build_backend() -> Any:
    # Imported here, not at the top: the backends themselves run without Django (admission.library).
    from django.conf import settings

    kind = getattr(settings, "ADMISSION_BACKEND", "memory")
    if kind == "redis":
        from admission.backends.redis import DEFAULT_TIMEOUT_S, POOL_SIZE, RedisBackend

        url = getattr(settings, "ADMISSION_REDIS_URL", "") or getattr(settings, "REDIS_URL", "")
        if not url:
            raise RuntimeError("ADMISSION_BACKEND=redis needs REDIS_URL or ADMISSION_REDIS_URL")
        return RedisBackend(
            url,
            prefix=getattr(settings, "ADMISSION_KEY_PREFIX", "adm:"),
            socket_timeout=float(getattr(settings, "ADMISSION_REDIS_TIMEOUT_S", DEFAULT_TIMEOUT_S)),
            pool_size=int(getattr(settings, "ADMISSION_REDIS_MAX_CONNECTIONS", POOL_SIZE)),
        )
    from admission.backends.memory import MemoryBackend

    return MemoryBackend()


def get_backend() -> Any:
    global _backend
    if _backend is None:
        with _lock:
            if _backend is None:
                _backend = build_backend()
    return _backend


def set_backend(backend: Any) -> Any:
    """Swap the process-wide backend (tests, the bench); returns the previous one."""
    global _backend
    with _lock:
        prev, _backend = _backend, backend
    return prev
