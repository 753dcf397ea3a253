"""The declarative invariant kinds, policy rules and config params: what is well formed."""

import pytest

from registry.invariants import (
    INVARIANT_ACTIONS,
    NORMALIZERS,
    POLICY_RULE_ACTIONS,
    config_param_errors,
    invariant_errors,
    normalize_config_value,
    policy_rule_errors,
    resolve_config,
)


def invariant(**overrides):
    spec = {
        "id": "subquestion-id-xor-ids",
        "rule": "A step cannot use both subquestion_id and subquestion_ids.",
        "kind": "mutually_exclusive",
        "params": {"args": ["subquestion_id", "subquestion_ids"]},
        "action": "reject",
    }
    spec.update(overrides)
    return spec


def rule(**overrides):
    spec = {
        "id": "retrieve-and-cite",
        "rule": "A medical plan must include a retrieval_llm and a source_link_retrieval step.",
        "kind": "must_include",
        "params": {"tools": ["retrieval_llm", "source_link_retrieval"]},
        "action": "reject",
    }
    spec.update(overrides)
    return spec


WELL_FORMED_INVARIANTS = [
    invariant(),
    invariant(kind="mutually_exclusive", params={"args": ["a", "b", "c"]}, action="drop"),
    invariant(
        kind="requires_arg_when",
        params={"when": "subquestion_ids", "arg": "web_search", "value": True},
        action="correct",
    ),
    invariant(kind="requires_arg_when", params={"when": "a", "arg": "b"}, action="reject"),
    invariant(kind="max_per_plan", params={"max": 1, "when": "subquestion_ids"}, action="drop"),
    invariant(kind="max_per_plan", params={"max": 3}, action="reject"),
    invariant(kind="unique_calls", params={"fields": ["query", "web_search"]}, action="drop"),
]


@pytest.mark.parametrize("spec", WELL_FORMED_INVARIANTS, ids=lambda spec: spec["kind"])
def test_it_accepts_well_formed_invariants(spec):
    assert invariant_errors(spec) == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("not an object", "must be an object with id, rule, kind, params and action"),
        (invariant(id="Not A Slug"), "id: must be a slug"),
        (invariant(id=""), "id: must be a slug"),
        (invariant(id="x" * 65), "id: must be a slug"),
        (invariant(rule="   "), "rule: must be non-empty text"),
        (invariant(rule=None), "rule: must be non-empty text"),
        (invariant(kind="nonsense"), "kind: must be one of mutually_exclusive, requires_arg_when"),
        (invariant(kind=["unhashable"]), "kind: must be one of"),
        (invariant(action="explode"), "action: must be one of reject, correct, drop"),
        (invariant(params=None), "params: must be an object"),
        (invariant(extra=1), "extra: unknown field"),
        (
            invariant(params={"args": ["only_one"]}),
            "params.args: must be a list of at least two argument names",
        ),
        (
            invariant(params={"args": "subquestion_id"}),
            "params.args: must be a list of at least two argument names",
        ),
        (invariant(params={"args": ["a", 3]}), "params.args: must be a list of at least two"),
        (invariant(params={"args": ["a", "a"]}), "params.args: lists 'a' twice"),
        (
            invariant(params={"args": ["a", "b"], "also": 1}),
            "params.also: unknown parameter of mutually_exclusive",
        ),
        (
            invariant(action="correct"),
            "action: 'correct' is not defined for mutually_exclusive; use one of reject, drop",
        ),
        (
            invariant(kind="requires_arg_when", params={"arg": "b"}),
            "params.when: must be an argument name",
        ),
        (
            invariant(kind="requires_arg_when", params={"when": "a", "arg": ""}),
            "params.arg: must be an argument name",
        ),
        (
            invariant(kind="requires_arg_when", params={"when": "a", "arg": "a"}),
            "params.arg: must differ from params.when",
        ),
        (
            invariant(kind="requires_arg_when", params={"when": "a", "arg": "b"}, action="correct"),
            "params.value: 'correct' needs the value to set",
        ),
        (
            invariant(kind="requires_arg_when", params={"when": "a", "arg": "b", "value": None}),
            "params.value: must not be null",
        ),
        (
            invariant(kind="max_per_plan", params={"max": 0}),
            "params.max: must be a whole number of at least 1",
        ),
        (
            invariant(kind="max_per_plan", params={"max": True}),
            "params.max: must be a whole number of at least 1",
        ),
        (
            invariant(kind="max_per_plan", params={"max": 1.5}),
            "params.max: must be a whole number of at least 1",
        ),
        (
            invariant(kind="max_per_plan", params={"max": 1, "when": 7}),
            "params.when: must be an argument name",
        ),
        (
            invariant(kind="max_per_plan", params={"max": 1}, action="correct"),
            "action: 'correct' is not defined for max_per_plan",
        ),
        (
            invariant(kind="unique_calls", params={"fields": []}),
            "params.fields: must be a non-empty list of argument names",
        ),
        (
            invariant(kind="unique_calls", params={"fields": ["q"]}, action="correct"),
            "action: 'correct' is not defined for unique_calls",
        ),
        (invariant(kind="must_include"), "kind: must be one of"),
    ],
)
def test_it_names_the_field_of_each_invariant_problem(spec, message):
    errors = invariant_errors(spec)

    assert any(error.startswith(message) for error in errors), errors


