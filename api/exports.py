"""Contract documents in the shapes LLM SDKs take (pure: no Django).

OpenAI and Anthropic accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. Registry names are
dotted, contain no ``__`` and fit in 64 characters once each ``.`` becomes ``__`` (validation
enforces both), so ``provider_name`` is a bijection and ``registry_name`` its inverse.
MCP keeps the registry's names as they are.
"""

from __future__ import annotations

import copy
import re
from typing import Any

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
WRITE_PERMISSIONS = {"write", "delete", "send", "payments", "admin"}
OPEN_WORLD_PERMISSIONS = {"external_api", "read_web"}
# Keywords OpenAI's strict mode does not accept; a schema using one cannot be made strict.
STRICT_UNSUPPORTED = {
    "allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "patternProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames",
    "minProperties", "maxProperties", "contains", "prefixItems",
}  # fmt: skip


def provider_name(name: str) -> str:
    return name.replace(".", "__")


def registry_name(name: str) -> str:
    return name.replace("__", ".")


def llm_description(document: dict, mandate: str = "") -> str:
    """The description the model reads: the tool's own, its invariant rules, the app's mandate."""
    parts = [document["description"].strip()]
    rules = [entry["rule"] for entry in document.get("invariants") or [] if entry.get("rule")]
    if rules:
        parts.append("Rules:\n" + "\n".join(f"- {rule}" for rule in rules))
    if mandate.strip():
        parts.append("Policy: " + mandate.strip())
    return "\n\n".join(parts)


def openai_tool(document: dict, *, mandate: str = "", strict: bool = False) -> dict:
    parameters = copy.deepcopy(document["input_schema"])
    function = {
        "name": provider_name(document["name"]),
        "description": llm_description(document, mandate),
        "parameters": parameters,
    }
    if strict:
        function["parameters"] = strict_schema(parameters)
        function["strict"] = True
    return {"type": "function", "function": function}


def anthropic_tool(document: dict, *, mandate: str = "") -> dict:
    return {
        "name": provider_name(document["name"]),
        "description": llm_description(document, mandate),
        "input_schema": copy.deepcopy(document["input_schema"]),
    }


def mcp_tool(document: dict, *, mandate: str = "") -> dict:
    permissions = set(document.get("permissions") or [])
    read_only = not (permissions & WRITE_PERMISSIONS) and not document.get("produces_side_effects")
    tool: dict[str, Any] = {
        "name": document["name"],
        "description": llm_description(document, mandate),
        "inputSchema": copy.deepcopy(document["input_schema"]),
        "annotations": {
            "title": document["name"],
            "readOnlyHint": read_only,
            "destructiveHint": "delete" in permissions
            or (not read_only and document.get("risk") == "high"),
            # Reads can be repeated safely; a write is idempotent only if its contract says so.
            "idempotentHint": read_only
            or any(
                entry.get("kind") == "unique_calls" for entry in document.get("invariants") or []
            ),
            "openWorldHint": bool(permissions & OPEN_WORLD_PERMISSIONS),
        },
    }
    if document.get("output_schema"):
        tool["outputSchema"] = copy.deepcopy(document["output_schema"])
    return tool


class NotStrict(ValueError):
    """The schema uses something OpenAI's strict mode cannot express."""


def strict_schema(schema: dict) -> dict:
    """OpenAI strict mode: every object closed, every property required (optional ones nullable)."""
    return _strict(copy.deepcopy(schema), "")


def _strict(node: Any, path: str) -> Any:
    if not isinstance(node, dict):
        return node
    for keyword in sorted(STRICT_UNSUPPORTED & set(node)):
        raise NotStrict(f"{path or '/'}: '{keyword}' is not supported in strict mode")
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") not in (None, False):
            raise NotStrict(f"{path or '/'}: additionalProperties must be false in strict mode")
        properties = node.get("properties", {})
        required = set(node.get("required", []))
        for name, child in properties.items():
            child = _strict(child, f"{path}/properties/{name}")
            properties[name] = child if name in required else _nullable(child)
        node["properties"] = properties
        node["required"] = list(properties)
        node["additionalProperties"] = False
    for key in ("items",):
        if key in node:
            node[key] = _strict(node[key], f"{path}/{key}")
    for key in ("anyOf",):
        if key in node:
            node[key] = [_strict(child, f"{path}/{key}/{i}") for i, child in enumerate(node[key])]
    for key in ("$defs", "definitions"):
        if key in node:
            node[key] = {
                name: _strict(child, f"{path}/{key}/{name}") for name, child in node[key].items()
            }
    return node


def _nullable(schema: dict) -> dict:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}
