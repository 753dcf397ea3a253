"""A null for an optional property reads as absent: an OpenAI strict call passes straight through
plan validation (pure: no database)."""

import pytest

from api import exports
from api.planning import SchemaTooCostly, absent_nulls_dropped, validate_plan
from registry.jsonschema_re2 import WorkBudgetExceeded, work_budget

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "order": {"type": "string", "enum": ["asc", "desc"]},
        "label": {"type": ["string", "null"]},
        "filters": {
            "type": "object",
            "properties": {"owner": {"type": "string"}, "tag": {"type": "string"}},
            "required": ["owner"],
            "additionalProperties": False,
        },
        "people": {"type": "array", "items": {"$ref": "#/$defs/person"}},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "person": {
            "type": "object",
            "properties": {"email": {"type": "string"}, "name": {"type": "string"}},
            "required": ["email"],
            "additionalProperties": False,
        }
    },
}


def check(args, schema=SCHEMA):
    contract = {"name": "search", "input_schema": schema}
    return validate_plan(plan=[{"tool": "search", "args": args}], contracts={"search": contract},
                         policy=None)  # fmt: skip


def test_it_reads_a_null_for_an_optional_property_as_absent():
    result = check({"query": "q", "limit": None, "order": None})

    assert result["valid"] is True, result["violations"]
    assert result["violations"] == []
    assert result["plan"][0]["args"] == {"query": "q"}


def test_it_still_rejects_a_null_for_a_required_property():
    result = check({"query": None, "limit": None})

    assert result["valid"] is False
    assert [v["rule"] for v in result["violations"]] == ["args.query: None is not of type 'string'"]
    assert result["plan"][0]["args"] == {"query": None}


def test_it_keeps_a_null_the_property_accepts():
    result = check({"query": "q", "label": None})

    assert result["valid"] is True
    assert result["plan"][0]["args"] == {"query": "q", "label": None}


def test_it_drops_nulls_in_nested_objects_and_list_items_through_refs():
    args = {
        "query": "q",
        "filters": {"owner": "ann", "tag": None},
        "people": [{"email": "a@example.com", "name": None}, {"email": "b@example.com"}],
    }

    result = check(args)

    assert result["valid"] is True, result["violations"]
    assert result["plan"][0]["args"] == {
        "query": "q",
        "filters": {"owner": "ann"},
        "people": [{"email": "a@example.com"}, {"email": "b@example.com"}],
    }
    assert args["filters"] == {"owner": "ann", "tag": None}  # the caller's copy is untouched


def test_a_nested_required_property_given_null_is_still_an_error():
    result = check({"query": "q", "filters": {"owner": None}})

    assert result["valid"] is False
    assert result["violations"][0]["rule"] == "args.filters.owner: None is not of type 'string'"


def test_an_unknown_property_given_null_is_still_refused():
    result = check({"query": "q", "colour": None})

    assert result["valid"] is False
    assert "colour" in result["violations"][0]["rule"]


def test_inside_any_of_the_value_takes_the_alternative_it_satisfies_without_its_nulls():
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "anyOf": [
                    {"type": "object", "properties": {"user": {"type": "string"},
                     "note": {"type": "string"}}, "required": ["user"],
                     "additionalProperties": False},
                    {"type": "object", "properties": {"group": {"type": "string"},
                     "note": {"type": "string"}}, "required": ["group"],
                     "additionalProperties": False},
                ]
            }
        },
        "required": ["target"],
        "additionalProperties": False,
    }  # fmt: skip

    result = check({"target": {"group": "ops", "note": None}}, schema)

    assert result["valid"] is True, result["violations"]
    assert result["plan"][0]["args"] == {"target": {"group": "ops"}}


def test_a_strict_call_made_from_the_strict_export_passes_straight_through():
    strict = exports.strict_schema(SCHEMA)
    # What a strict model sends: every property, null for those it leaves out.
    call = {
        "query": "q",
        "limit": None,
        "order": None,
        "label": None,
        "filters": {"owner": "ann", "tag": None},
        "people": None,
    }
    from jsonschema import Draft202012Validator

    assert list(Draft202012Validator(strict).iter_errors(call)) == []
    result = check(call)
    assert result["valid"] is True, result["violations"]
    assert result["plan"][0]["args"] == {"query": "q", "label": None, "filters": {"owner": "ann"}}


def test_invariants_see_a_dropped_null_as_absent():
    contract = {
        "name": "search",
        "input_schema": SCHEMA,
        "invariants": [
            {"id": "limit-needs-order", "rule": "A limit needs an order.",
             "kind": "requires_arg_when", "params": {"when": "limit", "arg": "order"},
             "action": "reject"},
        ],
    }  # fmt: skip
    plan = [{"tool": "search", "args": {"query": "q", "limit": None, "order": None}}]

    result = validate_plan(plan=plan, contracts={"search": contract}, policy=None)

    assert result["valid"] is True, result["violations"]


def alternatives_in_alternatives(depth: int) -> tuple[dict, dict]:
    """A schema of ``depth`` nested levels of two alternatives each, and a value that makes
    every level try both: 2^depth trials without a budget. Levels are ``$defs`` that refer to
    the one below, so the schema's text stays small, as stored schemas are."""
    definitions: dict = {
        "d0": {"type": "object", "properties": {"x": {"type": "string"}},
               "additionalProperties": False},
    }  # fmt: skip
    for n in range(1, depth + 1):
        below = {"$ref": f"#/$defs/d{n - 1}"}
        definitions[f"d{n}"] = {
            "anyOf": [
                {"type": "object", "properties": {"a": below, "z": {"type": "integer"}},
                 "required": ["z"], "additionalProperties": False},
                {"type": "object", "properties": {"a": below, "y": {"type": "string"}},
                 "additionalProperties": False},
            ]
        }  # fmt: skip
    value: dict = {"x": None}
    for _ in range(depth):
        value = {"a": value}
    schema = {
        "type": "object",
        "$defs": definitions,
        "properties": {"v": {"$ref": f"#/$defs/d{depth}"}},
        "additionalProperties": False,
    }
    return schema, value


def test_trying_alternatives_is_paid_from_the_work_budget():
    schema, value = alternatives_in_alternatives(12)
    with pytest.raises(WorkBudgetExceeded), work_budget(2_000):
        absent_nulls_dropped(schema, {"v": value})


def test_a_plan_whose_alternatives_need_more_than_its_budget_is_too_costly():
    schema, value = alternatives_in_alternatives(12)
    with pytest.raises(SchemaTooCostly):
        contracts = {"t": {"name": "t", "input_schema": schema}}
        validate_plan(plan=[{"tool": "t", "args": {"v": value}}], contracts=contracts, policy=None)


def test_it_returns_the_same_args_when_there_is_no_null():
    args = {"query": "q"}
    assert absent_nulls_dropped(SCHEMA, args) is args
