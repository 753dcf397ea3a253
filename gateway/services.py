"""The gateway's writes: its calls as traces and refusals, its sessions, and changed pins.

Calls are written in batches off their path (``gateway/recording.py`` calls ``calls_record``):
forwarded calls through ``learning.ingest.traces_ingest``, the one way traces are stored, so
learning treats them like any other; refusals as ``Refusal`` rows under the same trace id and
step. Session state lives in the cache (Redis when configured), so every gateway process serves
every session.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from learning.ingest import traces_ingest
from registry.models import Application
from registry.queueing import task_send
from reviews.models import ReviewTicket
from sources.models import DeclaredTool
from sources.tasks import mcp_server_sync

from .limits import WINDOW_SECONDS
from .models import Refusal
from .sessions import SESSION_CALLS_KEPT, SESSION_SECONDS, Begun, SessionState, rate_key

logger = logging.getLogger(__name__)

REFUSED = "refused"


@dataclass
class CallRecord:
    """One call as the gateway saw it; ``status`` is success, error or refused."""

    application_id: int
    trace_id: str
    step: int
    tool: str
    args: dict[str, Any]
    status: str
    occurred_at: str
    duration_ms: int = 0
    output: Any = None
    error: str = ""
    rule: str = ""
    field: str = ""
    output_bytes: int = 0  # the size of the upstream's answer


def session_begin(session_id: str, *, counter: str = "", window: int = 0) -> Begun:
    """A call of the session starts: its step number (0, 1, 2... across every gateway process)
    and what the session's earlier calls left, read together so a call waits for the cache
    once; with a ``counter`` (an application), the call is counted in its minute ``window``
    (``gateway/limits.py``), as ``RedisSessions.begin`` does."""
    begun = Begun(step=session_step(session_id), state=session_state(session_id))
    if counter:
        key = rate_key(counter, window)
        try:
            begun.calls_this_minute = int(cache.incr(key))
        except ValueError:  # the minute's first call
            begun.calls_this_minute = (
                1 if cache.add(key, 1, 2 * WINDOW_SECONDS) else int(cache.incr(key))
            )
        begun.calls_last_minute = int(cache.get(rate_key(counter, window - 1)) or 0)
    return begun


def session_step(session_id: str) -> int:
    """The next step number of the session: 0, 1, 2... across every gateway process."""
    key = f"gateway:step:{session_id}"
    try:
        # A session's first call adds the counter; every later one (most calls) only counts.
        return int(cache.incr(key))
    except ValueError:  # no counter yet, or it expired
        if cache.add(key, 0, SESSION_SECONDS):
            return 0
        return int(cache.incr(key))


def session_state(session_id: str) -> SessionState:
    stored = cache.get(f"gateway:state:{session_id}")
    if not isinstance(stored, dict):
        return SessionState()
    return SessionState(calls=stored.get("calls", []), produced=stored.get("produced", []))


def session_call_add(
    session_id: str, *, tool: str, args: dict[str, Any], produces: Sequence[str]
) -> None:
    """Remember a forwarded, successful call. Two calls of one session finishing at the same
    moment may each keep only their own: plan invariants then judge one call fewer."""
    state = session_state(session_id)
    state.calls = [*state.calls, {"tool": tool, "args": args}][-SESSION_CALLS_KEPT:]
    state.produced = sorted(set(state.produced) | set(produces))
    cache.set(
        f"gateway:state:{session_id}",
        {"calls": state.calls, "produced": state.produced},
        SESSION_SECONDS,
    )


def upstream_changed(*, server_id: int, tool_name: str) -> int | None:
    """A tool's server declares another definition than the approved one: queue a sync of the
    server (at most once per verification period), which opens or updates the change ticket,
    and return that ticket's number when one is open."""
    if cache.add(f"gateway:sync-queued:{server_id}", 1, settings.MCP_GATEWAY_VERIFY_SECONDS):
        # A broker outage must not turn a refusal into a failure.
        task_send(partial(mcp_server_sync.delay, server_id), what=f"sync of MCP server {server_id}")
    declared = (
        DeclaredTool.objects.filter(tool__name=tool_name, ticket__status=ReviewTicket.Status.OPEN)
        .values_list("ticket_id", flat=True)
        .first()
    )
    return declared


def calls_record(records: Sequence[CallRecord]) -> tuple[int, int]:
    """Store a batch of calls: forwarded ones as traces of their application, refused ones as
    refusals. Returns (traces stored, refusals stored)."""
    traces: dict[int, list[dict[str, Any]]] = {}
    refusals: list[Refusal] = []
    for record in records:
        if record.status == REFUSED:
            refusals.append(
                Refusal(
                    application_id=record.application_id,
                    trace_id=record.trace_id,
                    step=record.step,
                    tool=record.tool,
                    rule=record.rule[:64],
                    field=record.field[:200],
                    message=record.error,
                    args=record.args,
                    occurred_at=parse_datetime(record.occurred_at) or timezone.now(),
                )
            )
            continue
        traces.setdefault(record.application_id, []).append(
            {
                "trace_id": record.trace_id,
                "step": record.step,
                "tool": record.tool,
                "args": record.args,
                "status": record.status,
                "output": record.output,
                "error": record.error or None,
                "duration_ms": record.duration_ms,
                "occurred_at": record.occurred_at,
            }
        )
    stored = 0
    applications = Application.objects.in_bulk(list(traces))
    for application_id, items in traces.items():
        application = applications.get(application_id)
        if application is None:
            continue  # deleted while its calls waited
        result = traces_ingest(items=enumerate(items), application=application)
        stored += result.accepted
        if result.rejected:
            logger.warning("gateway traces refused by ingest: %s", result.rejected[:5])
    if refusals:
        Refusal.objects.bulk_create(refusals, ignore_conflicts=True)
    return stored, len(refusals)
