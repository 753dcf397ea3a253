"""Contract documents in the shapes LLM SDKs take (pure: no Django).

OpenAI and Anthropic accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. Registry names are
dotted, contain no ``__`` and fit in 64 characters once each ``.`` becomes ``__`` (validation
enforces both), and no two tools share an export name (``Tool.export_name`` is unique), so
``provider_name`` (``registry.validation.export_name``) is one-to-one over the registry.
MCP keeps the registry's names as they are, gives back the MCP annotations a tool's definition
declares exactly as declared (and none when it declares none), and carries each tool's pin
(``registry/pins.py``) in ``_meta``.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from registry.pins import contract_pin
from registry.validation import export_name

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")
# OpenAI's strict subset ("Supported schemas" in its Structured Outputs guide): these keywords
# pass through as they are (``additionalProperties`` only as false, ``format`` only as one of
# STRICT_FORMATS).
STRICT_KEPT = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "$ref", "$defs", "definitions", "description", "title", "pattern", "format", "multipleOf",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
}  # fmt: skip
STRICT_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
}  # fmt: skip
# Keywords that only narrow the values a schema accepts, or only annotate it: strict mode leaves
# them out of the schema and says them in the description, so the model still reads the rule and
# plans/validate still checks it against the contract's own schema. ``oneOf`` becomes ``anyOf``
# (which accepts a superset) with a sentence saying exactly one alternative must match.
STRICT_DESCRIBED = {
    "minLength", "maxLength", "uniqueItems", "default", "examples", "deprecated", "oneOf",
}  # fmt: skip
# Notes for the schema's authors, not the model: left out.
STRICT_DROPPED = {"$schema", "$comment"}
# Everything else is refused: dropping it would change the shape of what the model may send
# (allOf, if/then/else, patternProperties, prefixItems, ...), not merely loosen it.
# OpenAI's limits on one strict schema.
STRICT_MAX_NESTING = 10
STRICT_MAX_PROPERTIES = 5_000
STRICT_MAX_ENUM_VALUES = 1_000


def provider_name(name: str) -> str:
    return export_name(name)


def registry_name(name: str) -> str:
    """The inverse of ``provider_name`` for names with no ``_`` beside a ``.``; in general the
    registry's ``Tool.export_name`` says which tool an export name is."""
    return name.replace("__", ".")


def llm_description(document: dict[str, Any], mandate: str = "") -> str:
    """The description the model reads: the tool's own, its invariant rules, the app's mandate."""
    parts = [document["description"].strip()]
    rules = [entry["rule"] for entry in document.get("invariants") or [] if entry.get("rule")]
    if rules:
        parts.append("Rules:\n" + "\n".join(f"- {rule}" for rule in rules))
    if mandate.strip():
        parts.append("Policy: " + mandate.strip())
    return "\n\n".join(parts)


def openai_tool(
    document: dict[str, Any], *, mandate: str = "", strict: bool = False
) -> dict[str, Any]:
    """A tool in OpenAI's function-calling shape.

    With ``strict``, the parameters are made strict (``strict_schema``) and ``"strict": true`` is
    set; a schema strict mode cannot express is refused strictness: the entry keeps the
    contract's own schema, says ``"strict": false`` and gives the reason in the schema's
    ``$comment``, so the model can still call the tool and the caller can see why.
    """
    parameters = copy.deepcopy(document["input_schema"])
    function: dict[str, Any] = {
        "name": provider_name(document["name"]),
        "description": llm_description(document, mandate),
        "parameters": parameters,
    }
    if strict:
        try:
            function["parameters"] = strict_schema(parameters)
            function["strict"] = True
        except NotStrict as exc:
            comment = parameters.get("$comment")
            note = f"Not strict: {exc}"
            parameters["$comment"] = f"{note}. {comment}" if isinstance(comment, str) else note
            function["strict"] = False
    return {"type": "function", "function": function}


def openai_responses_tool(
    document: dict[str, Any], *, mandate: str = "", strict: bool = False
) -> dict[str, Any]:
    """A tool in the flat shape of OpenAI's Responses API (``FunctionToolParam``): the function's
    keys beside ``"type": "function"``, with ``strict`` always said (the API requires it)."""
    function = openai_tool(document, mandate=mandate, strict=strict)["function"]
    return {"type": "function", **function, "strict": function.get("strict", False)}


def anthropic_tool(document: dict[str, Any], *, mandate: str = "") -> dict[str, Any]:
    return {
        "name": provider_name(document["name"]),
        "description": llm_description(document, mandate),
        "input_schema": copy.deepcopy(document["input_schema"]),
    }


PIN_META_KEY = "tool-contract-registry/definitionHash"


def mcp_tool(
    document: dict[str, Any],
    *,
    mandate: str = "",
    definition: dict[str, Any] | None = None,
    pin: str | None = None,
) -> dict[str, Any]:
    """A tool in MCP's ``tools/list`` shape, saying only what was declared.

    Annotations are hints their author claims: a tool carries the ones its approved definition
    declares, verbatim (keys no specification names included), and none at all when it declares
    none; nothing is derived from the contract, and no default is stated as a fact. With the
    ``definition`` its MCP server sent, the annotations and ``title`` are that definition's;
    ``pin`` is the approved pin (``registry/pins.py``), computed here when not given.
    """
    tool: dict[str, Any] = {
        "name": document["name"],
        "description": llm_description(document, mandate),
        "inputSchema": copy.deepcopy(document["input_schema"]),
    }
    if document.get("output_schema"):
        tool["outputSchema"] = copy.deepcopy(document["output_schema"])
    if definition is not None:
        if isinstance(definition.get("title"), str):
            tool["title"] = definition["title"]
        if isinstance(definition.get("annotations"), dict):
            tool["annotations"] = copy.deepcopy(definition["annotations"])
    elif document.get("annotations"):
        tool["annotations"] = copy.deepcopy(document["annotations"])
    tool["_meta"] = {PIN_META_KEY: pin if pin is not None else contract_pin(document)}
    return tool


