"""What changed between two JSON Schemas, subschema by subschema, and which way it cuts.

Pure Python (no Django). ``schema_changes(old, new)`` lists every change that narrows what the
schema accepts (``breaks``: a caller written against the old schema may now be refused) or
loosens it (``loosens``: calls the old schema refused are now accepted); a change that cannot
be shown either way without a solver (a new pattern) does both. A change that does neither
(a new optional property) is listed too, with both false. Two readers use it:
``reviews.diff`` (what a call need no longer carry, which needs a person) and
``sources.compat`` (whether a changed server breaks its callers).

One rule for integers: an integer is a number, so ``number`` → ``integer`` narrows and
``integer`` → ``number`` widens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol, TypeGuard

from registry.schema_limits import DEFINITIONS, ONE_SUBSCHEMA, SUBSCHEMA_LISTS

# Keywords holding subschemas, walked so that a change deep inside shows with its path.
SUBSCHEMA_MAPS = ("patternProperties", "dependentSchemas", *DEFINITIONS)
# Keywords whose value bounds a number, a length or a count from below or from above.
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties",
                "minContains")  # fmt: skip
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties",
                "maxContains")  # fmt: skip
# Assertions whose change cannot be shown to be a tightening or a loosening without a solver.
OPAQUE_ASSERTIONS = ("pattern", "format", "const", "$ref", "$dynamicRef", "dependentRequired",
                     "multipleOf", "contentMediaType", "contentEncoding")  # fmt: skip
BRANCHES = ("anyOf", "oneOf")
OPEN_KEYWORDS = ("additionalProperties", "unevaluatedProperties", "additionalItems",
                 "unevaluatedItems")  # fmt: skip


class SchemaNode(NamedTuple):
    parent: str | None
    own: Any  # the node's keywords without its subschemas and "required"; or a boolean schema
    whole: Any  # the subschema as written
    name: str | None = None  # its name in a map (a property, a $defs entry); None for items…
    required: tuple[str, ...] = ()  # the names its "required" lists, as written


class SchemaChange(NamedTuple):
    """One change at ``path`` (dotted, "" for the root): ``kind`` names it (``required``,
    ``type``, ``enum``, ``removed``, a keyword...), ``message`` says it to a person."""

    path: str
    kind: str
    message: str
    breaks: bool
    loosens: bool


class _Note(Protocol):
    def __call__(
        self, path: str, kind: str, message: str, *, breaks: bool, loosens: bool
    ) -> None: ...


def join(parent: str, segment: str) -> str:
    return f"{parent}.{segment}" if parent else segment


def flatten(schema: Any) -> tuple[dict[str, SchemaNode], list[str]]:
    """Every subschema by dotted path ("" is the root; properties by name, "items", "anyOf.0"),
    and the dotted paths of required properties ("attendees.items.email"). Iterative, so any
    depth is safe."""
    nodes: dict[str, SchemaNode] = {}
    required: list[str] = []
    pending: list[tuple[str, str | None, str | None, Any]] = [("", None, None, schema)]
    while pending:
        path, parent, node_name, node = pending.pop()
        if path in nodes:
            continue  # a property named like a keyword ("items"): the first one wins
        if not isinstance(node, Mapping):
            nodes[path] = SchemaNode(parent, node, node, node_name)
            continue
        own: dict[str, Any] = {}
        names: tuple[str, ...] = ()
        children: list[tuple[str, str | None, Any]] = []
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, Mapping):
                children += [(join(path, str(name)), str(name), sub) for name, sub in value.items()]
            elif keyword in SUBSCHEMA_MAPS and isinstance(value, Mapping):
                children += [
                    (join(path, f"{keyword}.{name}"), str(name), sub) for name, sub in value.items()
                ]
            elif keyword in SUBSCHEMA_LISTS and isinstance(value, list):
                children += [
                    (join(path, f"{keyword}.{i}"), None, sub) for i, sub in enumerate(value)
                ]
            elif keyword in ONE_SUBSCHEMA and isinstance(value, Mapping):
                children.append((join(path, keyword), None, value))
            elif (
                keyword == "required"
                and isinstance(value, list)
                and all(isinstance(item, str) for item in value)
            ):
                required += [join(path, item) for item in value]
                names = tuple(value)
            else:
                own[keyword] = value
        nodes[path] = SchemaNode(parent, own, node, node_name, names)
        # Depth-first in document order (a stack, so pushed in reverse): a parent is listed
        # before its children, and properties keep the order their author gave them.
        pending.extend(
            (child_path, path, child_name, sub)
            for child_path, child_name, sub in reversed(children)
        )
    return nodes, list(dict.fromkeys(required))


def schema_changes(old: Any, new: Any) -> list[SchemaChange]:
    """Every change from the ``old`` schema to the ``new``, in the order of ``flatten``."""
    old_nodes, old_required = flatten(old)
    new_nodes, new_required = flatten(new)
    return node_changes(old_nodes, new_nodes, old_required=old_required, new_required=new_required)


def node_changes(
    old_nodes: Mapping[str, SchemaNode],
    new_nodes: Mapping[str, SchemaNode],
    *,
    old_required: Iterable[str],
    new_required: Iterable[str],
) -> list[SchemaChange]:
    """``schema_changes`` over schemas already flattened."""
    found: list[SchemaChange] = []

    def note(path: str, kind: str, message: str, *, breaks: bool, loosens: bool) -> None:
        found.append(SchemaChange(path, kind, message, breaks, loosens))

    was_required, now_required = set(old_required), set(new_required)
    for path in old_required:
        if path not in now_required:
            note(path, "required", "no longer required", breaks=False, loosens=True)
    for path in new_required:
        if path not in was_required and path in old_nodes:
            note(path, "required", "now required", breaks=True, loosens=False)
    for path, old in old_nodes.items():
        new = new_nodes.get(path)
        if new is None:
            # Report a dropped subtree once, at its top. A dropped alternative narrows what is
            # accepted; anything else dropped (a property, an items or not schema) is no longer
            # checked, and whoever relied on it is no longer served.
            if old.parent is None or old.parent in new_nodes:
                if _branch_keyword(path, old):
                    note(path, "removed", "alternative removed", breaks=True, loosens=False)
                else:
                    note(
                        path,
                        "removed",
                        "subschema removed: what it constrained is no longer checked",
                        breaks=True,
                        loosens=True,
                    )
            continue
        _node_changes(path, old, new, note)
    for path, new in new_nodes.items():
        parent = new.parent
        if path in old_nodes or parent is None or parent not in old_nodes:
            continue
        branch = _branch_keyword(path, new)
        if branch:
            if isinstance(old_nodes[parent].whole, Mapping) and branch in old_nodes[parent].whole:
                note(
                    path,
                    "added",
                    f"{branch} alternative added: one more shape is accepted",
                    breaks=False,
                    loosens=True,
                )
        elif path in now_required:
            note(path, "added", "new required property", breaks=True, loosens=False)
        else:
            note(path, "added", "new optional property", breaks=False, loosens=False)
    return found


def _node_changes(path: str, old: SchemaNode, new: SchemaNode, note: _Note) -> None:
    if isinstance(old.own, bool) or isinstance(new.own, bool):
        if (
            old.own is False
            and new.own is not False
            or (isinstance(old.own, Mapping) and new.own is True)
        ):
            note(
                path,
                "opened",
                f"opened: was {json.dumps(old.whole)[:80]}, now {new.own}",
                breaks=False,
                loosens=True,
            )
        elif new.own is False and old.own is not False:
            note(path, "closed", "closed: now refuses every value", breaks=True, loosens=False)
        return
    if not isinstance(old.own, Mapping) or not isinstance(new.own, Mapping):
        return
    _type_changes(path, old.own, new.own, note)
    _enum_changes(path, old.own, new.own, note)
    _bound_changes(path, old.own, new.own, note)
    _assertion_changes(path, old.own, new.own, note)
    for keyword in OPEN_KEYWORDS:
        before = old.whole.get(keyword) if isinstance(old.whole, Mapping) else None
        after = new.whole.get(keyword) if isinstance(new.whole, Mapping) else None
        if before is False and after is not False:
            note(
                path,
                keyword,
                f"{keyword} opened: was false, now {json.dumps(after)[:80]}",
                breaks=False,
                loosens=True,
            )
        elif after is False and before is not False:
            note(path, keyword, f"{keyword} closed: now false", breaks=True, loosens=False)


def types(value: Any) -> set[str] | None:
    """The JSON types a ``type`` keyword names, or None when it names none."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return set(value)
    return None


