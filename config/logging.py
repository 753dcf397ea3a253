"""Logging helpers named by ``LOGGING`` in the settings."""

import logging


def request_line_below_400(record: logging.LogRecord) -> bool:
    """The development server's request line, for answers below 400 only: Django's
    ``django.request`` logger already reports every 4xx and 5xx (with the reason or the
    traceback), so an error is logged once, not twice."""
    return getattr(record, "status_code", 0) < 400
