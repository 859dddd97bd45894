"""How `GET pools/{slug}` shows a pool's alerts without entitlements importing telemetry (a layer above).

Telemetry keeps the alerts (telemetry.models.PoolAlert, from Alertmanager) and registers its reader
here when its app loads (telemetry.apps); until one is registered a pool has no alerts to show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Reader = Callable[[Any], list[dict[str, Any]]]
_readers: list[Reader] = []


def register(reader: Reader) -> None:
    if reader not in _readers:
        _readers.append(reader)


def alerts_for(pool: Any) -> list[dict[str, Any]]:
    return [a for reader in _readers for a in reader(pool)]
