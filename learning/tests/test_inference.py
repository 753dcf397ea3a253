"""Each rule of inference on crafted traces, with the counter-examples that keep it honest."""

import random

from learning.aggregates import (
    MAX_ARGS,
    MAX_VARIABLES,
    aggregate_add,
    aggregate_merge,
    aggregate_percentile,
    new_aggregate,
)
from learning.dataflow import trace_reconstruct
from learning.inference import (
    apply_drift,
    contract_drift,
    drift_fingerprint,
    infer_contract,
    suggest_risk,
)


def trace(n, *, before, after=None, args=None, status="success", duration=100):
    return {
        "trace_id": f"t{n}",
        "step": 0,
        "status": status,
        "state_before": before,
        "state_after": before if after is None else after,
        "args": args or {},
        "duration_ms": duration,
    }


def infer(traces, **kwargs):
    aggregate = new_aggregate()
    for item in traces:
        aggregate_add(aggregate, item)
    kwargs.setdefault("name", "calendar.get_event")
    kwargs.setdefault("description", "Read one calendar event.")
    return infer_contract(
        input_schema=kwargs.pop("input_schema", None), aggregate=aggregate, **kwargs
    )


def test_it_finds_requires_from_values_flowing_into_arguments():
    traces = [
        trace(i, before={"event_id": f"evt_{i}", "user_id": "u_1"},
              after={"event_id": f"evt_{i}", "user_id": "u_1", "event_details": "..."},
              args={"id": f"evt_{i}"})
        for i in range(20)
    ]  # fmt: skip
    inferred = infer(traces)
    assert inferred["requires"] == ["event_id"]
    assert inferred["produces"] == ["event_details"]
    assert inferred["support"] == 20


def test_it_searches_nested_lists_and_objects():
    traces = [
        trace(i, before={"attendee_email": f"a{i}@example.com"},
              after={"attendee_email": f"a{i}@example.com", "invite_id": f"inv{i}"},
              args={"attendees": [{"email": f"a{i}@example.com", "optional": False}]})
        for i in range(10)
    ]  # fmt: skip
    assert infer(traces)["requires"] == ["attendee_email"]


def test_an_always_present_variable_that_never_flows_is_not_required():
    traces = [
        trace(i, before={"query": f"q-{i}", "user_id": "u_1", "locale": "en-GB"},
              after={"query": f"q-{i}", "user_id": "u_1", "locale": "en-GB", "result": "r"},
              args={"q": f"q-{i}"})
        for i in range(20)
    ] + [trace(99, before={"query": "q-x", "user_id": "u_1", "locale": "en-GB"},
               args={"q": "q-x"}, status="error")]  # fmt: skip
    assert infer(traces)["requires"] == ["query"]


def test_a_boolean_or_short_value_does_not_count_as_flow():
    traces = [
        trace(i, before={"flag": True, "code": "ok", "query": f"long query {i}"},
              after={"flag": True, "code": "ok", "query": f"long query {i}", "out": "x"},
              args={"flag": True, "code": "ok", "q": f"long query {i}"})
        for i in range(10)
    ]  # fmt: skip
    assert infer(traces)["requires"] == ["query"]


def test_a_variable_feeding_an_optional_argument_is_not_required():
    traces = [
        trace(i, before={"query": f"q-{i}", "timezone": "Europe/Paris"},
              after={"query": f"q-{i}", "timezone": "Europe/Paris", "hits": "h"},
              args={"q": f"q-{i}", **({"tz": "Europe/Paris"} if i % 3 == 0 else {})})
        for i in range(30)
    ]  # fmt: skip
    inferred = infer(traces)
    assert inferred["requires"] == ["query"]
    assert inferred["input_schema"]["required"] == ["q"]
    assert set(inferred["input_schema"]["properties"]) == {"q", "tz"}


