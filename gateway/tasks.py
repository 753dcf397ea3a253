"""Thin tasks: the gateway's calls, stored by the worker."""

from typing import Any

from learning.tasks import durable_task

from . import services


@durable_task(soft_time_limit=240, time_limit=300)
def gateway_calls_record(self, records: list[dict[str, Any]]) -> dict[str, int]:
    # Idempotent: a trace is unique on (trace_id, step) and so is a refusal, so a retried or
    # duplicated batch stores nothing twice.
    traces, refusals = services.calls_record([services.CallRecord(**r) for r in records])
    return {"traces": traces, "refusals": refusals}
