import pytest

from registry.contract import MAX_DESCRIPTION
from registry.models import Tool
from registry.services import ImportInvalid, registry_file_check
from registry.validation import (
    RegistryContext,
    contract_check,
    dependency_cycle,
    schema_errors,
    unstorable_text,
)
from tests.helpers import contract


@pytest.fixture
def context() -> RegistryContext:
    return RegistryContext(
        variables={"event_id", "event_query", "event_details"},
        aliases={"eventId": "event_id"},
        risks={"low", "medium", "high"},
        permissions={"read", "write"},
        tools={"calendar.find_events", "calendar.get_event"},
        dependencies={"calendar.get_event": ["calendar.find_events"]},
    )


def test_it_accepts_a_valid_contract_and_resolves_aliases(context):
    document, errors = contract_check(contract(produces=["eventId"]), context=context)
    assert errors == {}
    assert document["produces"] == ["event_id"]


def test_it_names_the_field_and_reason_for_each_problem(context):
    document, errors = contract_check(
        contract(requires=["nowhere"], risk="extreme", permissions=["fly"], status="zombie"),
        context=context,
    )
    assert errors["requires"] == ["unknown state variable 'nowhere'"]
    assert errors["risk"][0].startswith("unknown risk level 'extreme'")
    assert errors["permissions"] == ["unknown permission 'fly'"]
    assert errors["status"] == ["must be 'active' or 'deprecated'"]


def test_a_description_past_what_a_reviewer_can_read_is_refused(context):
    _, errors = contract_check(contract(description="x" * MAX_DESCRIPTION), context=context)
    assert errors == {}
    _, errors = contract_check(contract(description="x" * (MAX_DESCRIPTION + 1)), context=context)
    assert errors["description"] == [
        "16,001 characters; at most 16,000, what a reviewer can read: move reference material "
        "to documentation the tool links to"
    ]


def test_it_rejects_a_schema_that_is_not_json_schema(context):
    _, errors = contract_check(
        contract(input_schema={"type": "object", "properties": 3}), context=context
    )
    assert "not a valid JSON Schema" in errors["input_schema"][0]


def test_it_rejects_an_input_schema_that_is_not_an_object(context):
    _, errors = contract_check(contract(input_schema={"type": "string"}), context=context)
    assert 'must have "type": "object"' in errors["input_schema"][0]


@pytest.mark.parametrize(
    "ref", ["https://evil.example/schema.json", "file:///etc/passwd", "other.json#/defs/x"]
)
def test_it_refuses_a_ref_outside_the_schema_without_fetching(context, ref):
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    reasons = schema_errors(schema, needs_object=True)
    assert reasons == [
        f"/properties/a/$ref: {ref!r} points outside the schema; "
        "only local references ('#...') are allowed"
    ]


