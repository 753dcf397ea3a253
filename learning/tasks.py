"""Thin, idempotent tasks: each takes a name and calls one service."""

import hashlib
import time
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache

from config.cache import cache_add_many
from registry.queueing import durable_task, task_send

from . import fold, otel_ingest, partitions, services


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

    The pending marks of a fold's tools are set in one cache round trip (a pipeline on Redis);
    only the tools newly marked get a message. A mark expires a little after its window, so a
    message the broker lost delays the tool's next refresh by at most that (the hourly sweep
    still runs). A broker that refuses the message costs nothing more than that either: the
    traces are folded and the tool dirty.
    """
    countdown = settings.LEARNING_REFRESH_DEBOUNCE_SECONDS
    keys = {_pending_key(name): name for name in tool_names}
    scheduled = 0
    for key in cache_add_many(cache, list(keys), 1, timeout=countdown + 60):
        name = keys[key]
        send = partial(tool_refresh_due.apply_async, (name,), countdown=countdown, retry=False)
        if not task_send(send, what=f"refresh of {name}"):
            cache.delete(key)
            continue
        scheduled += 1
    return scheduled


# A fold task stops taking batches after this long and queues its successor, so its time
# limits hold however large the backlog; each batch is one transaction (fold.FOLD_BATCH).
FOLD_TASK_SECONDS = 120


@durable_task(soft_time_limit=240, time_limit=300)
def traces_fold(self) -> int:
    """Fold the traces ingest stored (queued when they commit; the hourly sweep too), batch
    after batch, until none is left or ``FOLD_TASK_SECONDS`` have passed."""
    deadline = time.monotonic() + FOLD_TASK_SECONDS
    folded = 0
    while count := fold.traces_fold().total:
        folded += count
        if time.monotonic() > deadline:
            traces_fold_soon()
            break
    return folded


def traces_fold_soon(sender: Any = None, **kwargs: Any) -> None:
    """Queue a fold. Connected to ``traces_stored``. The traces are committed already: a
    broker that refuses the message delays their fold until the next one, or the hourly
    sweep (``refresh_contracts``)."""
    task_send(partial(traces_fold.apply_async, retry=False), what="fold")


def _pending_key(tool_name: str) -> str:
    # Hashed: a tool name is up to 200 characters of any text, not a safe cache key.
    return "learning:refresh-due:" + hashlib.sha256(tool_name.encode()).hexdigest()[:32]


@durable_task(soft_time_limit=60, time_limit=90)
def refresh_contracts(self) -> int:
    """Fan out one refresh per tool with new traces (the periodic entry point), and a fold of
    any trace whose fold was never queued."""
    traces_fold_soon()
    names = services.tools_with_new_traces()
    for name in names:
        tool_refresh.delay(name)
    return len(names)


@durable_task(soft_time_limit=1200, time_limit=1500)
def prune_traces(self) -> int:
    return services.traces_prune()


@durable_task(soft_time_limit=120, time_limit=180)
def trace_partitions_ensure(self) -> list[str]:
    """Create the trace table's partitions of today and the next days, where missing
    (PostgreSQL; nothing elsewhere). Hourly: a missed run costs nothing, the days are ahead."""
    if not partitions.partitioned():
        return []
    return partitions.trace_partitions_ensure()


@durable_task(soft_time_limit=240, time_limit=300)
def otel_traces_assemble(self) -> int:
    """Assemble buffered OpenTelemetry traces that are ready (queued on completion, and
    periodically for traces whose root span never came)."""
    return otel_ingest.otel_traces_assemble()