class NotStrict(ValueError):
    """The schema uses something OpenAI's strict mode cannot express."""


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: every object closed, every property required, optional ones nullable.

    Keywords outside the strict subset are moved into the description (STRICT_DESCRIBED) or
    left out (STRICT_DROPPED); any other one raises ``NotStrict`` naming where and why.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        raise NotStrict("/: the root must be an object schema, not a union")
    counts = {"properties": 0, "enum": 0}
    return _strict(copy.deepcopy(schema), "", 1, counts)


def _strict(node: Any, path: str, depth: int, counts: dict[str, int]) -> Any:
    if not isinstance(node, dict):
        return node
    where = path or "/"
    refused = sorted(set(node) - STRICT_KEPT - STRICT_DESCRIBED - STRICT_DROPPED)
    if refused:
        raise NotStrict(f"{where}: {_quoted(refused)} is not supported in strict mode")
    for keyword in STRICT_DROPPED & set(node):
        del node[keyword]
    _describe(node, where)
    if "format" in node and node["format"] not in STRICT_FORMATS:
        _add_sentence(node, f"Format: {node.pop('format')}.")
    if isinstance(node.get("enum"), list):
        counts["enum"] += len(node["enum"])
        if counts["enum"] > STRICT_MAX_ENUM_VALUES:
            raise NotStrict(f"{where}: more than {STRICT_MAX_ENUM_VALUES} enum values in all")
    if node.get("type") == "object" or "properties" in node:
        if depth > STRICT_MAX_NESTING:
            raise NotStrict(f"{where}: objects nest deeper than {STRICT_MAX_NESTING} levels")
        if node.get("additionalProperties") not in (None, False):
            raise NotStrict(f"{where}: additionalProperties must be false in strict mode")
        properties = node.get("properties", {})
        counts["properties"] += len(properties)
        if counts["properties"] > STRICT_MAX_PROPERTIES:
            raise NotStrict(f"{where}: more than {STRICT_MAX_PROPERTIES} properties in all")
        required = set(node.get("required", []))
        for name, child in properties.items():
            child = _strict(child, f"{path}/properties/{name}", depth + 1, counts)
            properties[name] = child if name in required else _nullable(child)
        node["properties"] = properties
        # Sorted: the order of a stored schema's keys depends on the database (jsonb sorts them).
        node["required"] = sorted(properties)
        node["additionalProperties"] = False
    if "items" in node:
        node["items"] = _strict(node["items"], f"{path}/items", depth, counts)
    if "anyOf" in node:
        node["anyOf"] = [
            _strict(child, f"{path}/anyOf/{i}", depth, counts)
            for i, child in enumerate(node["anyOf"])
        ]
    for key in ("$defs", "definitions"):
        if key in node:
            node[key] = {
                name: _strict(child, f"{path}/{key}/{name}", 1, counts)
                for name, child in node[key].items()
            }
    return node


def _describe(node: dict[str, Any], where: str) -> None:
    """Move the STRICT_DESCRIBED keywords of one schema into its description, in words."""
    least, most = node.pop("minLength", None), node.pop("maxLength", None)
    if least is not None and most is not None:
        _add_sentence(node, f"Between {least} and {most} characters.")
    elif least is not None:
        _add_sentence(node, f"At least {least} character{'s' if least != 1 else ''}.")
    elif most is not None:
        _add_sentence(node, f"At most {most} character{'s' if most != 1 else ''}.")
    if node.pop("uniqueItems", False) is True:
        _add_sentence(node, "No item may appear twice.")
    if "oneOf" in node:
        if "anyOf" in node:
            raise NotStrict(f"{where}: 'oneOf' beside 'anyOf' is not supported in strict mode")
        node["anyOf"] = node.pop("oneOf")
        _add_sentence(node, "Exactly one of the alternatives must match.")
    if "default" in node:
        _add_sentence(node, f"Default: {_json(node.pop('default'))}.")
    if "examples" in node:
        examples = node.pop("examples")
        if isinstance(examples, list) and examples:
            _add_sentence(node, f"Examples: {', '.join(_json(e) for e in examples[:5])}.")
    if node.pop("deprecated", False) is True:
        _add_sentence(node, "Deprecated: avoid it.")


def _add_sentence(node: dict[str, Any], sentence: str) -> None:
    text = node.get("description")
    node["description"] = (
        f"{text.rstrip()} {sentence}" if isinstance(text, str) and text.strip() else sentence
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _quoted(keywords: list[str]) -> str:
    return ", ".join(f"'{keyword}'" for keyword in keywords)


def _nullable(schema: Any) -> Any:
    """The schema of an optional property that a strict model leaves out by sending null.

    Null joins the ``type`` and the ``enum`` (a ``const`` becomes an ``enum`` of the value and
    null): under JSON Schema both must accept it, or the model could never leave it out.
    """
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind is None and "enum" not in schema and "const" not in schema:
        if isinstance(schema.get("anyOf"), list):
            if any(isinstance(b, dict) and b.get("type") == "null" for b in schema["anyOf"]):
                return schema
            return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
        return {"anyOf": [schema, {"type": "null"}]}
    result = dict(schema)
    if isinstance(kind, str) and kind != "null":
        result["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        result["type"] = [*kind, "null"]
    if "const" in result:
        # Beside an enum, a const already names the one value both allow.
        result["enum"] = [result.pop("const")]
    if isinstance(result.get("enum"), list) and None not in result["enum"]:
        result["enum"] = [*result["enum"], None]
    return result