def test_it_allows_a_local_ref(context):
    schema = {
        "type": "object",
        "$defs": {"id": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/id"}},
    }
    assert schema_errors(schema, needs_object=True) == []


def test_it_rejects_unknown_dependencies_and_cycles(context):
    _, errors = contract_check(
        contract(name="calendar.find_events", dependencies=["calendar.get_event", "ghost.tool"]),
        context=context,
    )
    assert "unknown tool 'ghost.tool'" in errors["dependencies"]
    assert (
        "cycle: calendar.find_events -> calendar.get_event -> calendar.find_events"
        in errors["dependencies"]
    )


def test_it_finds_no_cycle_in_a_chain():
    assert dependency_cycle("a", ["b"], {"b": ["c"], "c": []}) is None


def test_it_rejects_effects_on_variables_not_produced(context):
    _, errors = contract_check(
        contract(effects={"event_details": {"merge": "replace"}, "event_id": {"merge": "shuffle"}}),
        context=context,
    )
    assert "'event_details' is not in produces" in errors["effects"]
    assert "event_id: merge must be one of append, merge_dict, replace" in errors["effects"]


def test_it_rejects_malformed_invariants_and_config_params(context):
    _, errors = contract_check(
        contract(
            invariants=[
                {"id": "x", "rule": "", "kind": "nonsense", "params": {}, "action": "reject"}
            ],
            config_params=[{"default": 1}],
        ),
        context=context,
    )
    assert errors["invariants"] and all(
        reason.startswith("[0] ") for reason in errors["invariants"]
    )
    assert errors["config_params"] and errors["config_params"][0].startswith("[0] ")


def test_it_rejects_bad_cost_and_limits(context):
    _, errors = contract_check(
        contract(cost={"error_rate": 2, "dollars": 1}, resource_limits={"timeout_ms": -1}),
        context=context,
    )
    assert "error_rate must be between 0 and 1" in errors["cost"]
    assert any("unknown key 'dollars'" in reason for reason in errors["cost"])
    assert errors["resource_limits"] == ["timeout_ms must be a positive integer"]


@pytest.mark.parametrize(
    ("field_name", "value", "reason"),
    [
        ("effects", ["event_id"], "must be an object mapping produced variables to their metadata"),
        ("permissions", "read", "must be a list of permission names"),
        ("cost", [80], "must be an object"),
        ("resource_limits", 5, "must be an object"),
        ("invariants", {"id": "one"}, "must be a list"),
        ("config_params", "key", "must be a list"),
        ("dependencies", "calendar.get_event", "must be a list of tool names"),
    ],
)
def test_a_field_of_the_wrong_shape_gets_one_reason_and_the_rest_is_still_checked(
    context, field_name, value, reason
):
    document, errors = contract_check(
        contract(risk="extreme", **{field_name: value}), context=context
    )
    assert errors[field_name] == [reason]
    assert set(errors) == {field_name, "risk"}
    assert document[field_name] == value  # left as sent, not normalised


def test_it_rejects_a_document_that_is_not_an_object(context):
    assert contract_check(["nope"], context=context) == (
        {},
        {"document": ["must be a JSON object"]},
    )


def test_it_rejects_unknown_fields(context):
    _, errors = contract_check(contract(colour="blue"), context=context)
    assert errors["colour"] == ["unknown field"]


def test_it_rejects_text_no_database_can_store(context):
    _, errors = contract_check(contract(description="Find\x00 events"), context=context)
    assert errors == {"description": ["description: contains a NUL character (\\u0000)"]}
    _, errors = contract_check(
        contract(input_schema={"type": "object", "properties": {"\ud800": {}}}), context=context
    )
    assert "unpaired surrogate" in errors["input_schema"][0]


@pytest.mark.parametrize(
    "value",
    [
        {"name": "café 🙂", "n": [1, 2.5, -0.0, 10**40, True, None], "deep": [[[{"k": "v"}]]]},
        ["\u2028", {"é": {"": []}}, {}],
        "plain",
        None,
    ],
)
def test_storable_text_passes_whatever_its_shape(value):
    assert unstorable_text(value) is None


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, {"b": "x\x00"}]}, "a[1].b: contains a NUL character (\\u0000)"),
        ({"a": {"k\x00": 1}}, "a: contains a NUL character (\\u0000)"),
        ({"a": ["é", "\ud800"]}, "a[1]: contains an unpaired surrogate (invalid Unicode)"),
        ([[1.0, float("inf")]], "[0][1]: is a number out of range"),
        ({"é\udfff": 1}, "(value): contains an unpaired surrogate (invalid Unicode)"),
        (float("nan"), "(value): is a number out of range"),
    ],
)
def test_unstorable_text_says_where_it_is(value, where):
    assert unstorable_text(value) == where


# --- schema complexity limits ---------------------------------------------------------------


def doubling_chain(levels: int) -> dict:
    """$defs where each definition is anyOf the previous one, twice: 2^levels branches."""
    definitions = {"d0": {"type": "string"}}
    for level in range(1, levels + 1):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        definitions[f"d{level}"] = {"anyOf": [below, below]}
    return {
        "type": "object",
        "$defs": definitions,
        "properties": {"q": {"$ref": f"#/$defs/d{levels}"}},
    }


def nots(levels: int) -> dict:
    """An object schema whose property nests ``levels`` more objects: depth levels + 2."""
    nested: dict = {"type": "string"}
    for _ in range(levels - 1):
        nested = {"not": nested}
    return {"type": "object", "properties": {"a": nested}}


