"""OpenTelemetry GenAI spans to traces (pure: no Django; protobuf types from opentelemetry-proto).

Two steps, both pure so they can be tested and benchmarked alone:

- ``spans_decode`` reads an OTLP ``ExportTraceServiceRequest`` (protobuf bytes, or OTLP/JSON
  already parsed into Python values) into small span records: only tool-call spans and the
  spans that carry the initial state are kept, every other span is counted as ignored, and a
  span that cannot be used is rejected with its reason. Only the attributes named in
  ``READ_ATTRIBUTES`` are ever converted, so a span's other attributes cost nothing.
- ``trace_assemble`` turns the records of one OpenTelemetry trace into the registry's trace
  format (``learning.traces``): tool calls ordered by start time (then span id) become steps
  0, 1, ...; the state is reconstructed from the data flow.

Which spans are tool calls, and where their tool, call id, arguments and result are: the
conventions in ``CONVENTIONS`` (GenAI ``execute_tool``, MCP ``tools/call``, OpenInference
``TOOL``, Traceloop/OpenLLMetry ``tool``), tried in that order; docs/api.md tabulates them. A
tool-call span whose parent is a tool-call span of the same tool (a framework's
``execute_tool`` span around its MCP client span) is the same call: only the outer one becomes a
step. A tool-call span carrying neither arguments nor result (content capture off, the GenAI
instrumentations' default) is ``captured: False``: counted, never learnt from.

State: the state before a trace's first call is the JSON object in ``registry.state`` on its
root span, else on its earliest span carrying it (an agent span); else empty. After each
successful call the result's top-level fields whose names the vocabulary knows (names or
aliases) are added under their canonical names. ``registry.state_before`` /
``registry.state_after`` on a tool span replace this for that call. Ingest then finds the data
flow in the values (``learning.dataflow``), as for every trace: results at any depth, and the
user's messages of the trace's chat spans (``gen_ai.input.messages``), which each step carries
as the messages that came since the step before it.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from registry.jsonlimits import deeper_than
from registry.validation import unstorable_text

from .dataflow import user_texts
from .traces import FUTURE_SLACK

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
CALL_ID = "gen_ai.tool.call.id"
ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
MCP_METHOD = "mcp.method.name"
MCP_REQUEST_ID = "jsonrpc.request.id"
OPENINFERENCE_KIND = "openinference.span.kind"
TRACELOOP_KIND = "traceloop.span.kind"
STATE = "registry.state"
INPUT_MESSAGES = "gen_ai.input.messages"  # a chat span's conversation: the user's words are read
USER_TEXTS = "user_texts"  # what a conversation span keeps of it
STATE_BEFORE = "registry.state_before"
STATE_AFTER = "registry.state_after"
EXECUTE_TOOL = "execute_tool"
TOOLS_CALL = "tools/call"


@dataclass(frozen=True)
class Convention:
    """Where one instrumentation convention puts a tool call: the attribute (and value) that
    marks the span, and the attributes holding the tool's name, call id, arguments and result."""

    name: str
    marker: str
    marker_value: str
    tool: str
    call_id: str
    arguments: str
    result: str
    # Traceloop's decorators record ``{"args": [...], "kwargs": {...}}``: the named ones are read.
    keyword_arguments: bool = False


