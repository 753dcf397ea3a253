"""Spans to traces, without a database: what a runtime's GenAI spans become."""

import itertools
import json

import pytest

from learning.otel import (
    MAX_ATTRIBUTE_BYTES,
    MalformedRequest,
    request_from_json,
    request_from_protobuf,
    spans_decode,
    trace_assemble,
)
from learning.otel_replay import request_as_json
from tests.otel_spans import agent, body, request, run, span, tool_call

ALIASES = {"event_id": "event_id", "eventId": "event_id", "event_query": "event_query",
           "event_details": "event_details"}  # fmt: skip


def decode(*spans):
    return spans_decode(request_from_protobuf(body(*spans)), max_spans=1000)


def assemble(*spans):
    batch = decode(*spans)
    return trace_assemble(trace_id="t", spans=batch.spans, aliases=ALIASES)


def test_it_reconstructs_the_state_from_the_data_flow():
    assembly = assemble(*run())
    first, second = assembly.traces
    assert (first["step"], first["tool"], second["step"], second["tool"]) == (
        0, "calendar.find_events", 1, "calendar.get_event",
    )  # fmt: skip
    assert first["state_before"] == {"event_query": "team sync"}
    # A known alias is added under its canonical name; an unknown field is not added.
    assert first["state_after"] == {"event_query": "team sync", "event_id": "evt_9"}
    assert second["state_before"] == first["state_after"]
    assert second["state_after"]["event_details"] == {"title": "Team sync"}
    assert first["output"] == {"eventId": "evt_9", "match_count": 3}
    assert first["duration_ms"] == 40 and first["occurred_at"].startswith("2026-10-26T")


def test_the_steps_do_not_depend_on_order_or_batching():
    spans = run()
    expected = assemble(*spans).traces
    for order in itertools.permutations(spans):
        # Decoded in two requests, in any order: the same records, the same steps.
        records = decode(*order[:1]).spans + decode(*order[1:]).spans
        assert trace_assemble(trace_id="t", spans=records, aliases=ALIASES).traces == expected


def test_calls_are_ordered_by_start_time_then_span_id():
    late = tool_call(1, "b.second", start=2_000)
    early = tool_call(2, "a.first", start=1_000)
    tied = tool_call(3, "c.tied", start=2_000)
    assert [t["tool"] for t in assemble(late, tied, early).traces] == [
        "a.first", "b.second", "c.tied",
    ]  # fmt: skip


def test_a_failed_call_adds_nothing_and_says_why():
    failed = tool_call(1, "calendar.find_events", result={"event_id": "evt_1"},
                       error="quota exceeded", error__type="RateLimited")  # fmt: skip
    typed_only = tool_call(2, "calendar.get_event", error__type="tool_error")
    first, second = assemble(agent({"event_query": "q"}), failed, typed_only).traces
    assert first["status"] == "error" and first["error"] == "RateLimited: quota exceeded"
    assert first["state_after"] == {"event_query": "q"}
    assert second["status"] == "error" and second["error"] == "tool_error"


def test_a_result_that_is_not_an_object_has_no_fields():
    listed = tool_call(1, "calendar.find_events", result=["evt_1"])
    text = tool_call(2, "calendar.get_event", result="not json {")
    first, second = assemble(listed, text).traces
    assert first["state_after"] == {} and first["output"] == ["evt_1"]
    assert second["state_after"] == {} and second["output"] == "not json {"


def test_explicit_state_on_a_tool_span_wins_and_carries_on():
    explicit = tool_call(1, "calendar.find_events", result={"event_id": "evt_1", "other": 1},
                         registry__state_before={"eventId": "evt_0"},
                         registry__state_after={"event_id": "evt_2"})  # fmt: skip
    following = tool_call(2, "calendar.get_event", result={"event_details": "d"})
    first, second = assemble(agent({"event_query": "q"}), explicit, following).traces
    assert first["state_before"] == {"event_id": "evt_0"}
    assert first["state_after"] == {"event_id": "evt_2"}
    assert second["state_before"] == {"event_id": "evt_2"}
    assert second["state_after"] == {"event_id": "evt_2", "event_details": "d"}


def test_the_root_span_state_wins_over_an_agent_span():
    inner_agent = span(5, gen_ai__operation__name="invoke_agent", start=1,
                       registry__state={"event_query": "inner"})  # fmt: skip
    call = tool_call(1, "calendar.find_events")
    assert assemble(inner_agent, call).traces[0]["state_before"] == {"event_query": "inner"}
    with_root = assemble(agent({"event_query": "root"}), inner_agent, call)
    assert with_root.traces[0]["state_before"] == {"event_query": "root"}


