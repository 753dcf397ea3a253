"""Thin, idempotent tasks: each takes a name and calls one service."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import otel_ingest, services

TRANSIENT = (OperationalError, InterfaceError)


def durable_task(*, soft_time_limit: int, time_limit: int):
    """A task acknowledged after it ran, retried with backoff when the database is away."""
    return shared_task(
        bind=True,
        acks_late=True,
        autoretry_for=TRANSIENT,
        retry_backoff=True,
        max_retries=5,
        soft_time_limit=soft_time_limit,
        time_limit=time_limit,
    )


@durable_task(soft_time_limit=240, time_limit=300)
def tool_refresh(self, tool_name: str) -> dict:
    result = services.tool_refresh(tool_name=tool_name)
    return {"tool": tool_name, "folded": result.folded, "ticket": result.ticket_id}


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
