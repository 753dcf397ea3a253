"""The demo traces: well formed, deterministic, faithful to every contract but the drifted one.

Pure: reads demo/registry.json and runs the generator; no database.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from demo.traces import DRIFTED_TOOL, UNREGISTERED_TOOL, demo_traces

START = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
FIELDS = {
    "trace_id", "step", "tool", "args", "status", "state_before", "state_after", "output",
    "error", "duration_ms", "occurred_at",
}  # fmt: skip


@pytest.fixture(scope="module")
def canonical(demo_file: dict) -> dict[str, str]:
    names = {variable["name"]: variable["name"] for variable in demo_file["state_variables"]}
    for variable in demo_file["state_variables"]:
        for alias in variable.get("aliases", []):
            names[alias] = variable["name"]
    return names


@pytest.fixture(scope="module")
def traces(demo_file: dict) -> list[dict]:
    return list(demo_traces(demo_file, start=START))


@pytest.fixture(scope="module")
def by_tool(traces: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = defaultdict(list)
    for trace in traces:
        grouped[trace["tool"]].append(trace)
    return grouped


def scalars(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from scalars(item)
    elif not isinstance(value, bool):  # a flag is not evidence of data flow
        yield value


def canonical_state(state: dict, canonical: dict[str, str]) -> dict:
    return {canonical.get(name, name): value for name, value in state.items()}


def flowing(trace: dict, canonical: dict[str, str]) -> set[str]:
    """State variables whose values (or a part of them) appear anywhere in the arguments."""
    in_args = set(scalars(trace["args"]))
    return {
        name
        for name, value in canonical_state(trace["state_before"], canonical).items()
        if set(scalars(value)) & in_args
    }


def added(trace: dict, canonical: dict[str, str]) -> set[str]:
    before = canonical_state(trace["state_before"], canonical)
    after = canonical_state(trace["state_after"], canonical)
    return set(after) - set(before)


def successes(traces: list[dict]) -> list[dict]:
    return [trace for trace in traces if trace["status"] == "success"]


def test_it_yields_a_few_thousand_traces_over_every_registered_tool(traces, demo_tools, by_tool):
    assert 3000 <= len(traces) <= 6000
    assert set(demo_tools) <= set(by_tool)
    assert set(by_tool) - set(demo_tools) == {UNREGISTERED_TOOL}


def test_it_is_deterministic_for_a_seed_and_start(demo_file, traces):
    assert list(demo_traces(demo_file, start=START)) == traces
    other = list(demo_traces(demo_file, start=START, seed=8))
    assert other != traces
    assert {trace["trace_id"] for trace in other}.isdisjoint(t["trace_id"] for t in traces)


def test_it_scales_with_runs(demo_file):
    few = list(demo_traces(demo_file, start=START, runs=20))
    assert len({trace["trace_id"] for trace in few}) == 20


def test_every_trace_is_well_formed(traces):
    keys = Counter((trace["trace_id"], trace["step"]) for trace in traces)
    assert max(keys.values()) == 1
    for trace in traces:
        assert set(trace) == FIELDS
        assert isinstance(trace["args"], dict) and trace["args"]
        assert isinstance(trace["duration_ms"], int) and trace["duration_ms"] > 0
        assert trace["status"] in ("success", "error")
        if trace["status"] == "success":
            assert trace["error"] is None and isinstance(trace["output"], dict)
        else:
            assert trace["error"] and trace["output"] is None
            assert trace["state_after"] == trace["state_before"]
        # Nothing already in the state is changed or dropped by a call.
        assert trace["state_after"].items() >= trace["state_before"].items()
        json.dumps(trace)  # serialisable as one line of a .jsonl file


def test_runs_are_numbered_from_zero_in_time_order_and_end_before_start(traces):
    runs: dict[str, list[dict]] = defaultdict(list)
    for trace in traces:
        runs[trace["trace_id"]].append(trace)
    moments = []
    for steps in runs.values():
        assert [trace["step"] for trace in steps] == list(range(len(steps)))
        times = [datetime.fromisoformat(t["occurred_at"].replace("Z", "+00:00")) for t in steps]
        assert times == sorted(times) and all(moment.tzinfo for moment in times)
        assert all(
            a["state_after"] == b["state_before"] for a, b in zip(steps, steps[1:], strict=False)
        )
        # a failed call ends its run
        assert all(t["status"] == "success" for t in steps[:-1])
        moments += times
    assert max(moments) < START
    assert timedelta(days=3) < max(moments) - min(moments) < timedelta(days=5)


def test_every_other_tool_behaves_exactly_as_its_contract_says(by_tool, demo_tools, canonical):
    for name, contract in demo_tools.items():
        if name == DRIFTED_TOOL:
            continue
        calls = successes(by_tool[name])
        assert len(calls) >= 30, name
        for trace in calls:
            assert flowing(trace, canonical) == set(contract["requires"]), (name, trace)
            assert added(trace, canonical) == set(contract["produces"]), (name, trace)
            assert set(trace["output"]) >= set(contract["produces"]), name


def test_arguments_and_outputs_match_the_contract_schemas(by_tool, demo_tools):
    for name, contract in demo_tools.items():
        if name == DRIFTED_TOOL:
            continue
        input_validator = Draft202012Validator(contract["input_schema"])
        output_validator = Draft202012Validator(contract.get("output_schema") or {})
        for trace in by_tool[name]:
            assert not list(input_validator.iter_errors(trace["args"])), (name, trace["args"])
            if trace["status"] == "success":
                assert not list(output_validator.iter_errors(trace["output"])), name


def test_optional_arguments_are_sometimes_sent(by_tool, demo_tools):
    for name in ("calendar.find_events", "mail.draft_reply", "documents.summarize"):
        schema = demo_tools[name]["input_schema"]
        optional = set(schema["properties"]) - set(schema["required"])
        sent = {key for trace in by_tool[name] for key in trace["args"]}
        assert sent & optional, name
        assert any(not set(trace["args"]) & optional for trace in by_tool[name]), name


def test_some_data_flows_into_nested_arguments(by_tool, canonical):
    trace = successes(by_tool["calendar.invite_attendee"])[0]
    email = canonical_state(trace["state_before"], canonical)["attendee_email"]
    assert trace["args"]["attendees"][0]["email"] == email
    trace = successes(by_tool["payments.create_invoice"])[0]
    amount = canonical_state(trace["state_before"], canonical)["invoice_amount"]
    assert trace["args"]["line_items"][0]["amount"] == amount


def test_failures_lack_a_precondition_and_nothing_else(by_tool, demo_tools, canonical):
    failures = 0
    for name, contract in demo_tools.items():
        if name == DRIFTED_TOOL:
            continue
        for trace in by_tool[name]:
            if trace["status"] == "error":
                failures += 1
                missing = set(contract["requires"]) - set(
                    canonical_state(trace["state_before"], canonical)
                )
                assert missing, (name, trace)
    assert 10 <= failures <= 100


def test_some_runtimes_write_aliases(traces, canonical):
    keys = {key for trace in traces for key in trace["state_before"]}
    aliases = {key for key in keys if canonical.get(key, key) != key}
    assert {"eventId", "messageId"} <= aliases
    assert keys - aliases <= set(canonical.values())  # every other key is a canonical name


def test_durations_centre_on_the_declared_cost(by_tool, demo_tools):
    for name, contract in demo_tools.items():
        durations = [trace["duration_ms"] for trace in successes(by_tool[name])]
        p50 = contract["cost"]["latency_ms_p50"]
        assert 0.7 * p50 <= statistics.median(durations) <= 1.4 * p50, name


def test_the_refund_tool_drifted_as_documented(by_tool, demo_tools, canonical):
    contract = demo_tools[DRIFTED_TOOL]
    assert contract["requires"] == ["charge_id"] and contract["produces"] == ["refund_id"]
    calls = successes(by_tool[DRIFTED_TOOL])
    assert len(calls) >= 60
    for trace in calls:
        assert flowing(trace, canonical) == {"charge_id", "approval_code"}
        assert added(trace, canonical) == {"refund_id", "refund_receipt_url"}
        state = canonical_state(trace["state_before"], canonical)
        assert trace["args"]["approval_code"] == state["approval_code"]
        assert "approval_code" not in contract["input_schema"]["properties"]
        assert "refund_receipt_url" in trace["output"]
    unapproved = [
        trace
        for trace in by_tool[DRIFTED_TOOL]
        if trace["status"] == "error"
        and set(canonical_state(trace["state_before"], canonical)) >= {"charge_id"}
    ]
    assert unapproved, "runs without an approval code must fail"
    for trace in unapproved:
        assert "approval_code" not in canonical_state(trace["state_before"], canonical)


def test_the_unregistered_tool_shows_up_consistently(by_tool, canonical):
    calls = successes(by_tool[UNREGISTERED_TOOL])
    assert calls
    for trace in calls:
        assert flowing(trace, canonical) == {"customer_email"}
        assert added(trace, canonical) == {"account_id"}
