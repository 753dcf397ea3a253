"""The exports of the demo registry, checked by the official SDKs' own types and clients.

OpenAI (``ChatCompletionToolParam``, ``FunctionDefinition``, and the strict-mode rules of its
Structured Outputs guide), Anthropic (``ToolParam``) and MCP (``Tool``, ``ListToolsResult``).
The SDK clients run against a mock transport: nothing leaves the machine.
"""

import json
from pathlib import Path

import anthropic
import httpx
import httpx2
import mcp.types
import openai
import pytest
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition
from pydantic import TypeAdapter

from api import exports
from reviews.services import registry_import

pytestmark = pytest.mark.django_db
DEMO = Path(__file__).resolve().parents[2] / "demo" / "registry.json"

# OpenAI's Structured Outputs guide, "Supported schemas".
STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "$ref", "$defs", "definitions", "description", "title", "pattern", "format", "multipleOf",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
}  # fmt: skip
STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
                  "uuid"}  # fmt: skip


@pytest.fixture
def demo(runtime_client_factory):
    registry = json.loads(DEMO.read_text())
    registry_import(data=registry, approve=True)
    return {tool["name"]: tool for tool in registry["tools"]}, runtime_client_factory("assistant")


def exact(adapter: TypeAdapter, value):
    """Validate with the SDK's type and dump again: nothing may be dropped or changed."""
    return adapter.dump_python(adapter.validate_python(value), exclude_none=True) == value