def _covered(kind: str, kinds: set[str]) -> bool:
    return kind in kinds or (kind == "integer" and "number" in kinds)


def _type_changes(path: str, old: Mapping[str, Any], new: Mapping[str, Any], note: _Note) -> None:
    old_types, new_types = types(old.get("type")), types(new.get("type"))
    if old_types is None and new_types is None:
        return
    if new_types is None:
        note(
            path,
            "type",
            f"type no longer constrained (was {sorted(old_types or ())})",
            breaks=False,
            loosens=True,
        )
        return
    if old_types is None:
        note(path, "type", f"type set to {sorted(new_types)}", breaks=True, loosens=False)
        return
    change = f"{sorted(old_types)} to {sorted(new_types)}"
    # A type the old schema took and the new one refuses narrows; the reverse widens.
    for verb, kinds, other, breaks in (
        ("narrowed", old_types, new_types, True),
        ("widened", new_types, old_types, False),
    ):
        if any(not _covered(kind, other) for kind in kinds):
            note(path, "type", f"type {verb}: {change}", breaks=breaks, loosens=not breaks)


def _enum_changes(path: str, old: Mapping[str, Any], new: Mapping[str, Any], note: _Note) -> None:
    before, after = old.get("enum"), new.get("enum")
    if isinstance(before, list) and not isinstance(after, list):
        note(path, "enum", "enum removed: any value is accepted", breaks=False, loosens=True)
        return
    if not isinstance(after, list):
        return
    if not isinstance(before, list):
        note(path, "enum", "enum added", breaks=True, loosens=False)
        return
    dropped = [value for value in before if value not in after]
    if dropped:
        shown = json.dumps(dropped, ensure_ascii=False)[:120]
        note(path, "enum", f"enum narrowed: drops {shown}", breaks=True, loosens=False)
    extra = [value for value in after if value not in before]
    if extra:
        shown = json.dumps(extra, ensure_ascii=False)[:120]
        note(path, "enum", f"enum widened by {shown}", breaks=False, loosens=True)


