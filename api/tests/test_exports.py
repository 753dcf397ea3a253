import re

import pytest

from api import exports
from conftest import contract
from registry.models import Application, PlanningPolicy

pytestmark = pytest.mark.django_db
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_openai_export_has_the_function_shape(runtime):
    tools = runtime.get("/api/v1/export/openai/").json()
    assert len(tools) == 4
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert PROVIDER_NAME.match(tool["function"]["name"])
        assert tool["function"]["parameters"]["type"] == "object"
    assert "calendar__find_events" in [tool["function"]["name"] for tool in tools]


def test_anthropic_export_has_the_messages_api_shape(runtime):
    tools = runtime.get("/api/v1/export/anthropic/").json()
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert PROVIDER_NAME.match(tool["name"])


def test_mcp_export_is_a_tools_list_result(runtime):
    body = runtime.get("/api/v1/export/mcp/").json()
    assert set(body) == {"tools"}
    by_name = {tool["name"]: tool for tool in body["tools"]}
    delete = by_name["calendar.delete_event"]["annotations"]
    assert delete["destructiveHint"] is True and delete["readOnlyHint"] is False
    find = by_name["calendar.find_events"]["annotations"]
    assert find["readOnlyHint"] is True and find["openWorldHint"] is False
    assert by_name["weather.forecast"]["annotations"]["openWorldHint"] is True
    for tool in body["tools"]:
        assert {"name", "description", "inputSchema", "annotations"} <= set(tool)


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
    assert strict["required"] == ["q", "limit"]
    assert strict["properties"]["limit"]["type"] == ["integer", "null"]


def test_strict_mode_says_which_tool_cannot_be_strict(runtime, reviewer, proposer):
    from reviews.services import contract_propose, review_approve

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "patternProperties": {"^x": {"type": "string"}},
    }
    ticket = contract_propose(document=contract(input_schema=schema), author=proposer)
    review_approve(ticket=ticket, reviewer=reviewer)
    from django.core.cache import cache

    cache.clear()
    response = runtime.get("/api/v1/export/openai/?strict=true")
    assert response.status_code == 400
    assert "calendar.find_events" in response.json()["error"]["fields"]
    assert "patternProperties" in response.json()["error"]["fields"]["calendar.find_events"][0]
    ok = runtime.get("/api/v1/export/openai/?strict=true&domain=weather").json()
    assert ok[0]["function"]["strict"] is True
