"""What a runtime's spans may cost: stored bytes against sent bytes, buffered bytes, assembly
memory, hostile nesting, a lost broker, and the root span at a trace's cap."""

import json
import tracemalloc
from datetime import timedelta
from unittest import mock

import pytest
from django.db import DataError, connection
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from api.errors import error_message, exception_handler
from learning import otel_ingest
from learning.models import OtelSpan, OtelTrace, ToolStats, Trace
from learning.otel import SAME, SET
from learning.selectors import trace_states_whole
from learning.tasks import otel_traces_assemble as otel_ingest_task
from tests.otel_spans import (
    START,
    TRACE,
    agent,
    answer,
    assemble,
    body,
    failure,
    run,
    send,
    span,
    tool_call,
)

pytestmark = pytest.mark.django_db
TRACE_HEX = TRACE.hex()


def stored_bytes() -> int:
    """What the stored traces take, every column of every row (as PostgreSQL stores them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM learning_trace t")
        return int(cursor.fetchone()[0])


def big_state() -> dict:
    # 58 KB of initial state in many variables, as an agent's memory might hold.
    return {f"note_{n}": f"{n:04d}" + "x" * 56 for n in range(800)}


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="measures what PostgreSQL stores (CI runs it)"
)
def test_a_large_initial_state_is_stored_once_not_once_per_step(runtime, admin_client):
    state = {"event_query": "team sync", **big_state()}
    calls = [
        tool_call(n, "calendar.find_events", args={"event_query": "team sync"},
                  result={"eventId": f"evt_{n}"})
        for n in range(1, 1000)
    ]  # fmt: skip
    payload = body(agent(state), *calls)
    assert 350_000 < len(payload) < 450_000
    assert not answer(send(runtime, payload)).HasField("partial_success")
    assert assemble() == 1

    assert Trace.objects.count() == 999
    # Whole in every step, this would store 120 MB (2 × 60 KB × 999 steps).
    assert stored_bytes() <= 3 * len(payload)
    first, second = Trace.objects.order_by("step")[:2]
    assert first.state_before == state  # the first step holds the state whole
    assert first.state_after == {SAME: "state_before", SET: {"event_id": "evt_1"}}
    assert second.state_before == {SAME: "state_after of step 0"}
    # ...and the whole states are read back for a person (the admin's trace page).
    last = Trace.objects.order_by("step").last()
    assert trace_states_whole(trace=last) == (
        {**state, "event_id": "evt_998"},
        {**state, "event_id": "evt_999"},
    )
    page = admin_client.get(f"/admin/learning/trace/{last.pk}/change/").content.decode()
    assert "0799" + "x" * 56 in page and "$same_as" not in page
    # Learning read the whole states: every step saw event_query before, and added event_id.
    variables = ToolStats.objects.get(tool_name="calendar.find_events").aggregate["variables"]
    assert len(variables) == 200  # the aggregate's cap on variables
    assert {entry["before_ok"] for entry in variables.values()} == {999}


def test_a_small_state_is_stored_whole_in_each_step(runtime):
    answer(send(runtime, body(*run())))
    assemble()
    assert Trace.objects.order_by("step").last().state_before == {
        "event_query": "team sync", "event_id": "evt_9"
    }  # fmt: skip


def test_a_trace_past_its_byte_cap_is_refused_but_its_root_span_is_kept(runtime, settings):
    settings.OTLP_MAX_TRACE_BYTES = 25_000
    blob = "b" * 10_000
    calls = [tool_call(n, "calendar.find_events", args={"q": blob}) for n in range(1, 5)]
    response = answer(send(runtime, body(*calls, agent({"event_query": "x"}))))
    assert response.partial_success.rejected_spans == 2
    assert "at most 25000 bytes of spans (its root span is always kept) (2 spans)" in (
        response.partial_success.error_message
    )
    trace = OtelTrace.objects.get()
    assert (trace.complete, trace.span_count) == (True, 3)
    assert 20_000 < trace.span_bytes < 25_000 + 1_000
    assert OtelSpan.objects.filter(record__parent_span_id="").count() == 1


def test_buffered_bytes_are_capped_per_application(runtime, settings):
    settings.OTLP_MAX_PENDING_BYTES = 30_000
    blob = "b" * 10_000
    answer(send(runtime, body(*[tool_call(n, "x.y", args={"q": blob}) for n in (1, 2)])))
    other = tool_call(1, "x.y", args={"q": blob}, trace=b"\x02" * 16)
    more = tool_call(3, "x.y", args={"q": blob})
    status = failure(send(runtime, body(other, more)), 429)
    assert "bytes of spans waiting to be assembled, at most 30000" in status.message
    assert OtelSpan.objects.count() == 2  # nothing of the refused request was written


def test_the_root_span_sent_last_is_kept_at_the_span_cap(runtime, settings):
    settings.OTLP_MAX_SPANS_PER_TRACE = 5
    calls = [tool_call(n, "calendar.find_events", args={"event_query": "q"}) for n in range(1, 9)]
    first = answer(send(runtime, body(*calls)))
    assert first.partial_success.rejected_spans == 3
    root = answer(send(runtime, body(agent({"event_query": "team sync"}))))
    assert not root.HasField("partial_success")  # the root span was not the one refused
    trace = OtelTrace.objects.get()
    assert (trace.complete, trace.span_count) == (True, 6)
    assemble()
    assert Trace.objects.order_by("step").first().state_before == {"event_query": "team sync"}
    # One root only: a second "root" is refused like any span past the cap.
    again = answer(send(runtime, body(span(40, parent=None, registry__state={"a": 1}))))
    assert again.partial_success.rejected_spans == 1


def test_assembly_takes_traces_in_chunks_of_bounded_bytes(runtime, settings):
    blob = "m" * 50_000
    traces = [bytes([n + 1]) * 16 for n in range(12)]
    for trace in traces:
        calls = [tool_call(n, "x.y", args={"q": blob, "n": n}, trace=trace) for n in range(1, 11)]
        answer(send(runtime, body(*calls, agent({"a": 1}, trace=trace))))
    buffered = sum(OtelTrace.objects.values_list("span_bytes", flat=True))
    assert buffered > 6_000_000
    settings.OTLP_ASSEMBLE_BYTES = 1_100_000

    chunks: list[int] = []
    original = otel_ingest._assemble

    def counted(claimed, *, now):
        chunks.append(sum(trace.span_bytes for trace in claimed))
        original(claimed, now=now)

    tracemalloc.start()
    try:
        with mock.patch.object(otel_ingest, "_assemble", counted):
            # The assembly alone: the fold its commit queues claims traces by count.
            assert otel_ingest.otel_traces_assemble(now=timezone.now() + timedelta(minutes=5)) == 12
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(chunks) == 6 and max(chunks) <= 1_100_000
    # Everything at once held the whole buffer, several times over; a chunk holds a chunk's.
    assert peak < buffered, (peak, buffered)
    assert Trace.objects.count() == 120


def test_a_span_nested_too_deep_is_refused_and_the_good_ones_kept(runtime):
    deep = '{"k":' * 935 + "1" + "}" * 935
    response = answer(send(runtime, body(*run(), tool_call(3, "calendar.get_event", args=deep))))
    assert response.partial_success.rejected_spans == 1
    assert response.partial_success.error_message == (
        "gen_ai.tool.call.arguments is nested deeper than 100 levels (1 span)"
    )
    assert OtelSpan.objects.count() == 3
    assemble()
    assert Trace.objects.count() == 2


def test_a_recursion_anywhere_is_a_400_status_not_an_html_page(runtime):
    with mock.patch("api.views.spans_receive", side_effect=RecursionError):
        status = failure(send(runtime, body(*run())), 400)
    assert status.message == "The request is nested too deeply."


def test_a_failure_is_mapped_as_the_api_maps_it_then_spelt_as_a_status(runtime):
    with mock.patch("api.views.spans_receive", side_effect=DataError("out of range")):
        status = failure(send(runtime, body(*run())), 400)
    expected = exception_handler(DataError("out of range"), {})
    assert status.message == error_message(expected.data)
    assert "cannot store" in status.message


def test_an_unexpected_failure_is_still_a_google_rpc_status(runtime):
    with mock.patch("api.views.spans_receive", side_effect=KeyError("boom")):
        response = send(runtime, body(*run()))
    status = failure(response, 500)
    assert status.code == 13 and "retry later" in status.message  # INTERNAL


def test_spans_of_other_kinds_are_ignored_and_the_intake_says_why(runtime):
    chat = span(5, gen_ai__operation__name="chat")
    hostile = span(8, gen_ai__operation__name="chat\x00")
    llm = span(6, openinference__span__kind="LLM")
    plain = span(7)
    answer(send(runtime, body(*run(), chat, llm, plain, hostile)))
    from learning.models import SpanIntake

    row = SpanIntake.objects.get()
    assert row.ignored == 4
    assert row.ignored_reasons == {
        "gen_ai.operation.name = chat": 2,
        "openinference.span.kind = LLM": 1,
        "no tool-call convention": 1,
    }


def test_tool_calls_without_content_are_counted_not_judged_and_the_sender_is_told(runtime):
    bare = [
        span(n, gen_ai__operation__name="execute_tool", gen_ai__tool__name="calendar.get_event",
             start=START + n * 10**9, duration_ms=30)
        for n in (1, 2)
    ]  # fmt: skip
    response = answer(send(runtime, body(agent({"event_id": "e"}), *bare)))
    assert response.partial_success.rejected_spans == 0
    message = response.partial_success.error_message
    assert message.startswith("2 tool-call spans carried neither arguments nor result")
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true" in message
    assemble()
    assert Trace.objects.count() == 2  # stored, and counted in the tool's days
    from learning.models import ToolDayStats

    assert ToolDayStats.objects.get(tool_name="calendar.get_event").calls == 2
    # ...but never folded: no output judged, no argument made to look optional.
    assert not ToolStats.objects.filter(tool_name="calendar.get_event").exists()
    assert json.dumps(response.partial_success.error_message)


def test_the_intake_page_shows_why_spans_were_ignored(runtime, admin_client):
    answer(send(runtime, body(*run(), span(5, gen_ai__operation__name="chat<b>"))))
    from learning.models import SpanIntake

    intake = SpanIntake.objects.get()
    page = admin_client.get(f"/admin/learning/spanintake/{intake.pk}/change/")
    assert page.status_code == 200
    assert "gen_ai.operation.name = chat&lt;b&gt;: 1" in page.content.decode()


def test_a_broker_refusing_connections_never_turns_stored_spans_into_an_error(
    runtime, django_capture_on_commit_callbacks, monkeypatch, caplog
):
    """The real Celery app, its broker a port where nothing listens."""
    from config.celery_app import app
    from tests.redis_server import free_port

    monkeypatch.setattr(app.conf, "broker_url", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setattr(app, "_pool", None)
    app.amqp._producer_pool = None
    try:
        with pytest.raises(BrokerError):  # the broker is indeed away
            otel_ingest_task.apply_async(retry=False)
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = answer(send(runtime, body(*run())))
    finally:
        app.amqp._producer_pool = None
    assert len(callbacks) == 1 and not response.HasField("partial_success")
    assert "OTLP assembly not queued: OperationalError" in caplog.text
    assert OtelTrace.objects.get().complete
    assert assemble() == 1 and Trace.objects.count() == 2
