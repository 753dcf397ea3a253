"""How much work a contract's JSON Schema may ask of a validator; contract validation enforces it.

A schema is written by whoever proposes a contract, and a small one can describe an enormous
validation: thirty ``$defs`` that each reference the previous one twice through ``anyOf`` are
two kilobytes of JSON and 2^30 subschemas to try against one argument. ``schema_limit_errors``
refuses such schemas before they are stored:

=======================  ======  ==========================================================
Limit                    Value   What is counted
=======================  ======  ==========================================================
``MAX_DEPTH``            64      levels of JSON objects and arrays in the schema document
                                 (the root object is level 1); tool arguments may nest as
                                 deep, and recursive checks of deeper documents exhaust
                                 Python's recursion limit
``MAX_BRANCHES``         32      subschemas in one ``allOf``, ``anyOf`` or ``oneOf``; a union
                                 of more alternatives is better split into tools
``MAX_EXPANDED``         5,000   subschemas once every local ``$ref``/``$dynamicRef`` is
                                 replaced by the schema it points to (see below): the
                                 number a validator may visit for one argument value
=======================  ======  ==========================================================

Besides, no object below the root may carry ``$schema``: a validator switches dialect (and,
in jsonschema, validator class) at such a subschema, which plan validation does not allow.

Counting the expansion
----------------------
The expansion is counted, never built: each subschema's count is 1 plus the counts of its
subschemas and of the targets of its references, memoised per subschema, so the work is
linear in the document. A reference back into a subschema whose count is still being taken
(a recursive definition such as a tree node whose children are tree nodes) counts as 1: its
recursion is driven by the argument's own nesting, and each definition on the cycle is counted
once. Since counts add up along every path, a chain of combinators whose fan-outs multiply
(two branches per level, thirty levels deep) is caught by ``MAX_EXPANDED`` whether it is written
out or folded through ``$defs``. What a recursive definition costs per level of an argument is
not bounded here: plan validation bounds it with a work budget (``api/planning.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from .jsonlimits import deeper_than

MAX_DEPTH = 64
MAX_BRANCHES = 32
MAX_EXPANDED = 5_000

# Keywords whose value is one subschema, a list of them, or a map of names to them (the one
# list of them: the review diff walks schemas by the same keywords).
ONE_SUBSCHEMA = (
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "dependentSchemas")
DEFINITIONS = ("$defs", "definitions")  # hold subschemas that only references evaluate
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_REFERENCES = ("$ref", "$dynamicRef")


def schema_limit_errors(schema: Any) -> list[str]:
    """Why ``schema`` asks too much of a validator; empty when it is within every limit."""
    deep = deeper_than(schema, MAX_DEPTH)
    if deep is not None:
        # Stop here: the other checks, and the metaschema check after them, would recurse.
        where = _pointer(list(deep))
        return [f"nests deeper than {MAX_DEPTH} levels of objects and arrays (at {where})"]
    reasons = [
        f"{path}: only the root may name a dialect ($schema)" for path in _nested_dialects(schema)
    ]
    for path, keyword, count in _wide_combinators(schema):
        reasons.append(
            f"{path}/{keyword}: combines {count} subschemas; at most {MAX_BRANCHES} are allowed"
        )
    if _expanded_size(schema, MAX_EXPANDED) > MAX_EXPANDED:
        reasons.append(
            f"expands to more than {MAX_EXPANDED:,} subschemas once its $refs are followed "
            "(allOf/anyOf/oneOf over shared definitions multiply)"
        )
    return reasons


def _pointer(path: list[str | int]) -> str:
    text = "".join(f"/{part}" for part in path) or "(root)"
    return text if len(text) <= 100 else text[:97] + "..."


def _nested_dialects(schema: Any) -> Iterator[str]:
    # Every object below the root, not only subschemas: a $ref may point into any of them.
    pending: list[tuple[Any, list[str | int]]] = [(schema, [])]
    while pending:
        item, path = pending.pop()
        if isinstance(item, Mapping):
            if path and "$schema" in item:
                yield _pointer([*path, "$schema"])
            pending.extend((child, [*path, key]) for key, child in item.items())
        elif isinstance(item, list):
            pending.extend((child, [*path, index]) for index, child in enumerate(item))


def _subschemas(node: Any, *, definitions: bool) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(relative path, subschema) for each subschema directly under ``node``."""
    if not isinstance(node, Mapping):
        return
    for keyword in ONE_SUBSCHEMA:
        if isinstance(node.get(keyword), Mapping | bool):
            yield (keyword,), node[keyword]
    for keyword in SUBSCHEMA_LISTS:
        if isinstance(node.get(keyword), list):
            for index, child in enumerate(node[keyword]):
                yield (keyword, index), child
    for keyword in _MAP + (DEFINITIONS if definitions else ()):
        if isinstance(node.get(keyword), Mapping):
            for name, child in node[keyword].items():
                yield (keyword, name), child


