"""The enforcement store behind one interface: `get_backend()` picks Redis or in-process from settings.

Settings read (declared in config/settings.py): ADMISSION_BACKEND ("redis" | "memory"),
ADMISSION_REDIS_URL (else REDIS_URL), ADMISSION_REDIS_TIMEOUT_S, ADMISSION_REDIS_MAX_CONNECTIONS
(per process), ADMISSION_KEY_PREFIX.
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

    kind = settings.ADMISSION_BACKEND
    if kind == "redis":
        from admission.backends.redis import RedisBackend

        url = settings.ADMISSION_REDIS_URL or settings.REDIS_URL
        if not url:
            raise RuntimeError("ADMISSION_BACKEND=redis needs REDIS_URL or ADMISSION_REDIS_URL")
        return RedisBackend(
            url,
            prefix=settings.ADMISSION_KEY_PREFIX,
            socket_timeout=settings.ADMISSION_REDIS_TIMEOUT_S,
            pool_size=settings.ADMISSION_REDIS_MAX_CONNECTIONS,
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
