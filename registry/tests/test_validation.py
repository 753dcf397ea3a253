import pytest

from conftest import contract
from registry.validation import RegistryContext, contract_check, dependency_cycle, schema_errors


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
