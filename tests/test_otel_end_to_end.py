"""A runtime instrumented with the OpenTelemetry Python SDK feeds the registry by configuration.

A small agent loop calls the demo tools, each call in an ``execute_tool`` span under an
``invoke_agent`` span, and the SDK's own OTLP/HTTP exporter (protobuf, or OTLP/JSON through an
exporter built on the SDK's encoder) sends them to a live server. The registry must infer the
same contracts as from the equivalent native traces.
"""

import gzip
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
import requests
from django.utils import timezone
from openinference.semconv.trace import OpenInferenceSpanKindValues
from openinference.semconv.trace import SpanAttributes as OpenInference
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes as mcp
from opentelemetry.semconv_ai import SpanAttributes as Traceloop
from opentelemetry.semconv_ai import TraceloopSpanKindValues
from opentelemetry.trace import Status, StatusCode

from api.services import runtime_token_create
from demo.traces import demo_traces
from learning.ingest import traces_ingest
from learning.models import InferredContract, OtelTrace, SpanIntake, ToolStats, Trace
from learning.otel_ingest import otel_traces_assemble
from learning.otel_replay import request_as_json
from learning.services import tools_refresh, tools_with_new_traces
from registry.models import Application
from reviews.services import registry_import

# Minutes on two cores: `make test-slow` (CI runs it).
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
REGISTRY_FILE = Path(__file__).resolve().parents[1] / "demo" / "registry.json"
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
COMPARED = ("requires", "produces", "input_schema", "risk", "cost", "support")


class DemoTools:
    """The demo's tools, answering as the demo's simulation says they do."""

    def __init__(self, calls: list[dict]):
        self.answers = {(call["trace_id"], call["step"]): call for call in calls}

    def call(self, run: str, step: int, tool: str, args: dict) -> dict:
        answer = self.answers[(run, step)]
        assert answer["tool"] == tool and answer["args"] == args
        if answer["status"] == "error":
            raise ToolFailed(answer["error"])
        return answer["output"]


class ToolFailed(Exception):
    pass


def ns(moment: str) -> int:
    parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return int(parsed.replace(microsecond=0).timestamp()) * 10**9 + parsed.microsecond * 1000


def genai_call(step: dict) -> dict:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": step["tool"],
        "gen_ai.tool.call.id": f"call_{step['step']}",
        "gen_ai.tool.call.arguments": json.dumps(step["args"]),
    }


def genai_result(result: dict) -> dict:
    return {"gen_ai.tool.call.result": json.dumps(result)}


# Each convention's tool span, named by the conventions' own packages: (call, result) attributes.
CONVENTIONS = {
    "openinference": (
        lambda step: {
            OpenInference.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.TOOL.value,
            OpenInference.TOOL_NAME: step["tool"],
            OpenInference.TOOL_PARAMETERS: json.dumps({"type": "object"}),
            OpenInference.INPUT_VALUE: json.dumps(step["args"]),
            OpenInference.INPUT_MIME_TYPE: "application/json",
        },
        lambda result: {
            OpenInference.OUTPUT_VALUE: json.dumps(result),
            OpenInference.OUTPUT_MIME_TYPE: "application/json",
        },
    ),
    "traceloop": (
        lambda step: {
            Traceloop.TRACELOOP_SPAN_KIND: TraceloopSpanKindValues.TOOL.value,
            Traceloop.TRACELOOP_ENTITY_NAME: step["tool"],
            # What Traceloop's @tool decorator records of a call: positional and named arguments.
            Traceloop.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [], "kwargs": step["args"]}),
        },
        lambda result: {Traceloop.TRACELOOP_ENTITY_OUTPUT: json.dumps(result)},
    ),
    "mcp": (
        lambda step: {
            mcp.MCP_METHOD_NAME: "tools/call",
            gen_ai.GEN_AI_TOOL_NAME: step["tool"],
            "jsonrpc.request.id": str(step["step"]),
            gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(step["args"]),
        },
        lambda result: {gen_ai.GEN_AI_TOOL_CALL_RESULT: json.dumps(result)},
    ),
}


def agent_loop(
    tracer, runs: dict[str, list[dict]], tools: DemoTools, *, call=genai_call, result=genai_result
) -> None:
    """Each run: plan (here: the demo's plan), call each tool inside a tool span (GenAI's
    execute_tool unless ``call`` and ``result`` name another convention's attributes)."""
    for run, plan in runs.items():
        first = ns(plan[0]["occurred_at"])
        root = tracer.start_span(
            "invoke_agent assistant",
            start_time=first - 10**6,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "assistant",
                "registry.state": json.dumps(plan[0]["state_before"]),
            },
        )
        context = otel_trace.set_span_in_context(root)
        end = first
        for step in plan:
            start = ns(step["occurred_at"])
            end = start + step["duration_ms"] * 10**6
            span = tracer.start_span(
                f"execute_tool {step['tool']}",
                context=context,
                start_time=start,
                attributes=call(step),
            )
            try:
                answer = tools.call(run, step["step"], step["tool"], step["args"])
                span.set_attributes(result(answer))
            except ToolFailed as failure:
                span.set_attribute("error.type", str(failure).split(":", 1)[0])
                span.set_status(Status(StatusCode.ERROR, str(failure)))
            span.end(end_time=end)
        root.end(end_time=end + 10**6)