def test_an_mcp_tools_call_is_a_tool_call_and_inside_execute_tool_the_same_call():
    mcp = span(1, mcp__method__name="tools/call", gen_ai__tool__name="calendar.find_events",
               gen_ai__tool__call__arguments={"event_query": "q"})  # fmt: skip
    assert [t["tool"] for t in assemble(mcp).traces] == ["calendar.find_events"]
    outer = tool_call(1, "calendar.find_events", args={"event_query": "q"})
    inner = span(2, parent=1, mcp__method__name="tools/call",
                 gen_ai__tool__name="calendar.find_events")  # fmt: skip
    assert len(assemble(outer, inner).traces) == 1


def test_other_spans_are_ignored_and_counted_and_roots_are_noted():
    batch = decode(
        span(0, parent=None, http__method="GET"),
        span(1, gen_ai__operation__name="chat"),
        tool_call(2, "calendar.find_events"),
    )
    assert batch.ignored == 2 and batch.rejected == 0 and len(batch.spans) == 1
    assert batch.roots == {"0af7651916cd43dd8448eb211c80319c"}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (tool_call(1, "x", args="a" * (MAX_ATTRIBUTE_BYTES + 1)), "larger than"),
        (span(1, gen_ai__operation__name="execute_tool"), "needs gen_ai.tool.name"),
        (tool_call(1, "x" * 201), "longer than 200"),
        (agent(state=None, registry__state="[1, 2]"), "must be a JSON object"),
        (agent(state=None, registry__state="{nope"), "is not valid JSON"),
        (tool_call(1, "x", result={"a": "nul\x00"}), "NUL"),
        (tool_call(1, "x", start=4_000_000_000 * 10**9), "a day from now"),
        (tool_call(1, "x", start=0), "needs a start time"),
    ],
)
def test_it_rejects_an_unusable_span_with_its_reason(bad, reason):
    batch = decode(bad, tool_call(2, "fine"))
    assert batch.rejected == 1 and [s["tool"] for s in batch.spans] == ["fine"]
    assert reason in batch.message()


def test_past_the_request_cap_spans_are_rejected_unread():
    batch = spans_decode(request(*[tool_call(n, "x") for n in range(1, 6)]), max_spans=3)
    assert len(batch.spans) == 3 and batch.rejected == 2
    assert "at most 3 spans" in batch.message()


def test_otlp_json_reads_hex_ids_and_refuses_anything_else():
    message = request(*run())
    data = json.loads(json.dumps(request_as_json(message)))
    assert request_from_json(data) == message
    span_data = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span_data["traceId"] = "CvdlGRbNQ92ESOshHIAxnA=="  # base64, as protobuf's mapping would
    with pytest.raises(MalformedRequest, match="traceId must be 32 hexadecimal digits"):
        request_from_json(data)
    with pytest.raises(MalformedRequest, match="not an OTLP/JSON"):
        request_from_json({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]})
    with pytest.raises(MalformedRequest):
        request_from_json([])


def test_malformed_protobuf_is_refused():
    with pytest.raises(MalformedRequest, match="not an OTLP ExportTraceServiceRequest"):
        request_from_protobuf(b"\x0a\xff\xff\xff\xff\x0f garbage")


def test_shared_states_are_rebuilt_whole_and_small_ones_stay_as_they_are():
    from learning.otel import SHARE_ABOVE, states_shared, states_whole

    big = {"memo": "m" * SHARE_ABOVE, "event_query": "q"}
    rows = [
        {"trace_id": "t", "step": 0, "state_before": big, "state_after": {**big, "id": 1}},
        {"trace_id": "t", "step": 1, "state_before": {**big, "id": 1},
         "state_after": {"memo": big["memo"], "id": 2}},
        {"trace_id": "s", "step": 0, "state_before": {"a": 1}, "state_after": {"a": 1, "b": 2}},
    ]  # fmt: skip
    stored = states_shared(rows)
    assert stored[1] == (
        {"$same_as": "state_after of step 0"},
        {"$same_as": "state_before", "$set": {"id": 2}, "$unset": ["event_query"]},
    )
    assert stored[2] == ({"a": 1}, {"a": 1, "b": 2})  # small: stored whole
    whole = states_whole(
        [(row["step"], *states) for row, states in zip(rows[:2], stored[:2], strict=True)]
    )
    assert whole == {row["step"]: (row["state_before"], row["state_after"]) for row in rows[:2]}