CONVENTIONS = (
    Convention("OpenTelemetry GenAI", OPERATION, EXECUTE_TOOL, TOOL_NAME, CALL_ID, ARGUMENTS,
               RESULT),
    Convention("MCP", MCP_METHOD, TOOLS_CALL, TOOL_NAME, MCP_REQUEST_ID, ARGUMENTS, RESULT),
    Convention("OpenInference", OPENINFERENCE_KIND, "TOOL", "tool.name", "tool.id",
               "input.value", "output.value"),
    Convention("Traceloop/OpenLLMetry", TRACELOOP_KIND, "tool", "traceloop.entity.name",
               "traceloop.entity.id", "traceloop.entity.input", "traceloop.entity.output",
               keyword_arguments=True),
)  # fmt: skip
# What the sender sets to send a tool call's arguments and result, for each convention.
CONTENT_CAPTURE = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (OpenTelemetry GenAI "
    "instrumentations), TRACELOOP_TRACE_CONTENT=true (Traceloop/OpenLLMetry), "
    "OPENINFERENCE_HIDE_INPUTS and OPENINFERENCE_HIDE_OUTPUTS unset (OpenInference)"
)
MARKERS = frozenset(convention.marker for convention in CONVENTIONS)
READ_ATTRIBUTES = frozenset(
    {ERROR_TYPE, STATE, STATE_BEFORE, STATE_AFTER, INPUT_MESSAGES}
    | {name for c in CONVENTIONS for name in (c.marker, c.tool, c.call_id, c.arguments, c.result)}
)
STATE_ATTRIBUTES = (STATE, STATE_BEFORE, STATE_AFTER)
MAX_NAME_LENGTH = 200  # learning.traces.MAX_ID_LENGTH: a tool name the trace format stores
# One attribute the registry reads, in bytes (its string, or its structured value encoded):
# arguments and results of a tool call are small; a larger one is refused, not truncated,
# because a truncated JSON document would silently lose every field.
MAX_ATTRIBUTE_BYTES = 64 * 1024
# Nesting of one JSON attribute, as deep as protobuf reads a structured one: deeper values are
# refused here, so no later step (storing, encoding, walking) meets a value it cannot recurse.
MAX_JSON_DEPTH = 100
# A chat span's conversation grows with every turn: read up to this many bytes, of which the
# user's messages are kept up to MAX_ATTRIBUTE_BYTES characters.
MAX_MESSAGES_BYTES = 1024 * 1024
MAX_REASONS = 20  # distinct rejection reasons kept for the answer
MAX_USER_CHARACTERS = 4 * MAX_ATTRIBUTE_BYTES  # of a trace's user messages handed to its steps
SPAN_OVERHEAD = 200  # bytes a buffered span costs besides its attributes (ids, times, keys)


class SpanRecord(TypedDict):
    """What the registry keeps of one span (JSON-storable)."""

    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_span_id: str  # "" for a root span
    name: str
    start_ns: int
    end_ns: int
    error: str | None  # None: the call succeeded
    tool: str | None  # the tool's name when this span is a tool call
    attributes: dict[str, Any]  # call id, arguments, result and states, JSON ones parsed
    bytes: int  # what the kept attributes weigh as sent: buffer caps and assembly chunks count it
    captured: bool  # a tool call that carries its arguments or result (content capture on)


@dataclass
class DecodedBatch:
    spans: list[SpanRecord] = field(default_factory=list)
    roots: set[str] = field(default_factory=set)  # trace ids whose root span arrived
    ignored: int = 0
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # reason -> spans
    ignored_reasons: dict[str, int] = field(default_factory=dict)  # why spans were ignored
    uncaptured: int = 0  # tool calls without arguments or result

    def ignore(self, reason: str) -> None:
        self.ignored += 1
        if reason in self.ignored_reasons or len(self.ignored_reasons) < MAX_REASONS:
            self.ignored_reasons[reason] = self.ignored_reasons.get(reason, 0) + 1

    def reject(self, reason: str, count: int = 1) -> None:
        self.rejected += count
        if reason in self.reasons or len(self.reasons) < MAX_REASONS:
            self.reasons[reason] = self.reasons.get(reason, 0) + count

    def message(self) -> str:
        """The partial-success error message: each reason once, with its count."""
        return "; ".join(
            f"{reason} ({count} span{'s' if count != 1 else ''})"
            for reason, count in self.reasons.items()
        )


class MalformedRequest(ValueError):
    """The request is not an OTLP ExportTraceServiceRequest: answered 400, nothing kept."""


# --------------------------------------------------------------------------------- decoding
def request_from_protobuf(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError) as exc:
        raise MalformedRequest(
            f"The body is not an OTLP ExportTraceServiceRequest: {exc}"
        ) from None
    return request


