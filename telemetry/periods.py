"""The one rule for a period a reader is asked for (a statement's, a usage series' range): the end after the
start, at most 400 days. A refused period raises PeriodError, a FieldError naming `start` or `end`, so an
API answers `{field: [message]}` and a page shows the message, as for any other bad input."""

from __future__ import annotations

from datetime import datetime, timedelta

from capacity.input_errors import FieldError

MAX_PERIOD = timedelta(days=400)


class PeriodError(FieldError):
    """A period refused: `field` is `start` or `end`."""


def check_period(start: datetime, end: datetime) -> None:
    if end <= start:
        raise PeriodError("end", "must be after start")
    if end - start > MAX_PERIOD:
        raise PeriodError("start", "a period covers at most 400 days")
