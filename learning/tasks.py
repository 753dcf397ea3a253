"""Thin, idempotent tasks: each takes a name and calls one service."""

import hashlib
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache

from registry.queueing import durable_task, task_send

from . import otel_ingest, services


@durable_task(soft_time_limit=240, time_limit=300)
def tool_refresh(self, tool_name: str) -> dict[str, Any]:
    result = services.tool_refresh(tool_name=tool_name)
    return {"tool": tool_name, "folded": result.folded, "ticket": result.ticket_id}


@durable_task(soft_time_limit=240, time_limit=300)
def tool_refresh_due(self, tool_name: str) -> dict[str, Any]:
    """The debounced refresh of one tool (see ``tool_refresh_soon``)."""
    # Cleared before the refresh reads: a fold committed from now on schedules the next one.
    cache.delete(_pending_key(tool_name))
    result = services.tool_refresh(tool_name=tool_name)
    return {"tool": tool_name, "folded": result.folded, "ticket": result.ticket_id}


def tool_refresh_soon(sender: Any = None, *, tool_names: list[str], **kwargs: Any) -> int:
    """Schedule a refresh of each tool in ``LEARNING_REFRESH_DEBOUNCE_SECONDS``, unless one is
    pending already: under steady ingest a tool is refreshed once per window, not per batch.
    Connected to ``tool_stats_changed``; return how many were scheduled.

    The pending mark expires a little after its window, so a message the broker lost delays the
    tool's next refresh by at most that (the hourly sweep still runs). A broker that refuses the
    message costs nothing more than that either: the traces are committed and the tool dirty.
    """
    countdown = settings.LEARNING_REFRESH_DEBOUNCE_SECONDS
    scheduled = 0
    for name in tool_names:
        key = _pending_key(name)
        if not cache.add(key, 1, timeout=countdown + 60):
            continue
        send = partial(tool_refresh_due.apply_async, (name,), countdown=countdown, retry=False)
        if not task_send(send, what=f"refresh of {name}"):
            cache.delete(key)
            continue
        scheduled += 1
    return scheduled


def _pending_key(tool_name: str) -> str:
    # Hashed: a tool name is up to 200 characters of any text, not a safe cache key.
    return "learning:refresh-due:" + hashlib.sha256(tool_name.encode()).hexdigest()[:32]


@durable_task(soft_time_limit=60, time_limit=90)
def refresh_contracts(self) -> int:
    """Fan out one refresh per tool with new traces (the periodic entry point)."""
    names = services.tools_with_new_traces()
    for name in names:
        tool_refresh.delay(name)
    return len(names)


@durable_task(soft_time_limit=1200, time_limit=1500)
def prune_traces(self) -> int:
    return services.traces_prune()


@durable_task(soft_time_limit=240, time_limit=300)
def otel_traces_assemble(self) -> int:
    """Assemble buffered OpenTelemetry traces that are ready (queued on completion, and
    periodically for traces whose root span never came)."""
    return otel_ingest.otel_traces_assemble()