def request_from_json(data: Any) -> ExportTraceServiceRequest:
    """OTLP/JSON: protobuf's JSON mapping, except that trace and span ids are hex strings.

    The ids are turned into the mapping's base64 in place, then protobuf's own parser checks
    every field's name and type (lowerCamelCase or the proto names, int64 as string or number,
    enums as integers).
    """
    if not isinstance(data, dict):
        raise MalformedRequest("The body must be a JSON object (an ExportTraceServiceRequest).")
    try:
        for resource_spans in _list(data, "resourceSpans", "resource_spans"):
            for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
                for index, span in enumerate(_list(scope_spans, "spans", "spans")):
                    _hex_ids(span, f"span {index}")
                    for link in _list(span, "links", "links"):
                        _hex_ids(link, f"a link of span {index}")
        return json_format.ParseDict(data, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise MalformedRequest(
            f"The body is not an OTLP/JSON ExportTraceServiceRequest: {exc}"
        ) from None
    except RecursionError:
        raise MalformedRequest("The body is nested too deeply.") from None


ID_FIELDS = (
    ("traceId", "trace_id", 16), ("spanId", "span_id", 8), ("parentSpanId", "parent_span_id", 8)
)  # fmt: skip


def _list(container: Any, camel: str, snake: str) -> list[Any]:
    if not isinstance(container, dict):
        return []
    value = container.get(camel, container.get(snake, []))
    return value if isinstance(value, list) else []


def _hex_ids(span: Any, where: str) -> None:
    if not isinstance(span, dict):
        return
    for camel, snake, size in ID_FIELDS:
        for key in (camel, snake):
            value = span.get(key)
            if value is None or value == "":
                continue
            try:
                raw = bytes.fromhex(value) if isinstance(value, str) else None
            except ValueError:
                raw = None
            if raw is None or len(raw) != size:
                raise MalformedRequest(
                    f"{where}: {camel} must be {size * 2} hexadecimal digits (OTLP/JSON)"
                )
            span[key] = base64.b64encode(raw).decode()


def spans_decode(
    request: ExportTraceServiceRequest, *, max_spans: int, now: datetime | None = None
) -> DecodedBatch:
    """Keep the tool-call and state spans of a request; count the others; reject the unusable.

    Spans past ``max_spans`` in one request are rejected without being read.
    """
    latest_ns = int(((now or datetime.now(UTC)) + FUTURE_SLACK).timestamp()) * 1_000_000_000
    batch = DecodedBatch()
    seen = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                seen += 1
                if seen > max_spans:
                    batch.reject(f"a request holds at most {max_spans} spans")
                    continue
                _decode_one(span, batch, latest_ns)
    return batch


def _decode_one(span: Span, batch: DecodedBatch, latest_ns: int) -> None:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        batch.reject("traceId must be 16 bytes, not all zero")
        return
    if len(span.span_id) != 8 or not any(span.span_id):
        batch.reject("spanId must be 8 bytes, not all zero")
        return
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    parent = span.parent_span_id.hex() if any(span.parent_span_id) else ""
    if not parent:
        batch.roots.add(trace_id)
    values: dict[str, AnyValue] = {}
    for pair in span.attributes:
        if pair.key in READ_ATTRIBUTES:
            values[pair.key] = pair.value
    convention = _convention(values)
    if convention is None and INPUT_MESSAGES in values:
        texts = _conversation(values[INPUT_MESSAGES])
        if texts and STATE not in values:
            _keep_conversation(span, trace_id, span_id, parent, texts, batch, latest_ns)
            return
    if convention is None and STATE not in values:
        batch.ignore(_ignored_reason(values))
        return
    # The attributes kept, under the GenAI names whatever the convention.
    wanted: dict[str, str] = {STATE: STATE, STATE_BEFORE: STATE_BEFORE, STATE_AFTER: STATE_AFTER}
    if convention is not None:
        wanted |= {convention.tool: TOOL_NAME, convention.call_id: CALL_ID,
                   convention.arguments: ARGUMENTS, convention.result: RESULT,
                   ERROR_TYPE: ERROR_TYPE}  # fmt: skip
    attributes: dict[str, Any] = {}
    size = SPAN_OVERHEAD
    for key, kept in wanted.items():
        value = values.get(key)
        if value is None or value.WhichOneof("value") is None:
            continue
        weight = value.ByteSize()
        if weight > MAX_ATTRIBUTE_BYTES:
            batch.reject(f"attribute {key} is larger than {MAX_ATTRIBUTE_BYTES} bytes")
            return
        size += weight
        attributes[kept] = _python(value)
    tool: str | None = None
    if convention is not None:
        tool = attributes.pop(TOOL_NAME, None)
        if not isinstance(tool, str) or not tool.strip():
            batch.reject(f"a tool-call span needs {convention.tool}")
            return
        if len(tool) > MAX_NAME_LENGTH:
            batch.reject(f"{convention.tool} is longer than {MAX_NAME_LENGTH} characters")
            return
    for key in (ARGUMENTS, RESULT, *STATE_ATTRIBUTES):
        if key in attributes:
            parsed, problem = _json_value(attributes[key])
            if problem is None and deeper_than(parsed, MAX_JSON_DEPTH) is not None:
                problem = f"is nested deeper than {MAX_JSON_DEPTH} levels"
            if problem and (key in STATE_ATTRIBUTES or problem != NOT_JSON):
                batch.reject(f"{_sent_name(key, convention)} {problem}")
                return
            attributes[key] = parsed
    for key in STATE_ATTRIBUTES:
        if key in attributes and not isinstance(attributes[key], dict):
            batch.reject(f"{key} must be a JSON object mapping variable names to values")
            return
    if convention is not None and convention.keyword_arguments:
        arguments = attributes.get(ARGUMENTS)
        if isinstance(arguments, dict) and set(arguments) <= {"args", "kwargs"}:
            attributes[ARGUMENTS] = arguments.get("kwargs") or {}
    if span.start_time_unix_nano == 0 or span.end_time_unix_nano < span.start_time_unix_nano:
        batch.reject("a span needs a start time, and an end time not before it")
        return
    if span.start_time_unix_nano > latest_ns:
        batch.reject("a span may not start more than a day from now")
        return
    captured = convention is None or ARGUMENTS in attributes or RESULT in attributes
    record: SpanRecord = {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": span.name[:MAX_NAME_LENGTH],
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "error": (
            _error(span.status, attributes.get(ERROR_TYPE)) if convention is not None else None
        ),
        "tool": tool,
        "attributes": {key: attributes[key] for key in attributes if key in _KEPT},
        "bytes": size,
        "captured": captured,
    }
    problem = unstorable_text(record)
    if problem:
        batch.reject(f"a value cannot be stored: {problem}")
        return
    if not captured:
        batch.uncaptured += 1
    batch.spans.append(record)


def _conversation(value: AnyValue) -> list[str]:
    """The user's messages of a chat span's ``gen_ai.input.messages`` (JSON text or a structured
    value), at most ``MAX_ATTRIBUTE_BYTES`` characters of them; none when it cannot be read."""
    if value.ByteSize() > MAX_MESSAGES_BYTES:
        return []
    parsed, problem = _json_value(_python(value))
    if problem or deeper_than(parsed, MAX_JSON_DEPTH) is not None:
        return []
    kept: list[str] = []
    room = MAX_ATTRIBUTE_BYTES
    for text in user_texts(parsed):
        if len(text) > room:
            break
        room -= len(text)
        kept.append(text)
    return kept


def _keep_conversation(
    span: Span,
    trace_id: str,
    span_id: str,
    parent: str,
    texts: list[str],
    batch: DecodedBatch,
    latest_ns: int,
) -> None:
    """Keep a chat span for its user messages: data flow reads them (``learning.dataflow``)."""
    if span.start_time_unix_nano == 0 or span.start_time_unix_nano > latest_ns:
        batch.ignore("a chat span without a usable start time")
        return
    record: SpanRecord = {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": span.name[:MAX_NAME_LENGTH],
        "start_ns": span.start_time_unix_nano,
        "end_ns": max(span.end_time_unix_nano, span.start_time_unix_nano),
        "error": None,
        "tool": None,
        "attributes": {USER_TEXTS: texts},
        "bytes": SPAN_OVERHEAD + sum(len(text) for text in texts),
        "captured": True,
    }
    problem = unstorable_text(record)
    if problem:
        batch.reject(f"a value cannot be stored: {problem}")
        return
    batch.spans.append(record)


_KEPT = frozenset({CALL_ID, ARGUMENTS, RESULT, STATE, STATE_BEFORE, STATE_AFTER})
NOT_JSON = "is not valid JSON"


def _convention(values: dict[str, AnyValue]) -> Convention | None:
    for convention in CONVENTIONS:
        marker = values.get(convention.marker)
        if marker is not None and marker.string_value == convention.marker_value:
            return convention
    return None


def _ignored_reason(values: dict[str, AnyValue]) -> str:
    """Why a span is not a tool call, in the words of the convention it follows."""
    for marker in (OPERATION, OPENINFERENCE_KIND, TRACELOOP_KIND, MCP_METHOD):
        value = values.get(marker)
        if value is not None and value.string_value:
            # Said by the sender: kept short and printable, as the intake stores and shows it.
            shown = "".join(char for char in value.string_value[:40] if char.isprintable())
            return f"{marker} = {shown}"
    return "no tool-call convention"


def _sent_name(key: str, convention: Convention | None) -> str:
    if convention is None:
        return key
    return {ARGUMENTS: convention.arguments, RESULT: convention.result}.get(key, key)


def _error(status: Status, error_type: Any) -> str | None:
    """The call failed when its span status is ERROR or it names an ``error.type``."""
    kind = error_type if isinstance(error_type, str) and error_type.strip() else None
    if status.code != Status.STATUS_CODE_ERROR and kind is None:
        return None
    message = status.message.strip()
    if kind and message.startswith(kind):
        return message  # the message already names its type
    return ": ".join(part for part in (kind, message) if part) or "error"


def _python(value: AnyValue) -> Any:
    """An attribute's value as JSON-like Python (depth is bounded by protobuf's own limit)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else None
    if kind == "array_value":
        return [_python(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {pair.key: _python(pair.value) for pair in value.kvlist_value.values}
    return None  # bytes or empty: nothing a tool call's JSON holds


def _json_value(value: Any) -> tuple[Any, str | None]:
    """A JSON attribute: a string holding JSON is parsed; a structured value is taken as is.

    A string that is not JSON is kept as the string (a tool may answer plain text), with the
    problem named for the attributes that must be JSON objects.
    """
    if not isinstance(value, str):
        return value, None
    try:
        return _DECODER.decode(value), None
    except RecursionError:
        return value, f"is nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:
        return value, NOT_JSON


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for every attribute: ``json.loads`` with an option builds a new one per call.
# (A string opening with a byte-order mark is refused by both, so it stays NOT_JSON.)
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


# --------------------------------------------------------------------------------- assembly
@dataclass
class Assembly:
    traces: list[dict[str, Any]] = field(default_factory=list)  # the registry's trace format
    uncaptured: set[int] = field(default_factory=set)  # steps without arguments or result


def trace_assemble(
    *, trace_id: str, spans: Iterable[SpanRecord], aliases: dict[str, str]
) -> Assembly:
    """The steps of one OpenTelemetry trace, whatever order or batches its spans came in.

    ``aliases`` maps every name the vocabulary knows (canonical names and aliases) to its
    canonical name (``registry.selectors.alias_map``).
    """
    spans = list(spans)
    by_id = {span["span_id"]: span for span in spans}
    calls = sorted(
        (span for span in spans if span["tool"] is not None and not _inner_call(span, by_id)),
        key=lambda span: (span["start_ns"], span["span_id"]),
    )
    # An outer call sent without content (a framework's execute_tool, capture off) takes the
    # arguments and result of the same call's inner span that carries them (its MCP client's).
    inner = {
        span["parent_span_id"]: span
        for span in spans
        if span["tool"] is not None and span.get("captured", True) and _inner_call(span, by_id)
    }
    state = _canonical(_initial_state(spans), aliases)
    chats = sorted(
        (span for span in spans if span["tool"] is None and USER_TEXTS in span["attributes"]),
        key=lambda span: (span["start_ns"], span["span_id"]),
    )
    said: set[str] = set()  # the user's messages handed to steps so far
    room = MAX_USER_CHARACTERS
    assembly = Assembly()
    for step, span in enumerate(calls):
        # Each step carries the user's messages that came since the one before it: data flow
        # reads a trace's steps in order, so every earlier message is known to later steps.
        new_texts: list[str] = []
        while chats and chats[0]["start_ns"] <= span["start_ns"]:
            for text in chats.pop(0)["attributes"][USER_TEXTS]:
                if text not in said and len(text) <= room:
                    said.add(text)
                    room -= len(text)
                    new_texts.append(text)
        if not span.get("captured", True) and span["span_id"] in inner:
            span = {**span, "attributes": inner[span["span_id"]]["attributes"], "captured": True}
        tool = span["tool"] or ""
        attributes = span["attributes"]
        arguments = attributes.get(ARGUMENTS)
        result = attributes.get(RESULT)
        succeeded = span["error"] is None
        before = (
            _canonical(attributes[STATE_BEFORE], aliases)
            if STATE_BEFORE in attributes
            else dict(state)
        )
        if STATE_AFTER in attributes:
            after = _canonical(attributes[STATE_AFTER], aliases)
        else:
            after = dict(before)
            if succeeded and isinstance(result, dict):
                for name, value in result.items():
                    canonical = aliases.get(name)
                    if canonical is not None:
                        after[canonical] = value
        assembly.traces.append(
            {
                "trace_id": trace_id,
                "step": step,
                "tool": tool,
                "args": arguments if isinstance(arguments, dict) else {},
                "status": "success" if succeeded else "error",
                "state_before": before,
                "state_after": after,
                "output": result,
                "error": span["error"],
                "duration_ms": (span["end_ns"] - span["start_ns"]) / 1_000_000,
                "occurred_at": _iso(span["start_ns"]),
                **(
                    {"messages": [{"role": "user", "content": text} for text in new_texts]}
                    if new_texts
                    else {}
                ),
            }
        )
        if not span.get("captured", True):
            assembly.uncaptured.add(step)
        state = after
    return assembly


# ------------------------------------------------------------------------------ stored form
SAME = "$same_as"  # a stored state that repeats another of the same trace names it instead
SET, UNSET = "$set", "$unset"


def states_shared(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The state before and after of each row as stored: a large state written once per trace.

    ``rows`` are steps in order (``trace_id``, ``step``, ``state_before``, ``state_after``).
    An assembled trace copies its initial state into every step; stored whole, a 60 KB state
    over 1,000 steps would take 120 MB. So in a trace whose states would weigh more than
    ``SHARE_ABOVE`` bytes stored whole, a state before equal to the previous step's state after
    is stored as ``{"$same_as": "state_after of step N"}``, and a state after as what the call
    changed: ``{"$same_as": "state_before", "$set": {...}, "$unset": [...]}``. The first step
    of a trace in ``rows`` stores its state before whole; a smaller trace is stored as it is.
    Learning reads the whole states before they are stored (``learning.ingest``).
    """
    heavy = _heavy_traces(rows)
    stored: list[tuple[dict[str, Any], dict[str, Any]]] = []
    previous: dict[str, tuple[int, dict[str, Any]]] = {}
    for row in rows:
        before, after = row["state_before"], row["state_after"]
        if row["trace_id"] not in heavy:
            stored.append((before, after))
            continue
        last = previous.get(row["trace_id"])
        if last is not None and last[0] == row["step"] - 1 and last[1] == before:
            stored_before: dict[str, Any] = {SAME: f"state_after of step {last[0]}"}
        else:
            stored_before = before
        stored_after: dict[str, Any] = {SAME: "state_before"}
        changed = _changed(before, after)
        if changed:
            stored_after[SET] = changed
        removed = [name for name in before if name not in after]
        if removed:
            stored_after[UNSET] = removed
        stored.append((stored_before, stored_after))
        previous[row["trace_id"]] = (row["step"], after)
    return stored


def states_whole(
    stored: list[tuple[int, dict[str, Any], dict[str, Any]]],
) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    """The whole states of a trace's stored steps (``(step, state_before, state_after)`` in
    order, from its first step): the inverse of ``states_shared``. A step that names a step
    missing from ``stored`` keeps its stored form."""
    whole: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    for step, before, after in stored:
        if _is_shared(before):
            reference = before[SAME].removeprefix("state_after of step ")
            if not reference.isdigit() or int(reference) not in whole:
                whole[step] = (before, after)
                continue
            before = whole[int(reference)][1]
        if _is_shared(after) and after[SAME] == "state_before" and not _is_shared(before):
            unset, changed = set(after.get(UNSET) or []), after.get(SET)
            after = {name: value for name, value in before.items() if name not in unset}
            after.update(changed if isinstance(changed, dict) else {})
        whole[step] = (before, after)
    return whole


def _is_shared(state: dict[str, Any]) -> bool:
    return isinstance(state.get(SAME), str) and set(state) <= {SAME, SET, UNSET}


SHARE_ABOVE = 8 * 1024  # bytes of a trace's states stored whole, past which they are shared


def _heavy_traces(rows: list[dict[str, Any]]) -> set[str]:
    """Traces whose states would weigh more than ``SHARE_ABOVE`` stored whole, estimated from
    the first state and each step's changes (each encoded once: what was sent, no more)."""
    weights: dict[str, int] = {}
    heavy: set[str] = set()
    for row in rows:
        trace_id = row["trace_id"]
        if trace_id in heavy:
            continue
        before = weights.get(trace_id)
        if before is None:
            before = _encoded_size(row["state_before"])
        after = before + sum(
            len(name) + 4 + _encoded_size(value)
            for name, value in _changed(row["state_before"], row["state_after"]).items()
        )
        weights[trace_id] = after
        total = weights.get(f"{trace_id} total", 0) + before + after
        weights[f"{trace_id} total"] = total
        if total > SHARE_ABOVE:
            heavy.add(trace_id)
    return heavy


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {
        name: value
        for name, value in after.items()
        if name not in before or (before[name] is not value and before[name] != value)
    }


def _encoded_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _inner_call(span: SpanRecord, by_id: dict[str, SpanRecord]) -> bool:
    parent = by_id.get(span["parent_span_id"])
    return parent is not None and parent["tool"] == span["tool"]


def _initial_state(spans: list[SpanRecord]) -> dict[str, Any]:
    """``registry.state`` of the root span, else of the earliest span carrying it."""
    carriers = [span for span in spans if span["tool"] is None and STATE in span["attributes"]]
    if not carriers:
        return {}
    first = min(
        carriers, key=lambda span: (span["parent_span_id"] != "", span["start_ns"], span["span_id"])
    )
    state = first["attributes"][STATE]
    return state if isinstance(state, dict) else {}


def _canonical(state: dict[str, Any], aliases: dict[str, str]) -> dict[str, Any]:
    return {aliases.get(name, name): value for name, value in state.items()}


def _iso(nanoseconds: int) -> str:
    moment = datetime.fromtimestamp(nanoseconds // 1_000_000_000, UTC).replace(
        microsecond=(nanoseconds // 1000) % 1_000_000
    )
    return moment.isoformat().replace("+00:00", "Z")
