import re

import pytest

from api import exports
from registry.models import Application, PlanningPolicy
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = [pytest.mark.django_db, pytest.mark.both_read_paths]
PROVIDER_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def test_openai_export_has_the_function_shape(runtime):
    tools = runtime.get("/api/v1/export/openai/").json()
    assert len(tools) == 4
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert PROVIDER_NAME.fullmatch(tool["function"]["name"])
        assert tool["function"]["parameters"]["type"] == "object"
    assert "calendar__find_events" in [tool["function"]["name"] for tool in tools]


def test_anthropic_export_has_the_messages_api_shape(runtime):
    tools = runtime.get("/api/v1/export/anthropic/").json()
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert PROVIDER_NAME.fullmatch(tool["name"])


def test_mcp_export_is_a_tools_list_result(runtime):
    body = runtime.get("/api/v1/export/mcp/").json()
    assert set(body) == {"tools"}
    for tool in body["tools"]:
        assert {"name", "description", "inputSchema", "_meta"} <= set(tool)


def test_a_tool_that_declares_no_annotations_exports_none_in_any_shape(runtime):
    # calendar.delete_event needs "delete" at high risk: still nothing is said for it.
    mcp = {tool["name"]: tool for tool in runtime.get("/api/v1/export/mcp/").json()["tools"]}
    assert "annotations" not in mcp["calendar.delete_event"]
    assert all("annotations" not in tool and "title" not in tool for tool in mcp.values())
    listed = {tool["name"]: tool for tool in runtime.get("/api/v1/tools/").json()["results"]}
    assert listed["calendar.delete_event"]["annotations"] == {}
    for path in ("/api/v1/export/openai/", "/api/v1/export/anthropic/"):
        assert "Hint" not in runtime.get(path).content.decode()


def test_a_tool_that_declares_annotations_exports_exactly_those_verbatim(runtime, registry):
    declared = {"readOnlyHint": True, "category": "Navigation", "audience": ["ops"]}
    registry_import(data=[contract(name="browser.list_pages", annotations=declared)], approve=True)
    mcp = {tool["name"]: tool for tool in runtime.get("/api/v1/export/mcp/").json()["tools"]}
    assert mcp["browser.list_pages"]["annotations"] == declared
    assert "title" not in mcp["browser.list_pages"]
    listed = {tool["name"]: tool for tool in runtime.get("/api/v1/tools/").json()["results"]}
    assert listed["browser.list_pages"]["annotations"] == declared


def test_exports_show_only_the_visible_set(restricted):
    tools = restricted.get("/api/v1/export/anthropic/").json()
    assert [tool["name"] for tool in tools] == ["calendar__find_events", "calendar__get_event"]


def test_names_map_reversibly():
    for name in ("calendar.find_events", "a.b-c.d_e", "plain"):
        assert exports.registry_name(exports.provider_name(name)) == name


def test_descriptions_carry_invariant_rules_and_the_mandate(runtime):
    application = Application.objects.get(name="assistant")
    PlanningPolicy.objects.create(application=application, mandate="Always cite sources.")
    document = contract(
        invariants=[
            {
                "id": "one-query",
                "rule": "Send one query at a time.",
                "kind": "max_per_plan",
                "params": {"max": 1},
                "action": "drop",
            }
        ]
    )
    text = exports.llm_description(document, "Always cite sources.")
    assert "Send one query at a time." in text and "Always cite sources." in text
    tools = runtime.get("/api/v1/export/openai/").json()
    assert all("Always cite sources." in tool["function"]["description"] for tool in tools)


def test_strict_mode_closes_objects_and_makes_optional_fields_nullable():
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["q"],
    }
    strict = exports.strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["limit", "q"]
    assert strict["properties"]["limit"]["type"] == ["integer", "null"]