def strict_rule_breaks(schema, path="") -> list[str]:
    """Where a schema breaks OpenAI's strict-mode rules (an independent reading of the guide)."""
    breaks = []
    if not isinstance(schema, dict):
        return breaks
    for keyword in sorted(set(schema) - STRICT_KEYWORDS):
        breaks.append(f"{path or '/'}: {keyword} is outside the strict subset")
    if "format" in schema and schema["format"] not in STRICT_FORMATS:
        breaks.append(f"{path or '/'}: format {schema['format']} is not supported")
    if "properties" in schema or schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            breaks.append(f"{path or '/'}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(schema.get("properties", {})):
            breaks.append(f"{path or '/'}: not every property is required")
        for name, child in schema.get("properties", {}).items():
            breaks += strict_rule_breaks(child, f"{path}/properties/{name}")
    if "items" in schema:
        breaks += strict_rule_breaks(schema["items"], f"{path}/items")
    for index, child in enumerate(schema.get("anyOf", [])):
        breaks += strict_rule_breaks(child, f"{path}/anyOf/{index}")
    return breaks


def optional_paths(schema, path=()):
    """(path to the property's schema, its schema) of every optional property, nested too."""
    if not isinstance(schema, dict):
        return
    required = set(schema.get("required", []))
    for name, child in schema.get("properties", {}).items():
        if name not in required:
            yield (*path, "properties", name)
        yield from optional_paths(child, (*path, "properties", name))
    if isinstance(schema.get("items"), dict):
        yield from optional_paths(schema["items"], (*path, "items"))


def at(schema, path):
    for part in path:
        schema = schema[part]
    return schema


def test_the_openai_export_is_made_of_the_sdks_tool_params(demo):
    contracts, runtime = demo
    tool_param = TypeAdapter(ChatCompletionToolParam)
    function = TypeAdapter(FunctionDefinition)
    for strict in ("false", "true"):
        tools = runtime.get(f"/api/v1/export/openai/?strict={strict}").json()
        assert len(tools) == len(contracts)
        for tool in tools:
            assert exact(tool_param, tool), tool["function"]["name"]
            assert exact(function, tool["function"])


def test_the_responses_shape_is_made_of_the_sdks_function_tool_params(demo):
    contracts, runtime = demo
    tool_param = TypeAdapter(FunctionToolParam)
    for strict in ("false", "true"):
        chat = runtime.get(f"/api/v1/export/openai/?strict={strict}").json()
        tools = runtime.get(f"/api/v1/export/openai/?strict={strict}&shape=responses").json()
        assert len(tools) == len(contracts)
        for tool, same in zip(tools, chat, strict=True):
            assert exact(tool_param, tool), tool["name"]
            # The same function, flat, and strict always said.
            assert tool == {"type": "function", "strict": False, **same["function"]}


def test_an_unknown_export_shape_is_a_400_naming_it(demo):
    _, runtime = demo
    response = runtime.get("/api/v1/export/openai/?shape=assistants")
    assert response.status_code == 400
    assert "shape" in response.json()["error"]["fields"]


def test_the_strict_export_keeps_openais_strict_rules_for_every_demo_tool(demo):
    contracts, runtime = demo
    tools = runtime.get("/api/v1/export/openai/?strict=true").json()
    nullable = 0
    for tool in tools:
        function = tool["function"]
        name = exports.registry_name(function["name"])
        assert function["strict"] is True, (name, function["parameters"].get("$comment"))
        parameters = function["parameters"]
        assert strict_rule_breaks(parameters) == [], name
        Draft202012Validator.check_schema(parameters)
        # An optional property of the contract is one the strict model can leave out: its
        # schema in the export accepts null, enum and const included.
        for path in optional_paths(contracts[name]["input_schema"]):
            assert Draft202012Validator(at(parameters, path)).is_valid(None), (name, path)
            nullable += 1
    assert nullable >= 40
    enum_properties = [
        at(exports.strict_schema(contracts[name]["input_schema"]), path)
        for name in contracts
        for path in optional_paths(contracts[name]["input_schema"])
        if "enum" in at(contracts[name]["input_schema"], path)
    ]
    assert len(enum_properties) == 12  # the count of optional enum properties
    assert all(None in schema["enum"] for schema in enum_properties)


def test_the_openai_sdk_sends_the_strict_export_and_its_call_passes_plan_validation(demo):
    contracts, runtime = demo
    tools = runtime.get("/api/v1/export/openai/?strict=true&domain=calendar").json()
    sent = {}
    arguments = {"event_query": "team sync", "time_min": None, "time_max": None,
                 "max_results": None}  # fmt: skip

    def answer(request: httpx.Request) -> httpx.Response:
        sent.update(json.loads(request.content))
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "calendar__find_events", "arguments": json.dumps(arguments)},
        }
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "refusal": None,
                                     "tool_calls": [call]}}],
        })  # fmt: skip

    client = openai.OpenAI(
        api_key="test", base_url="http://openai.invalid/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )  # fmt: skip
    # parse() refuses any tool that is not strict before sending anything.
    completion = client.chat.completions.parse(
        model="gpt-4o", messages=[{"role": "user", "content": "Move the team sync"}], tools=tools
    )
    assert sent["tools"] == tools
    (call,) = completion.choices[0].message.tool_calls
    assert call.function.parsed_arguments == arguments

    step = {"tool": exports.registry_name(call.function.name),
            "args": call.function.parsed_arguments}  # fmt: skip
    checked = runtime.post(
        "/api/v1/plans/validate/", {"plan": [step], "state": ["event_query"]}, format="json"
    ).json()
    assert checked["valid"] is True, checked["violations"]
    assert checked["plan"] == [
        {"tool": "calendar.find_events", "args": {"event_query": "team sync"}}
    ]


def test_the_anthropic_export_is_made_of_the_sdks_tool_params(demo):
    contracts, runtime = demo
    tools = runtime.get("/api/v1/export/anthropic/").json()
    tool_param = TypeAdapter(anthropic.types.ToolParam)
    assert len(tools) == len(contracts)
    for tool in tools:
        assert exact(tool_param, tool), tool["name"]
        assert (
            tool["input_schema"] == contracts[exports.registry_name(tool["name"])]["input_schema"]
        )

    sent = {}

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.update(json.loads(request.content))
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "calendar__find_events",
                         "input": {"event_query": "team sync"}}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        })  # fmt: skip

    client = anthropic.Anthropic(
        api_key="test", base_url="http://anthropic.invalid",
        # This SDK sends through httpx2, httpx's successor.
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )  # fmt: skip
    message = client.messages.create(
        model="claude-test", max_tokens=64, tools=tools,
        messages=[{"role": "user", "content": "Find the team sync"}],
    )  # fmt: skip
    assert sent["tools"] == tools
    assert message.content[0].name == "calendar__find_events"


def test_the_mcp_export_is_an_sdk_tools_list_result(demo):
    contracts, runtime = demo
    body = runtime.get("/api/v1/export/mcp/").json()
    result = mcp.types.ListToolsResult.model_validate(body)
    assert [tool.name for tool in result.tools] == sorted(contracts)
    for entry in body["tools"]:
        tool = mcp.types.Tool.model_validate(entry)
        assert tool.model_dump(by_alias=True, exclude_none=True) == entry
        assert tool.input_schema == contracts[tool.name]["input_schema"]
