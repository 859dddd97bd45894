import logging

from config.log_filters import DropThrottles


def _record(status):
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "msg", (), None)
    if status is not None:
        record.status_code = status
    return record


def test_a_throttle_is_not_logged_but_other_client_errors_are():
    keep = DropThrottles().filter
    assert keep(_record(429)) is False
    assert keep(_record(400)) is True
    assert keep(_record(500)) is True
    assert keep(_record(None)) is True


def test_the_console_handler_carries_the_filter(settings):
    assert "drop_throttles" in settings.LOGGING["handlers"]["console"]["filters"]