def test_a_hidden_precondition_shows_through_failures():
    ok = [
        trace(i, before={"query": f"q-{i}", "session": f"s-{i}"},
              after={"query": f"q-{i}", "session": f"s-{i}", "hits": "h"}, args={"q": f"q-{i}"})
        for i in range(20)
    ]  # fmt: skip
    failed = [trace(100 + i, before={"query": f"q-{i}"}, args={"q": f"q-{i}"}, status="error")
              for i in range(5)]  # fmt: skip
    inferred = infer(ok + failed)
    assert inferred["requires"] == ["query", "session"]
    # the precondition is evidence for the risk labels model (learning.risk, rule 5)
    assert inferred["evidence"]["gated"] == ["session"]
    assert any(item["kind"] == "observed" and item["signal"] == "gated"
               for item in inferred["evidence"]["risk"])  # fmt: skip
    # counter-example: failures that have the variable say nothing against it
    failed_with = [
        trace(200 + i, before={"query": f"q-{i}", "session": "s"}, args={"q": f"q-{i}"},
              status="error")
        for i in range(5)
    ]  # fmt: skip
    assert infer(ok + failed_with)["requires"] == ["query"]
    assert infer(ok + failed_with)["evidence"]["gated"] == []


def test_a_conditional_effect_is_an_effect_and_an_incidental_one_is_not():
    traces = []
    for i in range(40):
        after = {"query": f"q-{i}"}
        if i % 10 < 7:  # found something 70% of the time
            after["event_id"] = f"evt_{i}"
        if i == 5:  # once in forty calls
            after["debug_token"] = "dbg"
        traces.append(trace(i, before={"query": f"q-{i}"}, after=after, args={"q": f"q-{i}"}))
    assert infer(traces)["produces"] == ["event_id"]


def test_it_types_the_schema_and_reports_conflicts():
    traces = [
        trace(i, before={}, args={"limit": 10 if i % 2 else 2.5, "q": "abc"}) for i in range(6)
    ]
    schema = infer(traces, input_schema={"properties": {"q": {"description": "Query"}}})[
        "input_schema"
    ]
    assert schema["properties"]["limit"]["type"] == "number"
    # A declared argument keeps its declaration: the calls fit it.
    assert schema["properties"]["q"] == {"description": "Query"}
    mixed = [trace(i, before={}, args={"v": "x" if i % 2 else 1}) for i in range(4)]
    assert sorted(infer(mixed)["input_schema"]["properties"]["v"]["type"]) == ["integer", "string"]


def test_cost_comes_from_the_histogram_and_errors():
    traces = [trace(i, before={}, duration=100) for i in range(90)]
    traces += [trace(100 + i, before={}, duration=1000, status="error") for i in range(10)]
    cost = infer(traces)["cost"]
    assert 93 <= cost["latency_ms_p50"] <= 107
    assert 930 <= cost["latency_ms_p95"] <= 1070
    assert cost["error_rate"] == 0.1


def test_percentiles_stay_within_the_bucket_error():
    aggregate = new_aggregate()
    for value in range(1, 1001):
        aggregate_add(aggregate, trace(value, before={}, duration=value))
    assert abs(aggregate_percentile(aggregate, 50) - 500) / 500 < 0.08
    assert abs(aggregate_percentile(aggregate, 95) - 950) / 950 < 0.08
    assert aggregate_percentile(new_aggregate(), 50) is None


def test_merging_equals_folding_everything_at_once():
    rng = random.Random(3)
    traces = [
        trace(i, before={"a": f"value-{i}", "b": "constant"},
              after={"a": f"value-{i}", "b": "constant",
                     **({"c": "x"} if rng.random() < 0.5 else {})},
              args={"a": f"value-{i}"}, status=rng.choice(["success", "error"]),
              duration=rng.randrange(1, 5000))
        for i in range(200)
    ]  # fmt: skip
    whole = new_aggregate()
    for item in traces:
        aggregate_add(whole, item)
    for _ in range(5):
        left, right = new_aggregate(), new_aggregate()
        for item in traces:
            aggregate_add(left if rng.random() < 0.5 else right, item)
        aggregate_merge(left, right)
        # Examples are a few of many: which few depends on the order traces arrive in.
        examples = {"variables", "source_examples", "error_examples"}
        assert {k: v for k, v in left.items() if k not in examples} == {
            k: v for k, v in whole.items() if k not in examples
        }
        errors = {item["trace_id"] for item in traces if item["status"] == "error"}
        assert len(left["error_examples"]) == 5 and set(left["error_examples"]) <= errors
        assert len(left["source_examples"]["operator"]) == 5
        for name, entry in whole["variables"].items():
            sampled = {"examples", "routes"}
            assert {k: v for k, v in left["variables"][name].items() if k not in sampled} == {
                k: v for k, v in entry.items() if k not in sampled
            }
            assert _route_counts(left["variables"][name]) == _route_counts(entry)


