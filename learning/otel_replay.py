"""Native traces rendered as the OpenTelemetry GenAI spans a runtime would emit (pure).

The inverse of ``learning.otel.trace_assemble``, for benchmarks and tests that feed the same
calls through both doors: each native trace id becomes one OpenTelemetry trace with an
``invoke_agent`` root span carrying the first call's state in ``registry.state``, and each call
an ``execute_tool`` child span with its arguments and result as JSON. A call's result is its
``output`` when the trace has one, else the variables it added to the state. Failed calls get
the span status ERROR and an ``error.type``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from .otel import (
    ARGUMENTS,
    CALL_ID,
    ERROR_TYPE,
    EXECUTE_TOOL,
    OPERATION,
    RESULT,
    STATE,
    STATE_AFTER,
    STATE_BEFORE,
    TOOL_NAME,
)


def spans_from_traces(
    traces: Iterable[dict[str, Any]],
    *,
    aliases: dict[str, str] | None = None,
    explicit_state: bool = False,
    start: datetime | None = None,
) -> list[Span]:
    """Spans of the given native traces (grouped by trace id, ordered by step).

    ``aliases`` resolves state names before a result is worked out as "what the call added";
    with ``explicit_state`` every tool span also carries ``registry.state_before/after``. A
    trace without ``occurred_at`` starts at ``start`` (default: an hour ago) plus a second per
    step.
    """
    aliases = aliases or {}
    base = _ns((start or datetime.now(UTC) - timedelta(hours=1)).isoformat())
    runs: dict[str, list[dict[str, Any]]] = {}
    for trace in traces:
        runs.setdefault(trace["trace_id"], []).append(trace)
    spans: list[Span] = []
    for trace_id, steps in runs.items():
        steps.sort(key=lambda step: step["step"])
        otel_trace = _id(trace_id, 16)
        root_id = _id(f"{trace_id}/root", 8)
        starts = [
            _ns(step["occurred_at"]) if step.get("occurred_at") else base + index * 1_000_000_000
            for index, step in enumerate(steps)
        ]
        ends = [
            begin + round(step.get("duration_ms") or 0) * 1_000_000
            for begin, step in zip(starts, steps, strict=True)
        ]
        spans.append(
            Span(
                trace_id=otel_trace,
                span_id=root_id,
                name="invoke_agent",
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=min(starts) - 1_000_000,
                end_time_unix_nano=max(ends) + 1_000_000,
                attributes=_attributes(
                    {OPERATION: "invoke_agent", STATE: json.dumps(steps[0]["state_before"])}
                ),
            )
        )
        for step, begin, end in zip(steps, starts, ends, strict=True):
            attributes: dict[str, Any] = {
                OPERATION: EXECUTE_TOOL,
                TOOL_NAME: step["tool"],
                CALL_ID: f"call_{step['step']}",
                ARGUMENTS: json.dumps(step.get("args", {})),
            }
            result = step.get("output")
            if result is None and step["status"] == "success":
                before = {aliases.get(k, k): v for k, v in step["state_before"].items()}
                after = {aliases.get(k, k): v for k, v in step["state_after"].items()}
                result = {k: v for k, v in after.items() if k not in before or before[k] != v}
            if result is not None:
                attributes[RESULT] = json.dumps(result)
            status = Status()
            if step["status"] == "error":
                message = step.get("error") or "error"
                attributes[ERROR_TYPE] = message.split(":", 1)[0]
                status = Status(code=Status.STATUS_CODE_ERROR, message=message)
            if explicit_state:
                attributes[STATE_BEFORE] = json.dumps(step["state_before"])
                attributes[STATE_AFTER] = json.dumps(step["state_after"])
            spans.append(
                Span(
                    trace_id=otel_trace,
                    span_id=_id(f"{trace_id}/{step['step']}", 8),
                    parent_span_id=root_id,
                    name=f"execute_tool {step['tool']}",
                    kind=Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=begin,
                    end_time_unix_nano=end,
                    attributes=_attributes(attributes),
                    status=status,
                )
            )
    return spans


def export_request(spans: Iterable[Span], *, service: str = "agent") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=_attributes({"service.name": service})),
                scope_spans=[
                    ScopeSpans(scope=InstrumentationScope(name="replay"), spans=list(spans))
                ],
            )
        ]
    )


def request_as_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping with trace and span ids in hex."""
    data = json_format.MessageToDict(request)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return data


def otel_trace_id(trace_id: str) -> str:
    """The OpenTelemetry trace id (hex) a native trace id is replayed under."""
    return _id(trace_id, 16).hex()


def _id(text: str, size: int) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:size]


def _ns(moment: str) -> int:
    parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    whole = int(parsed.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + parsed.microsecond * 1000


def _attributes(values: dict[str, Any]) -> list[KeyValue]:
    return [
        KeyValue(key=key, value=AnyValue(string_value=str(value))) for key, value in values.items()
    ]
