"""The OTLP/HTTP receiver: what a runtime's exporter sends, and the answers the spec asks for."""

import gzip
import json
import zlib
from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.utils import timezone
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from learning.models import CandidateVariable, OtelSpan, OtelTrace, SpanIntake, ToolStats, Trace
from learning.otel_ingest import otel_traces_assemble
from learning.otel_replay import request_as_json
from registry.models import Application
from tests.helpers import client_for
from tests.otel_spans import (
    PROTOBUF,
    TRACE,
    answer,
    assemble,
    body,
    failure,
    request,
    run,
    send,
    span,
    tool_call,
)

pytestmark = pytest.mark.django_db
TRACE_HEX = TRACE.hex()


def stored() -> list[tuple]:
    return list(
        Trace.objects.order_by("step").values_list(
            "trace_id", "step", "tool_name", "status", "state_before", "state_after"
        )
    )


def test_it_buffers_a_runs_spans_then_assembles_them_into_traces(runtime):
    response = answer(send(runtime, body(*run())))
    assert not response.HasField("partial_success")
    trace = OtelTrace.objects.get()
    assert (trace.trace_id, trace.complete, trace.span_count) == (TRACE_HEX, True, 3)
    assert Trace.objects.count() == 0  # nothing is learnt before the trace is assembled
    assert assemble() == 1
    assert stored() == [
        (TRACE_HEX, 0, "calendar.find_events", "success", {"event_query": "team sync"},
         {"event_query": "team sync", "event_id": "evt_9"}),
        (TRACE_HEX, 1, "calendar.get_event", "success",
         {"event_query": "team sync", "event_id": "evt_9"},
         {"event_query": "team sync", "event_id": "evt_9",
          "event_details": {"title": "Team sync"}}),
    ]  # fmt: skip
    assert set(Trace.objects.values_list("application__name", flat=True)) == {"assistant"}
    assert ToolStats.objects.get(tool_name="calendar.find_events").traces_total == 1
    # match_count fed no later call: nothing to propose to the vocabulary.
    assert not CandidateVariable.objects.exists()
    trace.refresh_from_db()
    assert (trace.state, trace.steps, OtelSpan.objects.count()) == ("assembled", 2, 0)
    intake = SpanIntake.objects.get()
    assert (intake.received, intake.buffered, intake.ignored, intake.rejected) == (3, 3, 0, 0)


def test_spans_split_over_requests_in_any_order_make_the_same_traces(runtime):
    root, first, second = run()
    answer(send(runtime, body(second)))
    answer(send(runtime, body(first)))
    assert OtelTrace.objects.get().complete is False
    assert otel_traces_assemble() == 0  # neither complete nor quiet yet: it waits
    answer(send(runtime, body(root)))
    assert OtelTrace.objects.get().complete is True
    assemble()
    in_pieces = stored()
    Trace.objects.all().delete()
    OtelTrace.objects.all().delete()
    answer(send(runtime, body(*run())))
    assemble()
    assert stored() == in_pieces and len(in_pieces) == 2


def test_a_trace_whose_root_never_comes_is_assembled_after_the_quiet_period(runtime, settings):
    settings.OTLP_QUIET_SECONDS = 60
    _, first, second = run()
    answer(send(runtime, body(first, second)))
    assert otel_traces_assemble(now=timezone.now() + timedelta(seconds=30)) == 0
    assert otel_traces_assemble(now=timezone.now() + timedelta(seconds=61)) == 1
    assert Trace.objects.count() == 2


def test_completion_queues_the_assembly_once_the_request_commits(
    runtime, django_capture_on_commit_callbacks
):
    with mock.patch("api.views.otel_traces_assemble.apply_async") as queued:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            answer(send(runtime, body(*run()[1:])))
        assert callbacks == [] and not queued.called  # no root yet: nothing to queue
        with django_capture_on_commit_callbacks(execute=True):
            answer(send(runtime, body(run()[0])))
    queued.assert_called_once_with(countdown=6, retry=False)