def _route_counts(entry: dict) -> dict:
    return {route: counted["count"] for route, counted in entry.get("routes", {}).items()}


def test_an_aggregate_stays_bounded_under_many_distinct_names():
    aggregate = new_aggregate()
    for i in range(2000):
        aggregate_add(
            aggregate,
            trace(i, before={f"v{i}": f"value-{i}"}, args={f"arg{i}": 1}, after={f"w{i}": 1}),
        )
    assert len(aggregate["variables"]) == MAX_VARIABLES
    assert len(aggregate["args"]) == MAX_ARGS
    assert aggregate["overflow"] > 0


def test_risk_is_learned_from_the_registrys_own_labels():
    labelled = [
        {"name": "mail.read_message", "description": "Read an email message", "risk": "medium"},
        {"name": "mail.read_thread", "description": "Read an email thread", "risk": "medium"},
        {"name": "calendar.read_event", "description": "Read a calendar event", "risk": "low"},
    ]
    risk = suggest_risk(name="mail.read_draft", description="Read an email draft",
                        produces=[], permissions=[], labelled=labelled).risk  # fmt: skip
    assert risk == "medium"
    risk = suggest_risk(name="files.delete_file", description="Delete a file",
                        produces=[], permissions=[], labelled=labelled).risk  # fmt: skip
    assert risk == "high"  # no labelled tool deletes: the danger class speaks


APPROVED = {
    "name": "payments.refund_charge",
    "requires": ["charge_id"],
    "produces": ["refund_id"],
    "risk": "high",
    "input_schema": {
        "type": "object",
        "properties": {"charge_id": {"type": "string"}},
        "required": ["charge_id"],
        "additionalProperties": False,
    },
    "cost": {"error_rate": 0.02},
}


def inferred(**changes):
    document = {
        "requires": ["charge_id"],
        "produces": ["refund_id"],
        "risk": "high",
        "input_schema": {
            "type": "object",
            "properties": {"charge_id": {"type": "string"}},
            "required": ["charge_id"],
        },
        "cost": {"error_rate": 0.02, "latency_ms_p50": 80.0, "latency_ms_p95": 200.0},
    }
    document.update(changes)
    return document


def test_no_drift_when_behaviour_matches():
    assert contract_drift(approved=APPROVED, inferred=inferred()) == []


def test_drift_in_requires_produces_and_schema():
    items = contract_drift(
        approved=APPROVED,
        inferred=inferred(
            requires=["approval_code", "charge_id"],
            produces=["refund_id", "refund_receipt_url"],
            input_schema={
                "type": "object",
                "properties": {
                    "charge_id": {"type": "integer"},
                    "approval_code": {"type": "string"},
                },
                "required": ["approval_code"],
            },
            cost={"error_rate": 0.4},
        ),
    )
    fields = [item["field"] for item in items]
    assert fields.count("input_schema") == 3  # unknown argument, type conflict, required dropped
    assert {"requires", "produces"} <= set(fields)
    # How well the tool does is judged against a baseline elsewhere (learning/baselines.py).
    assert "error_rate" not in fields
    requires = next(item for item in items if item["field"] == "requires")
    assert requires["added"] == ["approval_code"] and requires["removed"] == []


def test_a_lower_inferred_risk_is_never_drift_and_a_higher_one_is():
    assert contract_drift(approved=APPROVED, inferred=inferred(risk="low")) == []
    low = {**APPROVED, "risk": "low"}
    assert [i["field"] for i in contract_drift(approved=low, inferred=inferred(risk="high"))] == [
        "risk"
    ]


