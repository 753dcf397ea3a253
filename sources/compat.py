"""Whether a changed schema breaks its callers or only widens what it takes.

Pure Python (no Django). A caller written against the old input schema breaks when the new one
requires an argument it did not, drops a property, narrows a type or an enum, or tightens a
bound; a consumer of the old output breaks when a property it read disappears. Everything else
that changed widens (a new optional argument, a looser bound, more enum values) or only
changes words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Bounds that only tighten when raised, and those that only tighten when lowered.
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
MAX_DEPTH = 32


def compatibility(
    base_input: Any, proposed_input: Any, base_output: Any = None, proposed_output: Any = None
) -> dict[str, list[str]]:
    """``{"breaking": [...], "widening": [...]}``: one sentence per finding, with its path."""
    breaking: list[str] = []
    widening: list[str] = []
    old, new = dict(_nodes(base_input)), dict(_nodes(proposed_input))
    for path, node in new.items():
        before = old.get(path)
        if before is None:
            if path and not _required(new, path):
                widening.append(f"{path}: new optional argument")
            elif path:
                breaking.append(f"{path}: new required argument")
            continue
        _compare(path or "(root)", before, node, breaking, widening)
        if path and _required(new, path) and not _required(old, path):
            breaking.append(f"{path}: now required")
        elif path and _required(old, path) and not _required(new, path):
            widening.append(f"{path}: no longer required")
    for path in old:
        if path not in new:
            breaking.append(f"{path}: argument removed")
    old_out, new_out = dict(_nodes(base_output)), dict(_nodes(proposed_output))
    if old_out:
        for path in old_out:
            if path and path not in new_out:
                breaking.append(f"output {path}: removed")
    return {"breaking": breaking, "widening": widening}


def _nodes(schema: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every property schema by dotted path ("" is the root; list items as "name[]")."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return
    yield path, schema
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            yield from _nodes(sub, f"{path}.{name}" if path else str(name), depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _nodes(items, f"{path}[]", depth + 1)


def _required(nodes: Mapping[str, Mapping[str, Any]], path: str) -> bool:
    parent, _, name = path.rpartition(".")
    if path.endswith("[]"):
        return False
    node = nodes.get(parent)
    required = node.get("required") if node is not None else None
    return isinstance(required, list) and name in required


def _types(node: Mapping[str, Any]) -> set[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        kinds = {kind}
    elif isinstance(kind, list):
        kinds = {item for item in kind if isinstance(item, str)}
    else:
        return None
    if "number" in kinds:
        kinds.add("integer")  # an integer is a number: number → integer narrows, not the reverse
    return kinds


def _compare(
    path: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    breaking: list[str],
    widening: list[str],
) -> None:
    old_types, new_types = _types(before), _types(after)
    if new_types is not None and (old_types is None or not old_types <= new_types):
        breaking.append(f"{path}: type narrowed to {sorted(new_types)}")
    elif old_types is not None and (new_types is None or new_types > old_types):
        widening.append(f"{path}: type widened")
    old_enum, new_enum = before.get("enum"), after.get("enum")
    if isinstance(new_enum, list):
        dropped = [v for v in old_enum if v not in new_enum] if isinstance(old_enum, list) else []
        if not isinstance(old_enum, list) or dropped:
            breaking.append(
                f"{path}: enum narrowed" + (f" (drops {dropped[:5]})" if dropped else "")
            )
        elif len(new_enum) > len(old_enum):
            widening.append(f"{path}: enum widened")
    elif isinstance(old_enum, list):
        widening.append(f"{path}: enum lifted")
    if "const" in after and after.get("const") != before.get("const", object()):
        breaking.append(f"{path}: const set")
    for keyword in LOWER_BOUNDS + UPPER_BOUNDS:
        old_bound, new_bound = before.get(keyword), after.get(keyword)
        if old_bound == new_bound or not all(_number(v) for v in (new_bound,) if v is not None):
            continue
        if new_bound is None:
            widening.append(f"{path}: {keyword} lifted")
        elif old_bound is None or not _number(old_bound):
            breaking.append(f"{path}: {keyword} {new_bound} added")
        elif (new_bound > old_bound) == (keyword in LOWER_BOUNDS):
            breaking.append(f"{path}: {keyword} tightened from {old_bound} to {new_bound}")
        else:
            widening.append(f"{path}: {keyword} loosened from {old_bound} to {new_bound}")
    if before.get("pattern") != after.get("pattern"):
        if after.get("pattern") is None:
            widening.append(f"{path}: pattern lifted")
        else:
            breaking.append(f"{path}: pattern changed")
    if (
        after.get("additionalProperties") is False
        and before.get("additionalProperties") is not False
    ):
        breaking.append(f"{path}: additional properties refused")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