def test_it_reports_every_problem_of_an_invariant_at_once():
    errors = invariant_errors({"id": "X", "rule": "", "kind": "nope", "params": [], "action": "?"})

    assert [error.split(":")[0] for error in errors] == ["id", "rule", "kind", "action", "params"]


@pytest.mark.parametrize(
    "spec",
    [
        rule(),
        rule(
            action="correct",
            params={
                "tools": ["retrieval_llm"],
                "args": {"retrieval_llm": {"query": "statin dosing"}},
            },
        ),
        rule(kind="max_steps", params={"max": 12}, action="drop"),
        rule(kind="never_after", params={"tool": "a", "after": "b"}, action="reject"),
    ],
    ids=lambda spec: f"{spec['kind']}-{spec['action']}",
)
def test_it_accepts_well_formed_policy_rules(spec):
    assert policy_rule_errors(spec) == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (["not", "an", "object"], "must be an object with id, rule, kind, params and action"),
        (rule(kind="mutually_exclusive"), "kind: must be one of must_include, max_steps"),
        (rule(params={"tools": []}), "params.tools: must be a non-empty list of tool names"),
        (rule(params={"tools": ["a", "a"]}), "params.tools: lists 'a' twice"),
        (
            rule(params={"tools": ["a"], "args": {"b": {}}}),
            "params.args.b: not in params.tools",
        ),
        (rule(params={"tools": ["a"], "args": {"a": 1}}), "params.args.a: must be an object"),
        (rule(params={"tools": ["a"], "args": []}), "params.args: must be an object"),
        (
            rule(action="correct", params={"tools": ["a", "b"], "args": {"a": {}}}),
            "params.args: 'correct' appends a step, so it needs the arguments of every listed "
            "tool; missing: b",
        ),
        (rule(action="drop"), "action: 'drop' is not defined for must_include"),
        (
            rule(kind="max_steps", params={"max": -1}),
            "params.max: must be a whole number of at least 1",
        ),
        (
            rule(kind="max_steps", params={"max": 2}, action="correct"),
            "action: 'correct' is not defined for max_steps",
        ),
        (
            rule(kind="never_after", params={"tool": "a", "after": "a"}),
            "params.after: must differ from params.tool",
        ),
        (rule(kind="never_after", params={"after": "a"}), "params.tool: must be a tool name"),
        (rule(kind="never_after", params={"tool": "a"}), "params.after: must be a tool name"),
    ],
)
def test_it_names_the_field_of_each_policy_rule_problem(spec, message):
    errors = policy_rule_errors(spec)

    assert any(error.startswith(message) for error in errors), errors


def test_it_lists_every_defined_action_for_every_kind():
    assert set(INVARIANT_ACTIONS) == {
        "mutually_exclusive",
        "requires_arg_when",
        "max_per_plan",
        "unique_calls",
    }
    assert set(POLICY_RULE_ACTIONS) == {"must_include", "max_steps", "never_after"}
    assert all(actions for actions in [*INVARIANT_ACTIONS.values(), *POLICY_RULE_ACTIONS.values()])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (None, "must be an object with key and default"),
        ({"default": 1}, "key: must be a name of letters"),
        ({"key": "1abc", "default": 1}, "key: must be a name of letters"),
        ({"key": "top_k"}, "default: is required"),
        ({"key": "top_k", "default": 8, "normalizer": "integer"}, "normalizer: must be one of"),
        (
            {"key": "top_k", "default": "eight", "normalizer": "int"},
            "default: expected a whole number, got 'eight'",
        ),
        ({"key": "top_k", "default": 8, "description": 3}, "description: must be text"),
        ({"key": "top_k", "default": 8, "scope": "tool"}, "scope: unknown field"),
    ],
)
def test_it_names_the_field_of_each_config_param_problem(spec, message):
    errors = config_param_errors(spec)

    assert any(error.startswith(message) for error in errors), errors