def test_the_fingerprint_ignores_counts_and_order():
    items = contract_drift(approved=APPROVED, inferred=inferred(produces=["refund_id", "x_url"]))
    again = [dict(item, detail="seen 500 times") for item in reversed(items)]
    assert drift_fingerprint("t@v1", items) == drift_fingerprint("t@v1", again)
    assert drift_fingerprint("t@v1", items) != drift_fingerprint("t@v2", items)


def test_apply_drift_replaces_only_the_drifted_fields():
    observed = inferred(produces=["refund_id", "refund_receipt_url"], risk="low")
    items = contract_drift(approved=APPROVED, inferred=observed)
    proposal = apply_drift(APPROVED, observed, items)
    assert proposal["produces"] == ["refund_id", "refund_receipt_url"]
    assert proposal["risk"] == "high"  # not drift: a person's label stays
    assert APPROVED["produces"] == ["refund_id"]  # the approved document is not touched


def test_apply_drift_proposes_the_measured_cost_whatever_drifted():
    observed = inferred(
        produces=["refund_id", "refund_receipt_url"],
        cost={"error_rate": 0.09, "latency_ms_p50": 380.0, "latency_ms_p95": 1336.4},
    )
    items = contract_drift(approved=APPROVED, inferred=observed)
    assert "error_rate" not in {item["field"] for item in items}  # below the jump
    proposal = apply_drift(APPROVED, observed, items)
    assert proposal["cost"] == {
        "error_rate": 0.09,
        "latency_ms_p50": 380.0,
        "latency_ms_p95": 1336.4,
    }
    assert APPROVED["cost"] == {"error_rate": 0.02}


def test_apply_drift_keeps_a_declared_figure_the_traces_did_not_measure():
    observed = inferred(
        produces=["refund_id", "refund_receipt_url"],
        cost={"error_rate": 0.02, "latency_ms_p50": None, "latency_ms_p95": None},
    )
    approved = {**APPROVED, "cost": {"error_rate": 0.02, "latency_ms_p95": 900}}
    proposal = apply_drift(approved, observed, contract_drift(approved=approved, inferred=observed))
    assert proposal["cost"] == {"error_rate": 0.02, "latency_ms_p95": 900}


DECLARED = {
    "type": "object",
    "properties": {
        "charge_id": {"type": "string", "pattern": "^ch_[a-z0-9]+$"},
        "reason": {"type": "string", "enum": ["duplicate", "fraud"]},
        "amount": {"type": "integer"},
    },
    "required": ["charge_id", "reason"],
    "additionalProperties": False,
}


def test_the_inferred_schema_is_the_declared_one_merged_with_the_calls():
    traces = [
        trace(
            i,
            before={},
            args={"charge_id": f"ch_{i}abc", "amount": 2.5, "note": "n"}
            | ({"reason": "fraud"} if i % 2 else {}),
        )
        for i in range(6)
    ]
    schema = infer(traces, input_schema=DECLARED)["input_schema"]
    properties = schema["properties"]
    # Pattern and enum stay as declared; a type the calls broke is widened; a new argument
    # comes in optional; a required argument not always sent becomes optional.
    assert properties["charge_id"] == DECLARED["properties"]["charge_id"]
    assert properties["reason"] == DECLARED["properties"]["reason"]
    assert properties["amount"] == {"type": ["integer", "number"]}
    assert properties["note"] == {"type": "string"}
    assert schema["required"] == ["charge_id"]
    assert schema["additionalProperties"] is False
    assert DECLARED["required"] == ["charge_id", "reason"]  # the declaration is not touched