@pytest.mark.parametrize(
    ("attributes", "arguments"),
    [
        ({"openinference__span__kind": "TOOL", "tool__name": "x.y",
          "input__value": {"q": 1}, "output__value": {"r": 2}}, {"q": 1}),
        ({"traceloop__span__kind": "tool", "traceloop__entity__name": "x.y",
          "traceloop__entity__input": {"args": [1], "kwargs": {"q": 1}},
          "traceloop__entity__output": {"r": 2}}, {"q": 1}),
        ({"mcp__method__name": "tools/call", "gen_ai__tool__name": "x.y",
          "gen_ai__tool__call__arguments": {"q": 1}, "gen_ai__tool__call__result": {"r": 2}},
         {"q": 1}),
    ],
)  # fmt: skip
def test_each_conventions_tool_span_is_a_tool_call(attributes, arguments):
    from learning.otel import ARGUMENTS, RESULT, spans_decode

    batch = spans_decode(request(span(1, **attributes)), max_spans=10)
    (record,) = batch.spans
    assert record["tool"] == "x.y" and record["captured"]
    assert record["attributes"][ARGUMENTS] == arguments
    assert record["attributes"][RESULT] == {"r": 2}


def test_an_outer_call_without_content_takes_its_inner_mcp_calls_arguments_and_result():
    from learning.otel import spans_decode, trace_assemble

    outer = span(1, gen_ai__operation__name="execute_tool", gen_ai__tool__name="x.y")
    mcp = span(
        2, parent=1, mcp__method__name="tools/call", gen_ai__tool__name="x.y",
        gen_ai__tool__call__arguments={"q": 1}, gen_ai__tool__call__result={"r": 2},
    )  # fmt: skip
    batch = spans_decode(request(agent(), outer, mcp), max_spans=10)
    assert batch.uncaptured == 1
    assembly = trace_assemble(trace_id="t", spans=batch.spans, aliases={})
    (step,) = assembly.traces
    assert (step["args"], step["output"], assembly.uncaptured) == ({"q": 1}, {"r": 2}, set())


def test_chat_spans_give_each_step_the_user_messages_that_came_before_it():
    def chat(number: int, *texts: str):
        messages = [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}]
        messages += [{"role": "user", "parts": [{"type": "text", "content": t}]} for t in texts]
        return span(number, gen_ai__operation__name="chat", gen_ai__input__messages=messages)

    batch = decode(
        agent(),
        chat(1, "Find my team sync"),
        tool_call(2, "calendar.find_events", args={"event_query": "team sync"}),
        chat(3, "Find my team sync", "Then open evt_9"),
        tool_call(4, "calendar.get_event", args={"event_id": "evt_9"}),
        span(5, gen_ai__operation__name="chat"),  # a chat span without its messages
    )
    assert batch.ignored == 2 and len(batch.spans) == 4  # the agent span and the bare chat
    first, second = trace_assemble(trace_id="t", spans=batch.spans, aliases=ALIASES).traces
    assert first["messages"] == [{"role": "user", "content": "Find my team sync"}]
    assert second["messages"] == [{"role": "user", "content": "Then open evt_9"}]


def test_an_unreadable_conversation_leaves_the_chat_span_ignored():
    batch = decode(agent(), span(1, gen_ai__operation__name="chat", gen_ai__input__messages="{"))
    assert (batch.ignored, batch.rejected, batch.spans) == (2, 0, [])


@pytest.mark.parametrize(
    "text", ['\ufeff{"a": 1}', "NaN", '{"a": Infinity}', '{"a": -Infinity}', "[1, 2", ""]
)
def test_a_result_json_refuses_is_kept_as_text(text):
    # A byte-order mark and the constants Python's parser would accept are no JSON a runtime
    # sends: the result stays the text it was (one decoder serves every attribute).
    (step,) = assemble(tool_call(1, "calendar.find_events", result=text)).traces
    assert step["output"] == text and step["state_after"] == {}


def test_a_result_that_is_json_text_is_parsed():
    (step,) = assemble(tool_call(1, "calendar.find_events", result='{"a": [1, 2.5, null]}')).traces
    assert step["output"] == {"a": [1, 2.5, None]}
