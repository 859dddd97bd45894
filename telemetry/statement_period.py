"""The one reader of a statement's period from a query string (issue 34.4): the API
(telemetry.statement_api) and the page and its CSV (portal.views.statement) used to parse it twice.

`start` / `end`: a date (midnight UTC, as the page's date inputs send) or an ISO 8601 timestamp with
a zone; either may be left out, and telemetry.statement.resolve_period fills it in and checks the
pair. A bad one raises PeriodError naming the field (`start`, `end`): the API answers 400 with it,
the page a 400 text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone

from telemetry.periods import PeriodError
from telemetry.statement import resolve_period
from telemetry.validation import FieldError, parse_ts

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def period_from_query(query: Mapping[str, str], *, now: datetime | None = None) -> tuple[datetime, datetime]:
    when: dict[str, datetime] = {}
    for name in ("start", "end"):
        raw = (query.get(name) or "").strip()
        if not raw:
            continue
        try:
            when[name] = parse_ts(f"{raw}T00:00:00+00:00" if _DATE.match(raw) else raw)
        except FieldError as exc:
            raise PeriodError(name, exc.message) from None
    return resolve_period(when.get("start"), when.get("end"), now or timezone.now())