def test_otlp_json_is_read_and_answered_in_json(runtime):
    payload = json.dumps(request_as_json(request(*run(), tool_call(3, "x" * 300)))).encode()
    response = send(runtime, payload, content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == {
        "partialSuccess": {
            "rejectedSpans": "1",
            "errorMessage": "gen_ai.tool.name is longer than 200 characters (1 span)",
        }
    }
    assemble()
    assert [row[2] for row in stored()] == ["calendar.find_events", "calendar.get_event"]


def test_an_exporters_retry_is_stored_once(runtime):
    answer(send(runtime, body(*run()[1:])))
    answer(send(runtime, body(*run()[1:])))
    assert OtelTrace.objects.get().span_count == 2 and OtelSpan.objects.count() == 2


def test_gzip_and_deflate_bodies_are_read(runtime):
    compressed = gzip.compress(body(*run()))
    answer(send(runtime, compressed, HTTP_CONTENT_ENCODING="gzip"))
    other = span(0, parent=None, trace=b"\x01" * 16, gen_ai__operation__name="invoke_agent",
                 registry__state={"event_query": "q"})  # fmt: skip
    answer(send(runtime, zlib.compress(body(other)), HTTP_CONTENT_ENCODING="deflate"))
    assert OtelTrace.objects.count() == 2


def test_a_gzip_bomb_is_refused_with_413_and_nothing_kept(runtime, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024))  # 64 MiB of zeros in ~64 KB
    assert len(bomb) < 100 * 1024
    status = failure(send(runtime, bomb, HTTP_CONTENT_ENCODING="gzip"), 413)
    assert "inflates to more than 1048576 bytes" in status.message
    assert not OtelTrace.objects.exists()


