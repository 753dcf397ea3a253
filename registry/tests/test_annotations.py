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
        ({"x" * 500: True}, "unknown key '" + "x" * 61 + "...'"),
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


def test_the_pin_covers_what_a_model_reads_and_not_names_or_titles():
    declared = {
        "name": "get-time",
        "title": "Get time",
        "description": "Current time.",
        "inputSchema": {"type": "object"},
        "outputSchema": None,
        "annotations": {"title": "Time", "readOnlyHint": True},
        "_meta": {"x": 1},
    }
    same = {
        "name": "clock.get-time",
        "description": "Current time.",
        "input_schema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    assert definition_hash(declared) == contract_pin(same)
    assert definition_hash({**declared, "description": "Current time!"}) != definition_hash(
        declared
    )
    assert definition_hash({**declared, "annotations": {"readOnlyHint": False}}) != definition_hash(
        declared
    )
