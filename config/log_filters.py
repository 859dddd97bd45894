"""Logging filters.

A 429 from the admission API is a decision the gateway asked for, not a fault: logging each
one as a warning buries real errors under the simulator's throttles in `make run`.
"""

import logging


class DropThrottles(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # django.request and django.server both put the response status in `extra`.
        return getattr(record, "status_code", None) != 429
