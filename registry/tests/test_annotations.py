"""The contract field ``annotations`` (MCP tool annotations) and the pin of a definition."""

import pytest

from registry.models import contract_hash
from registry.pins import contract_pin, definition_hash
from registry.validation import RegistryContext, contract_check
from tests.helpers import contract


@pytest.fixture
def context() -> RegistryContext:
    return RegistryContext(
        variables={"event_id", "event_query"}, risks={"low", "medium", "high"}, permissions={"read"}
    )


def test_it_keeps_mcp_annotations_verbatim(context):
    hints = {"title": "Find", "readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
    document, errors = contract_check(contract(annotations=hints), context=context)
    assert errors == {}
    assert document["annotations"] == hints


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ([], "must be an object of MCP tool annotations"),
        ({"readOnlyHint": "yes"}, "readOnlyHint must be true or false"),
        ({"title": "x" * 201}, "title must be text of at most 200 characters"),
        ({"x" * 500: True}, "key '" + "x" * 61 + "...' is longer than 100 characters"),
        ({"category": "x" * 10_001}, "must fit in 10,000 characters of JSON"),
    ],
)
def test_it_refuses_what_is_not_an_mcp_annotation(context, annotations, reason):
    _, errors = contract_check(contract(annotations=annotations), context=context)
    assert errors["annotations"][0].startswith(reason)


def test_empty_annotations_leave_the_content_hash_of_older_versions_alone():
    document = contract()
    assert contract_hash({**document, "annotations": {}}) == contract_hash(document)
    assert contract_hash({**document, "annotations": {"readOnlyHint": True}}) != contract_hash(
        document
    )


def test_it_keeps_a_servers_own_annotation_keys_verbatim(context):
    hints = {"readOnlyHint": False, "category": "Input automation", "x-weight": [1, 2]}
    document, errors = contract_check(contract(annotations=hints), context=context)
    assert errors == {}
    assert document["annotations"] == hints


def test_a_contract_no_server_declared_is_pinned_as_the_definition_the_registry_serves():
    document = {
        "name": "clock.get-time",
        "description": "Current time.",
        "input_schema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    served = {
        "name": "clock.get-time",
        "description": "Current time.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    assert contract_pin(document) == definition_hash(served)
    assert contract_pin({**document, "description": "Current time!"}) != contract_pin(document)
    assert contract_pin({**document, "annotations": {}}) == definition_hash(
        {key: value for key, value in served.items() if key != "annotations"}
    )