def test_it_accepts_well_formed_config_params():
    assert config_param_errors({"key": "top_k", "default": 8, "normalizer": "int"}) == []
    assert config_param_errors({"key": "library", "default": None, "normalizer": "strip"}) == []
    assert (
        config_param_errors({"key": "flags.verbose", "default": "yes", "normalizer": "bool"}) == []
    )


@pytest.mark.parametrize(
    ("normalizer", "value", "expected"),
    [
        ("bool", True, True),
        ("bool", " Yes ", True),
        ("bool", "off", False),
        ("bool", 0, False),
        ("int", " 42 ", 42),
        ("int", 3.0, 3),
        ("float", "2.5", 2.5),
        ("float", 2, 2.0),
        ("str", 12, "12"),
        ("str", "as is ", "as is "),
        ("lower", "Vancouver", "vancouver"),
        ("strip", "  guidelines ", "guidelines"),
        ("json", '{"a": [1, 2]}', {"a": [1, 2]}),
        ("json", [1, 2], [1, 2]),
        (None, {"anything": 1}, {"anything": 1}),
    ],
)
def test_it_normalizes_config_values(normalizer, value, expected):
    result = normalize_config_value(normalizer, value)

    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("normalizer", "value", "message"),
    [
        ("bool", "maybe", "expected true or false"),
        ("bool", 2, "expected true or false"),
        ("int", True, "expected a whole number, got True"),
        ("int", 2.5, "expected a whole number"),
        ("int", "4 2", "expected a whole number"),
        ("float", "nan", "expected a finite number"),
        ("float", None, "expected a finite number"),
        ("str", False, "expected text"),
        ("str", ["a"], "expected text"),
        ("lower", 3, "expected text"),
        ("strip", None, "expected text"),
        ("json", "{not json", "expected a JSON document"),
        ("yaml", "a: 1", "unknown normalizer 'yaml'"),
    ],
)
def test_it_refuses_values_a_normalizer_cannot_take(normalizer, value, message):
    with pytest.raises(ValueError, match=message):
        normalize_config_value(normalizer, value)


def test_it_shortens_huge_values_in_messages():
    with pytest.raises(ValueError) as caught:
        normalize_config_value("int", "9" * 10_000 + "x")

    assert len(str(caught.value)) < 120


def test_it_documents_every_normalizer():
    import registry.invariants as module

    for normalizer in NORMALIZERS:
        assert f"`{normalizer}`" in module.__doc__


def test_it_resolves_config_from_request_then_state_then_default():
    declared = [
        {"key": "top_k", "default": 8, "normalizer": "int"},
        {"key": "library", "default": " guidelines ", "normalizer": "strip"},
        {"key": "style", "default": "apa", "normalizer": "lower"},
    ]

    values, problems = resolve_config(
        declared,
        request={"top_k": "3", "style": None},
        state={"top_k": 99, "style": "Vancouver"},
    )

    assert values == {"top_k": 3, "library": "guidelines", "style": "vancouver"}
    assert problems == {}


def test_it_reports_a_bad_config_value_by_key_and_falls_back_to_the_default():
    declared = [{"key": "top_k", "default": 8, "normalizer": "int"}]

    values, problems = resolve_config(declared, request={"top_k": "many"}, state={})

    assert values == {"top_k": 8}
    assert problems == {"top_k": "request config: expected a whole number, got 'many'"}


def test_it_keeps_the_first_declaration_of_a_key():
    declared = [
        {"key": "top_k", "default": 8, "normalizer": "int"},
        {"key": "top_k", "default": "x", "normalizer": "str"},
    ]

    values, problems = resolve_config(declared, request={}, state={})

    assert values == {"top_k": 8}
    assert problems == {}


def test_it_reports_a_malformed_declaration_instead_of_using_it():
    declared = [{"key": "top_k", "default": 8, "normalizer": "integer"}]

    values, problems = resolve_config(declared, request={"top_k": 3}, state={})

    assert values == {}
    assert problems["top_k"].startswith("declaration: normalizer: must be one of")
