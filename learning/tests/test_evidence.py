"""What a drift item rests on, and where inferred and approved contracts differ. Pure."""

from learning.aggregates import aggregate_add, new_aggregate
from learning.evidence import contract_differences, drift_item_support


def folded(traces):
    aggregate = new_aggregate()
    for trace in traces:
        aggregate_add(aggregate, trace)
    return aggregate


TRACES = [
    {
        "trace_id": f"run-{n}",
        "status": "success" if n % 4 else "error",
        "state_before": {"charge_id": "ch_1234", **({"approval_code": "apc-99"} if n % 2 else {})},
        "state_after": {"charge_id": "ch_1234", "refund_id": f"re_{n}"},
        "args": {"charge_id": "ch_1234", **({"approval_code": "apc-99"} if n % 2 else {})},
    }
    for n in range(12)
]


def test_it_counts_a_new_requirement_among_successful_calls_with_examples():
    aggregate = folded(TRACES)
    item = drift_item_support(
        {"field": "requires", "added": ["approval_code"], "removed": []}, aggregate
    )
    successes_with_code = sum(1 for n in range(12) if n % 4 and n % 2)
    assert item["counts"] == {"approval_code": successes_with_code}
    assert item["total"] == 9 and item["total_of"] == "successful calls"
    assert item["example_trace_ids"] and set(item["example_trace_ids"]) <= {
        f"run-{n}" for n in range(12) if n % 2
    }


def test_it_counts_an_undeclared_argument_among_all_calls_and_errors_for_the_rate():
    aggregate = folded(TRACES)
    argument = drift_item_support({"field": "input_schema", "added": ["approval_code"]}, aggregate)
    assert argument["counts"] == {"approval_code": 6} and argument["total"] == 12
    rate = drift_item_support({"field": "error_rate", "added": [], "removed": []}, aggregate)
    assert rate["counts"] == {"errors": 3} and rate["total"] == 12
    assert "example_trace_ids" not in rate


def test_it_leaves_the_item_it_was_given_untouched():
    item = {"field": "produces", "added": ["x"], "removed": []}
    drift_item_support(item, new_aggregate())
    assert item == {"field": "produces", "added": ["x"], "removed": []}


APPROVED = {
    "input_schema": {"properties": {"a": {}}, "required": ["a"]},
    "requires": ["x"],
    "produces": ["y"],
    "risk": "low",
    "cost": {"latency_ms_p50": 100, "latency_ms_p95": 400, "error_rate": 0.02},
}


def test_an_inferred_contract_measured_again_does_not_differ():
    inferred = {**APPROVED, "cost": {"latency_ms_p50": 110, "latency_ms_p95": 380,
                                     "error_rate": 0.05}}  # fmt: skip
    assert contract_differences(APPROVED, inferred) == []


def test_it_names_each_field_that_differs():
    inferred = {
        "input_schema": {"properties": {"a": {}, "b": {}}, "required": ["a"]},
        "requires": ["x"],
        "produces": ["y", "z"],
        "risk": "high",
        "cost": {"latency_ms_p95": 900},
    }
    assert contract_differences(APPROVED, inferred) == [
        "input_schema", "produces", "risk", "cost"
    ]  # fmt: skip
    assert contract_differences(None, inferred) == ["input_schema", "requires", "produces", "risk"]