class OTLPJSONExporter(SpanExporter):
    """OTLP/JSON over HTTP, gzipped: the SDK's encoder, with ids in hex as OTLP/JSON says."""

    def __init__(self, endpoint: str, token: str):
        self.endpoint, self.token = endpoint, token
        self.answers: list[dict] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = gzip.compress(json.dumps(request_as_json(encode_spans(spans))).encode())
        response = requests.post(
            self.endpoint,
            data=body,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
            },
            timeout=30,
        )
        self.answers.append(response.json())
        return SpanExportResult.SUCCESS if response.ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def inferred() -> dict[str, dict]:
    tools_refresh(tool_names=tools_with_new_traces())
    return {
        row.tool_name: {key: row.document.get(key) for key in COMPARED}
        for row in InferredContract.objects.all()
    }


def forget_learning() -> None:
    for model in (Trace, ToolStats, InferredContract, OtelTrace):
        model.objects.all().delete()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_an_instrumented_runtime_teaches_the_same_contracts_as_native_traces(
    live_server, monkeypatch, encoding
):
    registry = json.loads(REGISTRY_FILE.read_text())
    registry_import(data=registry, approve=True)
    _, token = runtime_token_create(
        application_name="assistant", scopes=["contracts:read", "traces:write"]
    )
    calls = list(demo_traces(registry, runs=240, start=START))
    runs: dict[str, list[dict]] = {}
    for call in calls:
        runs.setdefault(call["trace_id"], []).append(call)

    endpoint = f"{live_server.url}/api/v1/otlp/v1/traces"
    if encoding == "protobuf":
        # Configuration only: the exporter reads its endpoint and headers from the environment.
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{token}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
        exporter: SpanExporter = OTLPSpanExporter()
    else:
        exporter = OTLPJSONExporter(endpoint, token)
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128))
    tracer = provider.get_tracer("demo-agent")
    with mock.patch("api.views.otel_traces_assemble.apply_async") as queued:
        agent_loop(tracer, runs, DemoTools(calls))
        provider.shutdown()  # flushes every batch to the live server
    assert queued.called

    intake = SpanIntake.objects.get(application__name="assistant")
    assert intake.buffered == len(calls) + len(runs) and intake.rejected == 0
    if encoding == "json":
        assert all(answer == {} for answer in exporter.answers)  # no partial success
    assert otel_traces_assemble(now=timezone.now() + timedelta(minutes=5)) == len(runs)
    assert Trace.objects.count() == len(calls)
    from_spans = inferred()

    forget_learning()
    application = Application.objects.get(name="assistant")
    result = traces_ingest(items=enumerate(calls), application=application)
    assert result.accepted == len(calls)
    from_native = inferred()

    assert from_spans == from_native
    assert len(from_spans) >= 15 and "crm.lookup_account" in from_spans
    assert from_spans["calendar.update_event"]["requires"]


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_each_instrumentations_tool_spans_teach_the_same_contracts(live_server, convention):
    """OpenInference, Traceloop/OpenLLMetry and MCP tool spans, through the SDK's exporter."""
    registry = json.loads(REGISTRY_FILE.read_text())
    registry_import(data=registry, approve=True)
    _, token = runtime_token_create(
        application_name="assistant", scopes=["contracts:read", "traces:write"]
    )
    calls = list(demo_traces(registry, runs=120, start=START))
    runs: dict[str, list[dict]] = {}
    for call in calls:
        runs.setdefault(call["trace_id"], []).append(call)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/api/v1/otlp/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128))
    call_attributes, result_attributes = CONVENTIONS[convention]
    with mock.patch("api.views.otel_traces_assemble.apply_async"):
        agent_loop(
            provider.get_tracer("demo-agent"), runs, DemoTools(calls),
            call=call_attributes, result=result_attributes,
        )  # fmt: skip
        provider.shutdown()

    intake = SpanIntake.objects.get(application__name="assistant")
    assert (intake.buffered, intake.rejected, intake.uncaptured) == (len(calls) + len(runs), 0, 0)
    assert otel_traces_assemble(now=timezone.now() + timedelta(minutes=5)) == len(runs)
    assert Trace.objects.count() == len(calls)
    from_spans = inferred()

    forget_learning()
    application = Application.objects.get(name="assistant")
    traces_ingest(items=enumerate(calls), application=application)
    assert from_spans == inferred()
    assert from_spans["calendar.update_event"]["requires"]