def _wide_combinators(schema: Any) -> Iterator[tuple[str, str, int]]:
    pending: list[tuple[Any, list[str | int]]] = [(schema, [])]
    while pending:
        node, path = pending.pop()
        if not isinstance(node, Mapping):
            continue
        for keyword in _COMBINATORS:
            branches = node.get(keyword)
            if isinstance(branches, list) and len(branches) > MAX_BRANCHES:
                yield _pointer(path).removesuffix("(root)"), keyword, len(branches)
        pending.extend(
            (child, [*path, *where]) for where, child in _subschemas(node, definitions=True)
        )


class _Resource:
    """A schema resource (the root, or a subschema with ``$id``): what ``#...`` resolves in."""

    def __init__(self, root: Any):
        self.root = root
        self._anchors: dict[str, Any] | None = None

    def resolve(self, reference: Any) -> Any:
        if not isinstance(reference, str) or not reference.startswith("#"):
            return None  # refused by contract validation; never followed
        fragment = unquote(reference[1:])
        if fragment and not fragment.startswith("/"):
            return self.anchors().get(fragment)
        target = self.root
        for token in fragment.split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None  # plan validation reports a reference that does not resolve
        return target

    def anchors(self) -> dict[str, Any]:
        if self._anchors is None:
            self._anchors = {}
            pending = [self.root]
            while pending:
                item = pending.pop()
                if isinstance(item, Mapping):
                    for keyword in ("$anchor", "$dynamicAnchor"):
                        if isinstance(item.get(keyword), str):
                            self._anchors.setdefault(item[keyword], item)
                    pending.extend(item.values())
                elif isinstance(item, list):
                    pending.extend(item)
        return self._anchors


def _expanded_size(schema: Any, limit: int) -> int:
    """Subschemas in ``schema`` with references expanded, counted up to just past ``limit``."""
    root = _Resource(schema)
    resources: dict[int, _Resource] = {id(schema): root}
    sizes: dict[tuple[int, int], int] = {}
    open_keys: set[tuple[int, int]] = set()

    def evaluated(node: Any, resource: _Resource) -> list[tuple[Any, _Resource]]:
        children = [child for _, child in _subschemas(node, definitions=False)]
        if isinstance(node, Mapping):
            children += [resource.resolve(node.get(keyword)) for keyword in _REFERENCES]
        found = []
        for child in children:
            if child is None:
                continue
            if isinstance(child, Mapping) and isinstance(child.get("$id"), str):
                resources.setdefault(id(child), _Resource(child))
                found.append((child, resources[id(child)]))
            else:
                found.append((child, resource))
        return found

    # Frames: [key, children still to count, count so far]. Iterative, because a chain of
    # references can be longer than Python's recursion limit.
    stack: list[list[Any]] = []

    def open_frame(node: Any, resource: _Resource) -> None:
        key = (id(node), id(resource))
        open_keys.add(key)
        stack.append([key, evaluated(node, resource), 1])

    open_frame(schema, root)
    while stack:
        frame = stack[-1]
        if frame[2] > limit:
            return frame[2]  # counts only grow towards the root: no need to finish
        if frame[1]:
            child, resource = frame[1].pop()
            key = (id(child), id(resource))
            if key in sizes:
                frame[2] += sizes[key]
            elif key in open_keys:
                frame[2] += 1  # a reference back into a definition being counted
            else:
                open_frame(child, resource)
            continue
        stack.pop()
        open_keys.discard(frame[0])
        sizes[frame[0]] = frame[2]
        if stack:
            stack[-1][2] += frame[2]
        else:
            return frame[2]
    return 0
