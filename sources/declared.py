"""What an MCP server declares, as the registry takes it: one contract document per tool.

Pure Python (no Django). ``declared_document`` maps one ``tools/list`` entry to the contract
of ``<server>.<tool>`` (description, ``inputSchema`` → ``input_schema``, ``outputSchema`` →
``output_schema``, the annotations kept verbatim and only when declared) together with the
definition as the server sent it (its top-level ``title`` included) and its pin
(``registry/pins.py``: the hash of that definition, every key kept), or refuses it with a
reason. Everything a
reviewer owns (requires, produces, risk, permissions, invariants...) comes from the approved
version when there is one: the server declares an interface, people decide the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from registry.contract import with_defaults
from registry.pins import NotCanonical, definition_hash

# What the server owns in a contract; every other field is the reviewers'.
DECLARED_FIELDS = ("description", "input_schema", "output_schema", "annotations")
# Whole names: ``\Z``, not ``$`` (which matches before a final newline), since Django's
# RegexValidator searches; the code here uses ``fullmatch``.
SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}\Z")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
MAX_SHOWN_NAME = 64


@dataclass(frozen=True)
class Declared:
    """One declared tool the registry can take: its local and registry names, the definition
    as its server sent it, its pin and the declared part of its contract."""

    local_name: str
    name: str
    pin: str
    declared: dict[str, Any]
    definition: dict[str, Any]


class Refused(ValueError):
    """A declared tool the registry cannot take; the message says why."""


def shown(name: Any) -> str:
    text = str(name)
    return text if len(text) <= MAX_SHOWN_NAME else text[: MAX_SHOWN_NAME - 3] + "..."


def declared_tool(server: str, definition: Mapping[str, Any]) -> Declared:
    """The declared part of one ``tools/list`` entry, or ``Refused`` saying why."""
    local_name = definition.get("name")
    if not isinstance(local_name, str) or not TOOL_NAME.fullmatch(local_name) or "__" in local_name:
        raise Refused(
            f"name {shown(local_name)!r}: the registry takes letters, digits, '_', '-' and "
            "single dots ('__' is kept for provider names)"
        )
    description = definition.get("description")
    if not isinstance(description, str) or not description.strip():
        raise Refused("description: none declared; a reviewer and a model need one")
    input_schema = definition.get("inputSchema")
    if not isinstance(input_schema, Mapping):
        raise Refused("inputSchema: must be a JSON Schema object")
    annotations = definition.get("annotations")
    if annotations is not None and not isinstance(annotations, Mapping):
        raise Refused("annotations: must be an object")
    annotations = dict(annotations or {})
    declared: dict[str, Any] = {
        "description": description,
        "input_schema": dict(input_schema),
        "output_schema": definition.get("outputSchema"),
        "annotations": annotations,
    }
    try:
        pin = definition_hash(definition)
    except NotCanonical as exc:
        raise Refused(f"its definition has no canonical JSON form: {exc}") from None
    return Declared(
        local_name=local_name,
        name=f"{server}.{local_name}",
        pin=pin,
        declared=declared,
        definition=dict(definition),
    )


def legacy_annotations(declared: Declared) -> dict[str, Any]:
    """The annotations versions stored before definitions were kept hold for this declaration:
    a top-level ``title`` was copied into them when they had none."""
    annotations = dict(declared.declared["annotations"])
    title = declared.definition.get("title")
    if isinstance(title, str) and title and "title" not in annotations:
        annotations["title"] = title
    return annotations


def declared_document(
    declared: Declared, *, approved: Mapping[str, Any] | None, risk: str
) -> dict[str, Any]:
    """The contract to propose at ``risk``: the approved contract with the declared fields
    replaced, or a new contract with nothing else said."""
    if approved is None:
        document: dict[str, Any] = {"name": declared.name, "requires": [], "produces": []}
    else:
        document = {
            key: value for key, value in with_defaults(approved).items() if key != "version"
        }
    document["risk"] = risk
    document.update(declared.declared)
    if document.get("output_schema") is None:
        document.pop("output_schema", None)
    return document