@pytest.mark.parametrize(
    ("payload", "headers", "code", "words"),
    [
        (b"\x0a\xff\xff\xff\xff\x0f", {}, 400, "not an OTLP ExportTraceServiceRequest"),
        (b"{}", {"content_type": "text/plain"}, 415, "'text/plain' is not supported"),
        (b"\x1f\x8b\x08\x00broken", {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "not valid gzip"),
        (b"x", {"HTTP_CONTENT_ENCODING": "br"}, 415, "'br' is not supported"),
        (b'{"resourceSpans": [', {"content_type": "application/json"}, 400, "not valid JSON"),
        (b"\xff\xfe", {"content_type": "application/json"}, 400, "not valid UTF-8"),
        (b'{"resourceSpans": NaN}', {"content_type": "application/json"}, 400, "NaN"),
        (b"[1]", {"content_type": "application/json"}, 400, "must be a JSON object"),
    ],
)
def test_a_malformed_request_gets_a_clear_status(runtime, payload, headers, code, words):
    status = failure(send(runtime, payload, **headers), code)
    assert words in status.message
    assert not OtelTrace.objects.exists()


def test_errors_are_a_status_in_the_requests_encoding(runtime):
    response = send(runtime, b"\x0a\xff\xff", content_type=PROTOBUF)
    assert response["Content-Type"] == PROTOBUF
    assert status_pb2.Status.FromString(response.content).code == 3  # INVALID_ARGUMENT
    response = send(runtime, b"[", content_type="application/json")
    assert response["Content-Type"] == "application/json" and response.json()["code"] == 3


def test_it_needs_a_token_with_the_traces_scope(registry, client):
    status = failure(send(client, body(*run())), 401)
    assert status.code == 16  # UNAUTHENTICATED
    reader = client_for("reader", scopes=("contracts:read",))
    assert "traces:write" in failure(send(reader, body(*run())), 403).message
    assert not OtelTrace.objects.exists()


def test_a_database_outage_is_retryable(runtime):
    with mock.patch("api.views.spans_receive", side_effect=OperationalError("gone")):
        response = send(runtime, body(*run()))
    failure(response, 503)
    assert response["Retry-After"] == "5"


def test_a_million_spans_of_one_trace_are_refused_past_the_cap(runtime, settings):
    settings.OTLP_MAX_SPANS_PER_TRACE = 5
    many = [tool_call(n, "calendar.find_events") for n in range(1, 9)]
    response = answer(send(runtime, body(*many)))
    assert response.partial_success.rejected_spans == 3
    assert "a trace holds at most 5 tool-call spans (its root span is always kept) (3 spans)" in (
        response.partial_success.error_message
    )
    more = answer(send(runtime, body(*[tool_call(n, "x") for n in range(20, 22)])))
    assert more.partial_success.rejected_spans == 2
    assert OtelTrace.objects.get().span_count == 5 == OtelSpan.objects.count()


def test_a_full_buffer_is_a_retryable_429_that_writes_nothing(runtime, settings):
    settings.OTLP_MAX_PENDING_TRACES = 1
    answer(send(runtime, body(*run()[1:])))
    other = tool_call(1, "calendar.find_events", trace=b"\x02" * 16)
    response = send(runtime, body(other))
    status = failure(response, 429)
    assert response["Retry-After"] == "60" and "traces waiting" in status.message
    assert OtelTrace.objects.count() == 1
    assemble()  # the buffer drains...
    answer(send(runtime, body(other)))  # ...and the retry gets in


def test_a_span_arriving_after_its_trace_was_assembled_is_refused(runtime):
    answer(send(runtime, body(*run())))
    assemble()
    late = answer(send(runtime, body(tool_call(7, "calendar.get_event"))))
    assert late.partial_success.rejected_spans == 1
    assert "already assembled" in late.partial_success.error_message
    assert Trace.objects.count() == 2


def test_the_same_trace_id_from_two_applications_is_two_traces(runtime, restricted):
    answer(send(runtime, body(*run())))
    answer(send(restricted, body(*run())))
    assemble()
    assert sorted(Trace.objects.values_list("application__name", "step")) == [
        ("assistant", 0), ("assistant", 1), ("restricted", 0), ("restricted", 1),
    ]  # fmt: skip


def test_spans_claiming_a_hidden_tool_are_treated_like_an_unknown_name(
    restricted, django_capture_on_commit_callbacks
):
    # calendar.delete_event is high risk; "restricted" may see medium at most.
    hidden = answer(send(restricted, body(tool_call(1, "calendar.delete_event", args={}))))
    unknown = answer(
        send(restricted, body(tool_call(1, "nobody.knows_this", args={}, trace=b"\x03" * 16)))
    )
    assert hidden == unknown == ExportTraceServiceResponse()
    assemble()
    rows = Trace.objects.filter(tool_name__in=["calendar.delete_event", "nobody.knows_this"])
    assert rows.count() == 2 and all(row.unknown_tool and row.tool_id is None for row in rows)
    assert not ToolStats.objects.filter(tool_name="calendar.delete_event").exists()
    # Past the allowance both are refused with the same words, at once.
    application = Application.objects.get(name="restricted")
    application.unknown_tool_names = 0
    with django_capture_on_commit_callbacks(execute=True):
        application.save()  # as the admin does: the revision moves, tokens are read again
    Trace.objects.all().delete()
    hidden = answer(
        send(restricted, body(tool_call(1, "calendar.delete_event", trace=b"\x04" * 16)))
    )
    unknown = answer(send(restricted, body(tool_call(1, "nobody.else", trace=b"\x05" * 16))))
    assert hidden.partial_success.rejected_spans == unknown.partial_success.rejected_spans == 1
    assert hidden.partial_success.error_message.replace("calendar.delete_event", "N") == (
        unknown.partial_success.error_message.replace("nobody.else", "N")
    )
    assert "not a tool this application may use" in hidden.partial_success.error_message


def test_a_throttled_runtime_is_told_when_to_retry(runtime):
    with mock.patch("api.throttling.window_hit", return_value=(10**9, 2.5)):
        response = send(runtime, body(*run()))
    status = failure(response, 429)
    assert response["Retry-After"] == "3" and status.code == 8  # RESOURCE_EXHAUSTED
    assert not OtelTrace.objects.exists()