def _bound_changes(path: str, old: Mapping[str, Any], new: Mapping[str, Any], note: _Note) -> None:
    for keyword in (*LOWER_BOUNDS, *UPPER_BOUNDS):
        before, after = old.get(keyword), new.get(keyword)
        if not _is_number(before):
            if _is_number(after):
                note(path, keyword, f"{keyword} added: {after}", breaks=True, loosens=False)
            continue
        if _is_number(after) and after == before:
            continue
        tighter = _is_number(after) and (
            after > before if keyword in LOWER_BOUNDS else after < before
        )
        if tighter:
            message = f"{keyword} tightened: was {before}, now {after}"
            note(path, keyword, message, breaks=True, loosens=False)
        else:
            message = f"{keyword} relaxed: was {before}, now {after}"
            note(path, keyword, message, breaks=False, loosens=True)


def _assertion_changes(
    path: str, old: Mapping[str, Any], new: Mapping[str, Any], note: _Note
) -> None:
    for keyword in OPAQUE_ASSERTIONS:
        if old.get(keyword) == new.get(keyword):
            continue
        if keyword not in old:
            note(path, keyword, f"{keyword} added", breaks=True, loosens=False)
        elif keyword not in new:
            message = f"{keyword} removed: was {json.dumps(old[keyword])[:80]}"
            note(path, keyword, message, breaks=False, loosens=True)
        else:
            message = f"{keyword} changed: was {json.dumps(old[keyword])[:80]}"
            note(path, keyword, message, breaks=True, loosens=True)
    # uniqueItems: true refuses what false or its absence accepts.
    if old.get("uniqueItems") is True and new.get("uniqueItems") is not True:
        note(path, "uniqueItems", "uniqueItems removed", breaks=False, loosens=True)
    elif new.get("uniqueItems") is True and old.get("uniqueItems") is not True:
        note(path, "uniqueItems", "uniqueItems added", breaks=True, loosens=False)


def _branch_keyword(path: str, node: SchemaNode) -> str | None:
    """ "anyOf" or "oneOf" when the node is one of their alternatives."""
    if node.parent is None:
        return None
    keyword = path[len(node.parent) :].lstrip(".").split(".", 1)[0]
    return keyword if keyword in BRANCHES else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
