"""The JSON Schema 2020-12 metaschema as one document, checked without reference resolution.

Every schema stored is checked against the 2020-12 metaschema. As published, that metaschema
is eight documents: the root combines seven vocabulary metaschemas with ``allOf`` and
``$ref``, and each of them reaches back to the root with ``"$dynamicRef": "#meta"`` at every
place a subschema goes. jsonschema resolves each reference by URI and each dynamic reference
through the dynamic scope, at every node of every schema checked: most of the check's time.

``METASCHEMA_VALIDATOR`` checks the same rules on one document built from them once:

- each ``{"$ref": "meta/<vocabulary>"}`` of the root's ``allOf`` is replaced by that
  vocabulary's metaschema, in place (the same subschemas in the same order), its ``$defs``
  moved to the root's (their names do not clash: checked when the document is built);
- each ``"$dynamicRef": "#meta"`` becomes ``"$ref": "#"``, the root. That is what it resolves
  to: the check always starts at the root, whose ``"$dynamicAnchor": "meta"`` is the outermost
  one in the dynamic scope, and a dynamic reference resolves to the outermost resource that
  declares its anchor;
- the identifiers that only named the documents for resolution (``$id``, ``$schema``,
  ``$vocabulary``, ``$dynamicAnchor``) are dropped; no validation keyword reads them.

Its ``$ref`` keyword looks the few local targets (``#`` and ``#/$defs/<name>``) up in a
table. Every other keyword, the format checker and the order in which keywords and
subschemas are visited are jsonschema's own, so the errors, and which comes first, are the
same: ``registry/tests/test_metaschema.py`` compares both on valid and invalid schemas.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema_specifications import REGISTRY

# What only named the documents for resolution; no keyword of the check reads them.
_RESOLUTION_ONLY = ("$id", "$schema", "$vocabulary", "$dynamicAnchor")


def _vocabulary(reference: str) -> dict[str, Any]:
    contents = REGISTRY.contents(f"https://json-schema.org/draft/2020-12/{reference}")
    return copy.deepcopy(dict(contents))


def _local(key: str, value: Any, defined_in: dict[str, str]) -> tuple[str, Any]:
    """A reference of the published documents as the one document spells it."""
    if key == "$dynamicRef" and value == "#meta":
        return "$ref", "#"
    if key == "$ref" and isinstance(value, str) and "#/$defs/" in value:
        # "meta/core#/$defs/anchorString" (the root's deprecated keywords): moved to the root.
        document, name = value.split("#/$defs/", 1)
        if document and defined_in.get(name) != document:
            raise ValueError(f"{value}: not where its definition came from")
        return key, f"#/$defs/{name}"
    return key, value


def _to_root(node: Any, defined_in: dict[str, str]) -> Any:
    """``node`` with its references local (``_local``), keys kept in order."""
    if isinstance(node, list):
        return [_to_root(item, defined_in) for item in node]
    if not isinstance(node, dict):
        return node
    return dict(_local(key, _to_root(value, defined_in), defined_in) for key, value in node.items())


def one_document() -> dict[str, Any]:
    """The 2020-12 metaschema with its vocabularies inlined and its references local."""
    root = copy.deepcopy(dict(Draft202012Validator.META_SCHEMA))
    definitions: dict[str, Any] = dict(root.pop("$defs", {}))
    defined_in = dict.fromkeys(definitions, "")
    inlined = []
    for part in root["allOf"]:
        vocabulary = _vocabulary(part["$ref"])
        for name, definition in vocabulary.pop("$defs", {}).items():
            if name in definitions:
                raise ValueError(f"two vocabularies define $defs/{name}")
            definitions[name] = definition
            defined_in[name] = part["$ref"]
        inlined.append(vocabulary)
    root["allOf"] = inlined
    for part in (root, *inlined):
        for key in _RESOLUTION_ONLY:
            part.pop(key, None)
    root["$defs"] = definitions
    return _to_root(root, defined_in)


def _targets(document: dict[str, Any]) -> dict[str, Any]:
    targets = {"#": document}
    targets.update((f"#/$defs/{name}", value) for name, value in document["$defs"].items())
    return targets


def _references(node: Any) -> Iterator[str]:
    # Property names such as "$ref" under "properties" are not references: only a string value
    # of a "$ref" or "$dynamicRef" key is, and every one in the metaschema has one.
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield f"{key} {value}"
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


_DOCUMENT = one_document()
_TARGETS = _targets(_DOCUMENT)
_unknown = set(_references(_DOCUMENT)) - {f"$ref {target}" for target in _TARGETS}
if _unknown:
    raise ValueError(f"the metaschema refers to what one document lacks: {sorted(_unknown)}")


def _local_ref(validator: Any, ref: str, instance: Any, schema: Any) -> Iterator[Any]:
    # jsonschema's own "$ref" descends into what it resolves, with no path of its own.
    yield from validator.descend(instance, _TARGETS[ref])


_OneDocumentValidator = validators.extend(Draft202012Validator, {"$ref": _local_ref})

METASCHEMA_VALIDATOR = _OneDocumentValidator(
    _DOCUMENT, format_checker=Draft202012Validator.FORMAT_CHECKER
)
