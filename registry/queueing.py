"""Celery tasks: the options every task shares, and sending one without trusting the broker.

A task is acknowledged after it ran and retried with backoff while the database is away
(``durable_task``). A message is sent once the writes it speaks of are committed, and a broker
that refuses it costs a warning in the log, never the commit nor the request
(``task_send``, ``task_send_on_commit``): every caller has a way to catch up (a periodic run,
a pending row, the next change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

logger = logging.getLogger(__name__)

# The errors of a database that is away for a moment: a task retries on these, and no other.
TRANSIENT: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def durable_task(*, soft_time_limit: int, time_limit: int, **options: Any) -> Any:
    """``shared_task`` acknowledged after it ran, retried with backoff on ``TRANSIENT`` errors
    (at most 5 times); ``options`` add to or override these."""
    return shared_task(
        **{
            "bind": True,
            "acks_late": True,
            "autoretry_for": TRANSIENT,
            "retry_backoff": True,
            "max_retries": 5,
            "soft_time_limit": soft_time_limit,
            "time_limit": time_limit,
            **options,
        }
    )


def task_send(send: Callable[[], object], *, what: str) -> bool:
    """Call ``send`` (a task's ``apply_async``, bound with ``functools.partial``) now; a broker
    that refuses is logged as ``"<what> not queued: <error>"``. True when it was sent."""
    try:
        send()
    except Exception as exc:  # the broker's errors vary by transport; the caller's work stands
        logger.warning("%s not queued: %s: %s", what, type(exc).__name__, exc)
        return False
    return True


def task_send_on_commit(send: Callable[[], object], *, what: str) -> None:
    """``task_send`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(partial(task_send, send, what=what))
