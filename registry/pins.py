"""The pin of a tool: a canonical hash of the definition its MCP server declares.

Pure Python (no Django). A runtime or gateway that lists a server's tools computes the same
hash of each live definition and compares it with the approved one the registry exports
(``_meta`` of ``export/mcp/``, ``definition_hash`` of ``tools/``), so it can withhold a tool
whose server changed it after review.

What counts is what a model reads and what a call must look like: ``description``,
``inputSchema``, ``outputSchema`` and the annotations' hints. Names are left out (the registry
namespaces them as ``<server>.<tool>``), and so are titles (display names, top-level or in the
annotations) and ``_meta``. Absent, null and empty values are left out, so ``outputSchema: null``
and no ``outputSchema`` pin the same definition. The canonical form is JSON with sorted keys,
no spaces and UTF-8 text, hashed with SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

PINNED_KEYS = ("description", "inputSchema", "outputSchema", "annotations")
UNPINNED_ANNOTATIONS = frozenset({"title"})


def pinned_part(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an MCP tool definition (a ``tools/list`` entry) that the pin covers."""
    part: dict[str, Any] = {}
    for key in PINNED_KEYS:
        value = definition.get(key)
        if key == "annotations" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k not in UNPINNED_ANNOTATIONS}
        if value is None or value == {} or value == "":
            continue
        part[key] = value
    return part


def definition_hash(definition: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the definition's pinned part."""
    encoded = json.dumps(
        pinned_part(definition), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(encoded.encode()).hexdigest()


def contract_definition(document: Mapping[str, Any]) -> dict[str, Any]:
    """The MCP definition a contract document stands for (the registry's name kept)."""
    definition: dict[str, Any] = {
        "name": document["name"],
        "description": document.get("description") or "",
        "inputSchema": document.get("input_schema") or {"type": "object"},
    }
    if document.get("output_schema"):
        definition["outputSchema"] = document["output_schema"]
    if document.get("annotations"):
        definition["annotations"] = document["annotations"]
    return definition


def contract_pin(document: Mapping[str, Any]) -> str:
    """The definition hash of a contract document: what its tool's server must still declare."""
    return definition_hash(contract_definition(document))