def test_strict_mode_adds_null_to_the_enum_and_const_of_optional_properties():
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string", "enum": ["a", "b"]},
            "order": {"type": "string", "enum": ["asc", "desc"]},
            "kind": {"const": "event"},
            "mode": {"enum": ["fast", "slow"]},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "ref": {"$ref": "#/$defs/x"},
        },
        "required": ["q"],
        "$defs": {"x": {"type": "string"}},
    }
    strict = exports.strict_schema(schema)["properties"]
    assert strict["q"] == {"type": "string", "enum": ["a", "b"]}  # required: no null
    assert strict["order"] == {"type": ["string", "null"], "enum": ["asc", "desc", None]}
    assert strict["kind"] == {"enum": ["event", None]}
    assert strict["mode"] == {"enum": ["fast", "slow", None]}
    assert strict["either"]["anyOf"][-1] == {"type": "null"}
    assert strict["ref"] == {"anyOf": [{"$ref": "#/$defs/x"}, {"type": "null"}]}


def test_strict_mode_says_keywords_outside_the_subset_in_the_description():
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "Title.", "minLength": 1,
                      "maxLength": 300},
            "url": {"type": "string", "format": "uri"},
            "when": {"type": "string", "format": "date-time"},
            "ids": {"type": "array", "items": {"type": "string", "maxLength": 1},
                    "uniqueItems": True, "minItems": 1, "default": ["a"]},
            "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["title", "url", "when", "ids", "pick"],
        "$comment": "for authors",
    }  # fmt: skip
    strict = exports.strict_schema(schema)
    properties = strict["properties"]
    assert properties["title"] == {
        "type": "string",
        "description": "Title. Between 1 and 300 characters.",
    }
    assert properties["url"] == {"type": "string", "description": "Format: uri."}
    assert properties["when"]["format"] == "date-time"  # in the subset: kept
    assert properties["ids"]["description"] == 'No item may appear twice. Default: ["a"].'
    assert properties["ids"]["minItems"] == 1
    assert properties["ids"]["items"] == {"type": "string", "description": "At most 1 character."}
    assert properties["pick"]["anyOf"] == [{"type": "string"}, {"type": "integer"}]
    assert "Exactly one" in properties["pick"]["description"]
    assert "$comment" not in strict


@pytest.mark.parametrize(
    "schema, reason",
    [
        ({"type": "object", "patternProperties": {"^x": {}}}, "/: 'patternProperties'"),
        ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}},
         "/properties/a: 'allOf'"),
        ({"type": "object", "properties": {"a": {"type": "object",
          "additionalProperties": {"type": "string"}}}}, "/properties/a: additionalProperties"),
        ({"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{}]}}},
         "/properties/a: 'prefixItems'"),
        ({"anyOf": [{"type": "object"}]}, "/: the root must be an object"),
    ],
)  # fmt: skip
def test_strict_mode_refuses_what_it_cannot_express(schema, reason):
    with pytest.raises(exports.NotStrict) as error:
        exports.strict_schema(schema)
    assert str(error.value).startswith(reason)


def test_strict_mode_refuses_objects_nested_deeper_than_openai_allows():
    schema: dict = {"type": "object", "properties": {}}
    for _ in range(exports.STRICT_MAX_NESTING):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(exports.NotStrict, match="nest deeper than 10"):
        exports.strict_schema(schema)


def test_strict_export_keeps_a_refused_tool_as_not_strict_and_says_why(runtime, reviewer, proposer):
    from reviews.services import ProposalSeen, contract_propose, review_approve

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "patternProperties": {"^x": {"type": "string"}},
    }
    ticket = contract_propose(document=contract(input_schema=schema), author=proposer)
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    from django.core.cache import cache

    cache.clear()
    response = runtime.get("/api/v1/export/openai/?strict=true")
    assert response.status_code == 200
    by_name = {tool["function"]["name"]: tool["function"] for tool in response.json()}
    refused = by_name["calendar__find_events"]
    assert refused["strict"] is False
    assert refused["parameters"]["patternProperties"] == schema["patternProperties"]
    assert refused["parameters"]["$comment"] == (
        "Not strict: /: 'patternProperties' is not supported in strict mode"
    )
    others = [tool for name, tool in by_name.items() if name != "calendar__find_events"]
    assert others and all(tool["strict"] is True for tool in others)