def test_the_ticket_proposes_the_schema_the_tool_page_shows():
    traces = [
        trace(i, before={}, args={"charge_id": f"ch_{i}abc", "reason": "fraud", "note": "n"})
        for i in range(6)
    ]
    approved = {**APPROVED, "input_schema": DECLARED}
    observed = infer(traces, input_schema=DECLARED)
    items = contract_drift(approved=approved, inferred=observed)
    assert "input_schema" in {item["field"] for item in items}  # "note" is undeclared
    proposal = apply_drift(approved, observed, items)
    assert proposal["input_schema"] == observed["input_schema"]
    assert proposal["input_schema"]["properties"]["reason"]["enum"] == ["duplicate", "fraud"]
    assert proposal["input_schema"]["required"] == ["charge_id", "reason"]


def test_apply_drift_keeps_an_approved_figure_measured_again_within_noise():
    observed = inferred(
        produces=["refund_id", "refund_receipt_url"],
        cost={"error_rate": 0.021, "latency_ms_p50": 379.9, "latency_ms_p95": 2000.0},
    )
    approved = {
        **APPROVED,
        "cost": {"error_rate": 0.02, "latency_ms_p50": 380, "latency_ms_p95": 900},
    }
    proposal = apply_drift(approved, observed, contract_drift(approved=approved, inferred=observed))
    assert proposal["cost"] == {"error_rate": 0.02, "latency_ms_p50": 380, "latency_ms_p95": 2000.0}


def test_a_required_argument_needs_its_values_to_flow_in_fewer_calls():
    # The value flowed in 4 of 10 calls (the others' were derived: a date written out).
    traces = [
        trace(i, before={"travel_date": f"2026-12-{i + 10}"} if i < 4 else {},
              args={"travel_date": f"2026-12-{i + 10}", "cabin": f"c{i}"})
        for i in range(10)
    ]  # fmt: skip
    required = {"type": "object", "properties": {"travel_date": {"type": "string"},
                "cabin": {"type": "string"}}, "required": ["travel_date"]}  # fmt: skip
    assert infer(traces, input_schema=required)["requires"] == ["travel_date"]
    optional = {**required, "required": []}
    assert infer(traces, input_schema=optional)["requires"] == []


def _searches(used: int, calls: int, value: str) -> dict:
    """A search's aggregate over ``calls`` traces, each bringing a new result; in ``used``
    of them a later call takes it (``value``: how a result reads)."""
    aggregate = new_aggregate()
    for n in range(calls):
        result = value.format(n=n)
        steps = [
            {"trace_id": f"t{n}", "tool": "search", "args": {"q": "lamp"}, "status": "success",
             "output": {"results": [result]}},
            {"trace_id": f"t{n}", "tool": "send", "args": {"body": result}, "status": "success",
             "output": {"sent": True}},
        ][: 2 if n < used else 1]  # fmt: skip
        flow = trace_reconstruct(steps).steps[0]
        aggregate_add(aggregate, {**steps[0], "dataflow": flow})
    return aggregate


def test_an_output_path_that_brought_a_variable_in_some_traces_brings_it_in_every_call():
    def produces(aggregate):
        return infer_contract(
            name="search", description="Search items.", input_schema=None, aggregate=aggregate
        )["produces"]

    # 3 of 12 calls' results were used (0.25, below produces_ratio), all 12 were new results.
    assert produces(_searches(3, 12, "item_{n:05d}")) == ["body"]
    # Evidence in fewer than min_count traces generalises to nothing.
    assert produces(_searches(2, 12, "item_{n:05d}")) == []
    # The evidence says on how many calls the effect was judged, beside the traces showing it.
    routes = infer_contract(
        name="search", description="Search items.", input_schema=None,
        aggregate=_searches(3, 12, "item_{n:05d}"),
    )["evidence"]["dataflow"]["produces"]["body"]  # fmt: skip
    assert [(r["route"], r["traces"], r["new_values"]) for r in routes] == [
        ("output.results[]", 3, 12)
    ]
    # Text passed on (a result sent as a message body) is the caller's choice, not the path's.
    assert produces(_searches(3, 12, "Dear customer, item {n} is ready")) == []


def test_new_values_per_output_path_merge_by_addition():
    whole, more = _searches(3, 12, "item_{n:05d}"), _searches(0, 5, "other_{n:05d}")
    aggregate_merge(whole, more)
    assert whole["new_paths"] == {"output.results[]": 17}
