"""Output contracts: checking a successful call's output, bounded, and counting it by path."""

from learning.aggregates import MAX_OUTPUT_PATHS, aggregate_add, aggregate_merge, new_aggregate
from learning.outputs import output_checker, output_schema_proposal

SCHEMA = {
    "type": "object",
    "properties": {
        "refund_id": {"type": "string", "pattern": "^re_[0-9]+$", "description": "The refund."},
        "refund_status": {"type": "string", "enum": ["succeeded", "pending"]},
        "lines": {"type": "array", "items": {"type": "object", "required": ["amount"]}},
    },
    "required": ["refund_id"],
}


def check(output, state_after=None, *, schema=SCHEMA, produces=("refund_id",)):
    checker = output_checker(schema=schema, produces=produces)
    assert checker is not None
    return checker(output, {"refund_id": "re_1"} if state_after is None else state_after)


def test_a_matching_output_has_no_violation():
    assert check({"refund_id": "re_1", "refund_status": "pending"}) == {
        "paths": [],
        "missing": [],
        "unchecked": "",
    }


def test_violations_are_named_by_path_and_keyword_with_list_positions_collapsed():
    result = check(
        {
            "refund_id": "x",
            "refund_status": "lost",
            "lines": [{"amount": 1}, {}, {"note": "no amount"}],
        }
    )
    assert result["paths"] == [
        "output.lines[] (required)",
        "output.refund_id (pattern)",
        "output.refund_status (enum)",
    ]


def test_a_missing_output_and_a_missing_produced_variable_are_violations():
    result = check(None, state_after={})
    assert result["paths"] == ["output (type)"]
    assert result["missing"] == ["refund_id"]


def test_an_output_too_costly_to_check_is_counted_unchecked_not_violating():
    huge = {"refund_id": "re_1", "lines": [{"amount": n} for n in range(20_000)]}
    result = check(huge)
    assert result["unchecked"] == "too costly to check" and result["paths"] == []


def test_a_pattern_the_linear_engine_cannot_run_leaves_outputs_unchecked():
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}
    result = check({"a": "aa"}, schema=schema, produces=())
    assert result["unchecked"].startswith("cannot check") and result["paths"] == []


def test_a_contract_promising_nothing_is_not_checked():
    assert output_checker(schema=None, produces=[]) is None
    assert output_checker(schema=None, produces=["refund_id"]) is not None


def fold(checks: list[dict]) -> dict:
    aggregate = new_aggregate()
    for n, result in enumerate(checks):
        aggregate_add(
            aggregate,
            {"trace_id": f"t{n}", "status": "success", "output": {"refund_id": n},
             "output_check": result},
        )  # fmt: skip
    return aggregate


def test_aggregates_count_failures_by_path_bounded_and_merge_by_addition():
    checks = [{"paths": [f"output.k{n} (type)"], "missing": [], "unchecked": ""} for n in range(80)]
    aggregate = fold(checks)
    outputs = aggregate["outputs"]
    assert outputs["checked"] == outputs["failed"] == 80
    assert len(outputs["paths"]) == MAX_OUTPUT_PATHS + 1  # the rest under "(other paths)"
    assert outputs["paths"]["(other paths)"] == 80 - MAX_OUTPUT_PATHS
    assert outputs["keys"]["refund_id"] == {"count": 80, "types": {"integer": 80}}
    merged = new_aggregate()
    aggregate_merge(merged, aggregate)
    aggregate_merge(merged, fold([{"paths": [], "missing": ["x"], "unchecked": "too costly"}]))
    assert merged["outputs"]["checked"] == 80 and merged["outputs"]["unchecked"] == 1


def test_the_proposed_output_schema_follows_what_outputs_show():
    outputs = {
        "checked": 10,
        "paths": {"output.refund_id (pattern)": 4, "output (additionalProperties)": 2},
        "keys": {
            "refund_id": {"count": 10, "types": {"integer": 10}},
            "refund_status": {"count": 6, "types": {"string": 6}},
            "receipt_url": {"count": 10, "types": {"string": 10}},
        },
        "roots": {"object": 10},
    }
    proposal = output_schema_proposal(SCHEMA, outputs)
    properties = proposal["properties"]
    assert properties["refund_id"] == {"type": "integer", "description": "The refund."}
    assert properties["refund_status"] == SCHEMA["properties"]["refund_status"]  # never failed
    assert properties["receipt_url"] == {"type": "string"}
    assert proposal["required"] == ["refund_id"]
    assert SCHEMA["properties"]["refund_id"]["type"] == "string"  # the approved one untouched


def test_once_the_batch_budget_is_spent_the_remaining_outputs_are_unchecked():
    from registry.jsonschema_re2 import work_budget

    checker = output_checker(schema=SCHEMA, produces=[])
    with work_budget(40):  # as output_batch_budget does for a whole ingest batch
        results = [
            checker({"refund_id": "re_1", "refund_status": "pending"}, {}) for _ in range(20)
        ]
    assert results[0] == {"paths": [], "missing": [], "unchecked": ""}
    assert results[-1]["unchecked"] == "the batch's checking budget was spent"