def test_it_refuses_a_schema_whose_refs_expand_combinatorially(context):
    _, errors = contract_check(contract(input_schema=doubling_chain(30)), context=context)

    assert errors == {
        "input_schema": [
            "expands to more than 5,000 subschemas once its $refs are followed "
            "(allOf/anyOf/oneOf over shared definitions multiply)"
        ]
    }


def test_it_accepts_a_schema_just_under_the_expansion_limit(context):
    # 2^12 - 3 subschemas in d10, plus the root and its property: 4,095.
    _, errors = contract_check(contract(input_schema=doubling_chain(10)), context=context)
    _, over = contract_check(contract(input_schema=doubling_chain(11)), context=context)

    assert errors == {}
    assert "expands to more than 5,000" in over["input_schema"][0]


def test_it_refuses_a_schema_nested_too_deep_before_checking_it_against_the_metaschema(context):
    _, errors = contract_check(contract(input_schema=nots(63)), context=context)
    _, fine = contract_check(contract(input_schema=nots(62)), context=context)
    # Deep enough that a recursive check would raise RecursionError instead of answering.
    _, hostile = contract_check(contract(input_schema=nots(900)), context=context)

    assert fine == {}
    assert len(errors["input_schema"]) == 1
    assert errors["input_schema"][0].startswith(
        "nests deeper than 64 levels of objects and arrays (at /properties/a/not/not/"
    )
    assert hostile["input_schema"][0].startswith("nests deeper than 64 levels")


def test_it_refuses_a_combinator_with_too_many_branches(context):
    schema = {
        "type": "object",
        "properties": {"a": {"anyOf": [{"const": n} for n in range(33)]}},
        "$defs": {"b": {"oneOf": [{"const": n} for n in range(32)]}},
    }

    _, errors = contract_check(contract(input_schema=schema), context=context)

    assert errors == {
        "input_schema": ["/properties/a/anyOf: combines 33 subschemas; at most 32 are allowed"]
    }


def test_it_accepts_a_recursive_definition_guarded_by_data(context):
    schema = {
        "type": "object",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "properties": {"tree": {"$ref": "#/$defs/node"}},
    }

    _, errors = contract_check(contract(input_schema=schema), context=context)

    assert errors == {}


def test_it_refuses_a_dialect_named_below_the_root(context):
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"q": {"$schema": "http://json-schema.org/draft-07/schema#"}},
    }

    _, errors = contract_check(contract(input_schema=schema), context=context)

    assert errors == {
        "input_schema": ["/properties/q/$schema: only the root may name a dialect ($schema)"]
    }


def test_the_limits_apply_to_the_output_schema_too(context):
    _, errors = contract_check(contract(output_schema=doubling_chain(30)), context=context)

    assert list(errors) == ["output_schema"]


@pytest.mark.django_db
def test_an_import_names_the_tool_whose_schema_is_too_complex():
    with pytest.raises(ImportInvalid) as caught:
        registry_file_check(data=[contract(input_schema=doubling_chain(30))])

    assert (
        "calendar.find_events: input_schema: expands to more than 5,000 subschemas once its $refs "
        "are followed (allOf/anyOf/oneOf over shared definitions multiply)"
    ) in caught.value.problems
    assert Tool.objects.count() == 0


# JSON values of every type and shape, as a hostile document would send them.
ODD_VALUES = [[], {}, [[]], [{}], {"a": []}, {"a": {}}, 1, 1.5, True, None, "x", [1], [None]]


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
@pytest.mark.parametrize(
    "field",
    [*contract(), "annotations", "effects", "invariants", "config_params", "dependencies",
     "resource_limits", "output_schema", "status"],
)  # fmt: skip
def test_a_field_of_any_json_shape_gets_a_reason_never_an_exception(context, field, value):
    document, errors = contract_check({**contract(), field: value}, context=context)
    assert document is None or errors == {} or field in errors or "name" in errors


def test_a_long_unknown_name_is_cut_in_its_reason(context):
    _, errors = contract_check(
        contract(risk="r" * 10_000, permissions=["p" * 10_000]), context=context
    )
    assert all(len(reason) < 300 for reasons in errors.values() for reason in reasons)
    assert errors["risk"][0].startswith("unknown risk level 'rrr")
