"""Quarantine for work a pipeline gave up on: the unit goes to DeadLetter, the pipeline goes on.

Any pipeline may call `dead_letter` (the fold, the ingest task, admission's event sink). The payload
is stored as far as it can be: the poison that failed the unit (a NUL byte, a non-finite float,
a nesting too deep, a lone UTF-16 surrogate) must not also fail its own quarantine, so it is made
storable first (a NUL becomes the visible text `\\u0000`, a lone surrogate `\\ud800`: PostgreSQL's jsonb
refuses the real things, and a surrogate has no UTF-8 at all).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Count, F

from http_plumbing.api_guards import escape_unstorable
from telemetry.metrics import DEAD_LETTERS
from telemetry.models import DeadLetter

log = logging.getLogger(__name__)

MAX_DEPTH = 32
MAX_STRING = 10_000
MAX_PAYLOAD_CHARS = 1_000_000  # a whole rejected batch is kept, a runaway one is cut


def _text(s: str, limit: int = MAX_STRING) -> str:
    s = escape_unstorable(s)
    return s if len(s) <= limit else s[:limit] + "…"


def storable(value: Any, depth: int = 0) -> Any:
    """`value` as JSON both databases store: NUL-free strings, finite floats, bounded depth."""
    if depth > MAX_DEPTH:
        return "<nested deeper than 32 levels>"
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(str(k), 200): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [storable(v, depth + 1) for v in value]
    try:
        return json.loads(json.dumps(value, cls=DjangoJSONEncoder))  # datetimes, UUIDs, Decimals
    except (TypeError, ValueError):
        return _text(repr(value))


def dead_letter(*, stage: str, key: str, payload: Any, error: str) -> DeadLetter:
    """Quarantine one unit of work; the same (stage, key) again counts up `attempts`.

    Runs in its own savepoint, so a caller may quarantine from inside its transaction after
    rolling back the unit that failed.
    """
    body = storable(payload)
    if len(json.dumps(body)) > MAX_PAYLOAD_CHARS:
        body = {"truncated": _text(json.dumps(body), MAX_PAYLOAD_CHARS)}
    stage, key, error = _text(stage, 64), _text(key, 200), _text(error)
    with transaction.atomic():
        row, created = DeadLetter.objects.get_or_create(
            stage=stage, key=key, defaults={"payload": body, "error": error}
        )
        if not created:
            DeadLetter.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1, payload=body, error=error)
            row.refresh_from_db()
    # only once the row is written: a log line saying "dead-lettered" for a row that failed would lie
    log.warning("dead-lettered %s %s: %s", stage, key, error)
    DEAD_LETTERS.labels(stage).inc()
    return row


def quarantined_by_stage() -> dict[str, int]:
    """Dead letters per stage, for the operators' fleet page; one grouped query."""
    rows = DeadLetter.objects.values_list("stage").annotate(n=Count("pk")).order_by("stage")
    return dict(rows)
