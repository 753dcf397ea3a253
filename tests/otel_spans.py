"""Build OTLP spans for tests (protobuf messages, as an SDK would send them), post them to
the receiver and read its answers."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from learning.fold import traces_fold_pending
from learning.otel_ingest import otel_traces_assemble
from learning.otel_replay import export_request

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
START = 1_793_000_000_000_000_000  # 2026-10-26, nanoseconds


def attribute(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if not isinstance(value, str):
        value = json.dumps(value)
    return KeyValue(key=key, value=AnyValue(string_value=value))


def span(
    number: int,
    *,
    parent: int | None = 0,
    trace: bytes = TRACE,
    start: int | None = None,
    duration_ms: int = 40,
    error: str | None = None,
    **attributes: Any,
) -> Span:
    """Span ``number`` of ``trace`` (a child of span 0 unless ``parent`` is None).

    Keyword arguments are attributes, with ``__`` for ``.``: ``gen_ai__tool__name="x"``.
    """
    begin = START + number * 1_000_000_000 if start is None else start
    return Span(
        trace_id=trace,
        span_id=(number + 1).to_bytes(8, "big"),
        parent_span_id=b"" if parent is None else (parent + 1).to_bytes(8, "big"),
        name=f"span {number}",
        start_time_unix_nano=begin,
        end_time_unix_nano=begin + duration_ms * 1_000_000,
        attributes=[attribute(key.replace("__", "."), value) for key, value in attributes.items()],
        status=Status(code=Status.STATUS_CODE_ERROR, message=error) if error else Status(),
    )


def tool_call(
    number: int, tool: str, *, args: Any = None, result: Any = None, **extra: Any
) -> Span:
    attributes: dict[str, Any] = {
        "gen_ai__operation__name": "execute_tool",
        "gen_ai__tool__name": tool,
        "gen_ai__tool__call__id": f"call_{number}",
    }
    if args is not None:
        attributes["gen_ai__tool__call__arguments"] = args
    if result is not None:
        attributes["gen_ai__tool__call__result"] = result
    return span(number, **attributes, **extra)


def agent(state: dict | None = None, *, trace: bytes = TRACE, **extra: Any) -> Span:
    """The root span of an agent run, optionally carrying the initial state."""
    attributes: dict[str, Any] = {"gen_ai__operation__name": "invoke_agent"}
    if state is not None:
        attributes["registry__state"] = state
    return span(0, parent=None, trace=trace, start=START, duration_ms=60_000, **attributes, **extra)


def request(*spans: Span) -> ExportTraceServiceRequest:
    return export_request(spans)


def body(*spans: Span) -> bytes:
    return request(*spans).SerializeToString()


def run():
    """An agent run: find an event, then read it."""
    return [
        agent({"event_query": "team sync"}),
        tool_call(1, "calendar.find_events", args={"event_query": "team sync"},
                  result={"eventId": "evt_9", "match_count": 3}),
        tool_call(2, "calendar.get_event", args={"event_id": "evt_9"},
                  result={"event_details": {"title": "Team sync"}}),
    ]  # fmt: skip


URL = "/api/v1/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"


def send(client, payload: bytes, *, content_type=PROTOBUF, **headers):
    """POST an OTLP payload to the receiver."""
    return client.generic("POST", URL, payload, content_type=content_type, **headers)


def answer(response) -> ExportTraceServiceResponse:
    """A successful answer, read."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    return ExportTraceServiceResponse.FromString(response.content)


def failure(response, status: int) -> status_pb2.Status:
    """A failed answer of that status, read as the google.rpc.Status it must be."""
    assert response.status_code == status, response.content
    if response["Content-Type"] == PROTOBUF:
        return status_pb2.Status.FromString(response.content)
    data = json.loads(response.content)
    return status_pb2.Status(code=data.get("code", 0), message=data.get("message", ""))


def assemble():
    """Assemble the ready traces, then the fold their commit queues (a test's transaction never
    commits); how many traces were assembled."""
    assembled = otel_traces_assemble(now=timezone.now() + timedelta(minutes=5))
    traces_fold_pending()
    return assembled
