"""Field-by-field diff of two contract documents.

Pure Python (no Django): the review ticket page renders ``contract_diff``'s result, and the
publishing service calls ``needs_person`` on it to refuse auto-approval. Which fields there
are, what an absent one means and how each is compared come from ``registry.contract.FIELDS``;
the texts a model reads are checked by ``reviews.poisoning``, and each flag is attached where
it was found.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Required, TypedDict

from registry.contract import BOOKKEEPING_KEYS, FIELDS, FIELDS_BY_NAME, empty_value
from registry.cost import cost_changed
from registry.risk_order import DEFAULT_RISK_RANK

from .poisoning import Flag, LocatedFlag, Severity, contract_flags, poisoning_flags, visible
from .schema_changes import SchemaNode, flatten, join, node_changes


class FieldDiff(TypedDict, total=False):
    """One changed field. Every entry has ``field``, ``kind``, ``base``, ``proposed`` and
    ``flags`` (and, once listed, ``base_json`` and ``proposed_json``); the rest belongs to its
    kind: ``text`` (rows, words), ``set`` (added, removed, kept), ``keyed`` and ``mapping``
    (added, removed, changed, order_changed, key, text_key, within_noise), ``schema``
    (properties and their changes, required, other) and ``value`` (ranks and direction of a
    risk)."""

    field: Required[str]
    kind: Required[str]
    base: Required[Any]
    proposed: Required[Any]
    flags: Required[list[LocatedFlag]]
    loosened: list[dict[str, str]]
    base_json: str
    proposed_json: str
    rows: list[dict[str, Any]]
    words: list[dict[str, str]]
    added: list[Any]
    removed: list[Any]
    kept: list[Any]
    changed: list[dict[str, Any]]
    within_noise: list[dict[str, Any]]
    order_changed: bool
    key: str
    text_key: str
    properties: list[dict[str, Any]]
    properties_added: list[str]
    properties_removed: list[str]
    properties_added_schemas: dict[str, Any]
    properties_removed_schemas: dict[str, Any]
    properties_added_flags: dict[str, list[LocatedFlag]]
    properties_changed: list[dict[str, Any]]
    required_added: list[str]
    required_removed: list[str]
    other: list[dict[str, Any]]
    base_rank: int | None
    proposed_rank: int | None
    direction: str | None


class ContractDiff(TypedDict):
    """What changed from one contract to another (``contract_diff``)."""

    changed: bool
    new_tool: bool
    fields: list[FieldDiff]
    flags: list[LocatedFlag]
    loosened: list[dict[str, str]]


# The schemas whose loosening (a required argument made optional, a type or enum widened, a
# bound dropped...) changes what a call must carry, so needs a person (``loosened``).
CALL_SCHEMAS = frozenset({"input_schema"})
# difflib is quadratic on pathological input; past this many tokens (words or lines) let it
# ignore very frequent ones as anchors.
AUTOJUNK_ABOVE_TOKENS = 4000


# === Text diffs ================================================================================

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


def text_words(base: str, proposed: str) -> list[dict[str, str]]:
    """Word-level diff: ``[{"op": "equal"|"delete"|"insert", "text"}]`` in reading order.

    A replaced stretch comes out as a delete followed by an insert, so the base side is the
    equal and delete parts, and the proposed side the equal and insert parts. Hidden
    characters are spelled out (``<U+200B>``) so an inserted one shows.
    """
    base_tokens = _TOKEN.findall(base)
    proposed_tokens = _TOKEN.findall(proposed)
    matcher = difflib.SequenceMatcher(
        None,
        base_tokens,
        proposed_tokens,
        autojunk=len(base_tokens) + len(proposed_tokens) > AUTOJUNK_ABOVE_TOKENS,
    )
    words: list[dict[str, str]] = []

    def emit(op: str, tokens: list[str]) -> None:
        text = "".join(tokens)
        if not text:
            return
        if words and words[-1]["op"] == op:
            words[-1]["text"] += text
        else:
            words.append({"op": op, "text": text})

    for op, base_start, base_end, new_start, new_end in matcher.get_opcodes():
        if op in ("equal", "delete", "replace"):
            emit("equal" if op == "equal" else "delete", base_tokens[base_start:base_end])
        if op in ("insert", "replace"):
            emit("insert", proposed_tokens[new_start:new_end])
    return [{"op": word["op"], "text": visible(word["text"])} for word in _join_changes(words)]


def _join_changes(words: list[dict[str, str]]) -> list[dict[str, str]]:
    """Fold the single spaces that happen to match between changed words into the change,
    so a rewritten phrase reads as one deletion and one insertion, not a word-by-word zipper."""
    joined: list[dict[str, str]] = []
    index = 0
    while index < len(words):
        if words[index]["op"] == "equal":
            joined.append(words[index])
            index += 1
            continue
        deleted = inserted = ""
        while index < len(words):
            word = words[index]
            if word["op"] == "delete":
                deleted += word["text"]
            elif word["op"] == "insert":
                inserted += word["text"]
            elif (
                word["text"].isspace()
                and index + 1 < len(words)
                and words[index + 1]["op"] != "equal"
            ):
                deleted += word["text"]
                inserted += word["text"]
            else:
                break
            index += 1
        joined += [{"op": "delete", "text": deleted}] if deleted else []
        joined += [{"op": "insert", "text": inserted}] if inserted else []
    return joined


def text_rows(base: str, proposed: str) -> list[dict[str, Any]]:
    """Line-level side-by-side rows ``{"op", "base", "proposed", "words"}``.

    ``op`` is equal, insert (base is ""), delete (proposed is "") or replace; ``words`` is the
    word diff of the row's two lines, for inline markers.
    """
    base_lines = base.splitlines()
    proposed_lines = proposed.splitlines()
    matcher = difflib.SequenceMatcher(
        None,
        base_lines,
        proposed_lines,
        autojunk=len(base_lines) + len(proposed_lines) > AUTOJUNK_ABOVE_TOKENS,
    )
    rows: list[dict[str, Any]] = []
    for op, base_start, base_end, new_start, new_end in matcher.get_opcodes():
        old = base_lines[base_start:base_end]
        new = proposed_lines[new_start:new_end]
        for offset in range(max(len(old), len(new))):
            left = old[offset] if offset < len(old) else None
            right = new[offset] if offset < len(new) else None
            if op == "equal":
                row_op = "equal"
            elif left is None:
                row_op = "insert"
            elif right is None:
                row_op = "delete"
            else:
                row_op = "replace"
            rows.append(
                {
                    "op": row_op,
                    "base": visible(left or ""),
                    "proposed": visible(right or ""),
                    "words": text_words(left or "", right or ""),
                }
            )
    return rows


# === Contract diff =============================================================================


def contract_diff_flags(
    base: Mapping[str, Any] | None, proposed: Mapping[str, Any]
) -> list[LocatedFlag]:
    """``contract_diff(base, proposed)["flags"]``, without what only a reader of the whole diff
    sees: the rows and words of changed texts, and each field's JSON."""
    return _contract_diff(base, proposed, risk_rank=None, shown=False)["flags"]


def contract_diff(
    base: Mapping[str, Any] | None,
    proposed: Mapping[str, Any],
    *,
    risk_rank: Mapping[str, int] | None = None,
) -> ContractDiff:
    """What changed from ``base`` (None for a new tool) to ``proposed``, field by field.

    Returns ``{"changed", "new_tool", "fields", "flags"}``; only changed fields are listed, in
    the order of ``registry.contract.FIELDS`` (unknown fields after, by name). Every field entry
    has ``field``, ``kind``, ``base``, ``proposed``, ``base_json``, ``proposed_json`` and
    ``flags``, plus what its kind adds. The result is JSON-serialisable and shares nothing with
    the inputs.
    """
    return _contract_diff(base, proposed, risk_rank=risk_rank, shown=True)


def _contract_diff(
    base: Mapping[str, Any] | None,
    proposed: Mapping[str, Any],
    *,
    risk_rank: Mapping[str, int] | None,
    shown: bool,
) -> ContractDiff:
    base_doc: dict[str, Any] = copy.deepcopy(dict(base)) if base is not None else {}
    proposed_doc: dict[str, Any] = copy.deepcopy(dict(proposed))
    ranks = dict(DEFAULT_RISK_RANK if risk_rank is None else risk_rank)
    extra = sorted((set(base_doc) | set(proposed_doc)) - FIELDS_BY_NAME.keys() - BOOKKEEPING_KEYS)
    fields = []
    for name in (*(field.name for field in FIELDS), *extra):
        before = _with_default(name, base_doc.get(name))
        after = _with_default(name, proposed_doc.get(name))
        if before == after:
            continue
        entry = _field_diff(name, before, after, new_tool=base is None, ranks=ranks, shown=shown)
        if entry is None:
            continue
        if shown:
            entry["base_json"] = _as_json(before)
            entry["proposed_json"] = _as_json(after)
        fields.append(entry)
    flags = [flag for entry in fields for flag in entry["flags"]]
    # What only the whole contract shows: an instruction split across its texts, annotations
    # that contradict its description.
    flags += contract_flags(proposed_doc, base=base_doc if base is not None else None)
    loosened = [item for entry in fields for item in entry.get("loosened", [])]
    return {
        "changed": bool(fields),
        "new_tool": base is None,
        "fields": fields,
        "flags": flags,
        "loosened": loosened,
    }


# What a tool may do, read from its MCP annotations with the specification's defaults for an
# absent hint (readOnlyHint false, destructiveHint true, openWorldHint true): the widest claim.
# destructiveHint means something only for a tool that is not read-only.
HINT_WIDENINGS = (
    ("readOnlyHint", "it may now change its environment (read-only no longer claimed)"),
    ("destructiveHint", "it may now destroy or overwrite (non-destructive no longer claimed)"),
    ("openWorldHint", "it may now reach outside entities (a closed world no longer claimed)"),
)


def _may(annotations: Mapping[str, Any]) -> dict[str, bool]:
    """Whether each hint allows the wider behaviour: change, destroy, reach the open world."""
    read_only = annotations.get("readOnlyHint") is True
    return {
        "readOnlyHint": not read_only,
        "destructiveHint": not read_only and annotations.get("destructiveHint") is not False,
        "openWorldHint": annotations.get("openWorldHint") is not False,
    }


def widened_hints(base: Any, proposed: Any) -> list[LocatedFlag]:
    """A flag for each hint whose change widens what the tool may do (read-only to not,
    non-destructive to destructive, closed to open world; absent counts as the default)."""
    before = _may(base if isinstance(base, Mapping) else {})
    after = _may(proposed if isinstance(proposed, Mapping) else {})
    old = base if isinstance(base, Mapping) else {}
    new = proposed if isinstance(proposed, Mapping) else {}
    return [
        LocatedFlag(
            code="hint_widened",
            severity=Severity.ALARM.value,
            message=f"{hint}: {meaning}; the change is judged at the higher risk",
            excerpt=f"{hint}: {_hint_text(old, hint)} → {_hint_text(new, hint)}",
            field="annotations",
            where=f"annotations.{hint}",
        )
        for hint, meaning in HINT_WIDENINGS
        if after[hint] and not before[hint]
    ]


def _hint_text(annotations: Mapping[str, Any], hint: str) -> str:
    return json.dumps(annotations[hint]) if hint in annotations else "absent"


def has_poisoning(diff: ContractDiff | Mapping[str, Any]) -> bool:
    """True when the diff carries any poisoning flag: such a change needs a person."""
    return bool(diff.get("flags"))


def needs_person(diff: Mapping[str, Any]) -> bool:
    """True when no change of this diff may publish itself: it carries a poisoning flag, or it
    loosens what a call must carry."""
    return bool(diff.get("flags") or diff.get("loosened"))


def _with_default(name: str, value: Any) -> Any:
    # An absent field and its empty value mean the same contract; comparing through the
    # empties keeps "permissions: []" versus a missing key from showing up as a change.
    return empty_value(name) if value is None else value


def _as_json(value: Any) -> str:
    return visible(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def _located(flags: list[Flag], *, field: str, where: str) -> list[LocatedFlag]:
    return [LocatedFlag(**flag, field=field, where=where) for flag in flags]


# === Texts a model reads ========================================================================
# A model reads the whole contract, not only its prose: a property name, an enum value, a
# default, an example, a rule id or a template variable can carry an instruction as well as a
# description can (#23.1). Every string in a field's value, and every key of its objects, is
# checked the same way, at any depth, compared with the text at the same place in the base.

_NAME = " (name)"


def _texts(value: Any, where: str) -> dict[str, str]:
    """Every text in a JSON value by where it is: strings at their dotted path, object keys at
    the path they open plus ``" (name)"``. Iterative, so any depth is safe."""
    found: dict[str, str] = {}
    pending: list[tuple[str, Any]] = [(where, value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            found[path] = item
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                child = join(path, str(key))
                found[child + _NAME] = str(key)
                pending.append((child, sub))
        elif isinstance(item, list):
            pending.extend((join(path, str(index)), sub) for index, sub in enumerate(item))
    return found


@functools.lru_cache(maxsize=4096)
def _flags_cached(text: str, base_text: str | None) -> tuple[Flag, ...]:
    # A schema repeats its keywords and names on every node: each distinct text is read once.
    return tuple(poisoning_flags(text, base_text=base_text))


def _new_text_flags(
    field: str, before: Any, after: Any, *, where: str, new_base: bool
) -> list[LocatedFlag]:
    """Flags in every text of ``after`` that is not the same text at the same place in
    ``before`` (``new_base``: nothing to compare with)."""
    old = {} if new_base else _texts(before, where)
    flags: list[LocatedFlag] = []
    for place, text in _texts(after, where).items():
        base_text = old.get(place)
        if not text or text == base_text:
            continue
        flags += _located(list(_flags_cached(text, base_text)), field=field, where=place)
    return flags


def _field_diff(
    name: str, before: Any, after: Any, *, new_tool: bool, ranks: dict[str, int], shown: bool
) -> FieldDiff | None:
    # Unknown fields, and values of the wrong type, are shown as plain values.
    field = FIELDS_BY_NAME.get(name)
    kind = field.diff if field is not None else "value"
    if kind == "text" and isinstance(before, str) and isinstance(after, str):
        return _text_diff(name, before, after, new_tool=new_tool, shown=shown)
    if kind == "schema" and isinstance(before, Mapping) and isinstance(after, Mapping):
        return _schema_diff(name, before, after, new_tool=new_tool)
    if kind == "set" and isinstance(before, list) and isinstance(after, list):
        return _set_diff(name, before, after)
    if (
        kind == "keyed"
        and field is not None
        and isinstance(before, list)
        and isinstance(after, list)
    ):
        return _keyed_diff(
            name, before, after, key_name=field.key, text_key=field.text, new_tool=new_tool
        )
    if kind == "mapping" and isinstance(before, Mapping) and isinstance(after, Mapping):
        return _mapping_diff(name, before, after, new_tool=new_tool)
    entry: FieldDiff = {
        "field": name,
        "kind": "value",
        "base": before,
        "proposed": after,
        # A name a runtime chose (a shadow tool's) is read by the model like any text; its
        # dots separate namespaces, so "chromedev.click" is a name, never a link.
        "flags": [
            flag
            for flag in _new_text_flags(name, before, after, where=name, new_base=new_tool)
            if flag["code"] != "url_added"
        ]
        if kind == "name"
        else [],
    }
    if kind == "risk":
        base_rank = ranks.get(before) if isinstance(before, str) else None
        proposed_rank = ranks.get(after) if isinstance(after, str) else None
        entry["base_rank"] = base_rank
        entry["proposed_rank"] = proposed_rank
        entry["direction"] = None
        if base_rank is not None and proposed_rank is not None and base_rank != proposed_rank:
            entry["direction"] = "up" if proposed_rank > base_rank else "down"
    return entry


def _text_diff(name: str, before: str, after: str, *, new_tool: bool, shown: bool) -> FieldDiff:
    flags = poisoning_flags(after, base_text=None if new_tool else before)
    return {
        "field": name,
        "kind": "text",
        "base": before,
        "proposed": after,
        # What only a reader of the whole diff sees.
        "rows": text_rows(before, after) if shown else [],
        "words": text_words(before, after) if shown else [],
        "flags": _located(flags, field=name, where=name),
    }


def _set_diff(name: str, before: list[Any], after: list[Any]) -> FieldDiff | None:
    # Items are names; json keys keep a malformed (unhashable) item from crashing the page.
    before_keys = {_item_key(item) for item in before}
    after_keys = {_item_key(item) for item in after}
    added = _unique(item for item in after if _item_key(item) not in before_keys)
    removed = _unique(item for item in before if _item_key(item) not in after_keys)
    if not added and not removed:
        return None  # only the order changed, and these are sets
    kept = _unique(item for item in after if _item_key(item) in before_keys)
    return {
        "field": name,
        "kind": "set",
        "base": before,
        "proposed": after,
        "added": added,
        "removed": removed,
        "kept": kept,
        "flags": _new_text_flags(name, [], added, where=name, new_base=True),
    }


def _item_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    unique = []
    for item in items:
        key = _item_key(item)
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def _keys_changed(before: Any, after: Any) -> list[str]:
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    missing = object()
    return [
        key
        for key in _unique([*before, *after])
        if before.get(key, missing) != after.get(key, missing)
    ]


def _mapping_diff(
    name: str, before: Mapping[str, Any], after: Mapping[str, Any], *, new_tool: bool
) -> FieldDiff | None:
    added = [{"key": key, "proposed": value} for key, value in after.items() if key not in before]
    removed = [{"key": key, "base": value} for key, value in before.items() if key not in after]
    changed, within_noise = [], []
    for key, value in after.items():
        if key not in before or before[key] == value:
            continue
        change = {
            "key": key,
            "base": before[key],
            "proposed": value,
            "keys_changed": _keys_changed(before[key], value),
        }
        # A cost figure measured again within its noise is the same figure (registry.cost).
        if name == "cost" and not cost_changed(key, before[key], value):
            within_noise.append(change)
        else:
            changed.append(change)
    if not (added or removed or changed or within_noise):
        return None
    return {
        "field": name,
        "kind": "mapping",
        "base": before,
        "proposed": after,
        "added": added,
        "removed": removed,
        "changed": changed,
        "within_noise": within_noise,
        # Effects' state variables and prompt_template_var are read by the model too.
        "flags": [
            *(widened_hints(before, after) if name == "annotations" and not new_tool else []),
            *_new_text_flags(name, before, after, where=name, new_base=new_tool),
        ],
    }


def _keyed_entries(entries: list[Any], key_name: str) -> dict[str, Any]:
    keyed: dict[str, Any] = {}
    for position, entry in enumerate(entries, start=1):
        key = entry.get(key_name) if isinstance(entry, Mapping) else None
        if not isinstance(key, str) or key in keyed:
            key = f"#{position}"  # malformed or duplicate: validation reports it, we still show it
        keyed[key] = entry
    return keyed


def _text_of(entry: Any, text_key: str) -> str:
    value = entry.get(text_key) if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) else ""


def _keyed_diff(
    name: str, before: list[Any], after: list[Any], *, key_name: str, text_key: str, new_tool: bool
) -> FieldDiff | None:
    old = _keyed_entries(before, key_name)
    new = _keyed_entries(after, key_name)
    field_flags: list[LocatedFlag] = []

    def flags_for(key: str, entry: Any, base_entry: Any) -> list[LocatedFlag]:
        # The rule or description first, then every other text of the entry (its id or key,
        # a default, a message), each against the same place in the base entry.
        flags = _new_text_flags(
            name, base_entry, entry, where=f"{name}.{key}", new_base=new_tool or base_entry is None
        )
        text_place = f"{name}.{key}.{text_key}"
        flags.sort(key=lambda flag: flag["where"] != text_place)
        field_flags.extend(flags)
        return flags

    added: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    for key, entry in new.items():
        if key not in old:
            added.append({"key": key, "proposed": entry, "flags": flags_for(key, entry, None)})
        elif old[key] != entry:
            old_text, new_text = _text_of(old[key], text_key), _text_of(entry, text_key)
            changed.append(
                {
                    "key": key,
                    "base": old[key],
                    "proposed": entry,
                    "keys_changed": _keys_changed(old[key], entry),
                    "words": text_words(old_text, new_text) if old_text != new_text else [],
                    "flags": flags_for(key, entry, old[key]),
                }
            )
    removed = [{"key": key, "base": entry} for key, entry in old.items() if key not in new]
    # Invariants are applied in order (a correction can feed the next check), so a reorder
    # is a change a reviewer should see even when no entry changed.
    order_changed = [key for key in old if key in new] != [key for key in new if key in old]
    if not (added or removed or changed or order_changed):
        return None
    return {
        "field": name,
        "kind": "keyed",
        "key": key_name,
        "text_key": text_key,
        "base": before,
        "proposed": after,
        "added": added,
        "removed": removed,
        "changed": changed,
        "order_changed": order_changed,
        "flags": field_flags,
    }


# --- Schemas -----------------------------------------------------------------------------------


def _schema_diff(
    name: str, before: Mapping[str, Any], after: Mapping[str, Any], *, new_tool: bool
) -> FieldDiff | None:
    """A schema's changes: subtrees added and removed, properties changed, the root's keywords
    changed, names made (not) required; each poisoning flag placed where it was found. None
    when nothing changed."""
    old_nodes, old_required = flatten(before)
    new_nodes, new_required = flatten(after)
    top_added, added = _subtrees_only_in(new_nodes, old_nodes)
    top_removed, _ = _subtrees_only_in(old_nodes, new_nodes)
    changed = _properties_changed(old_nodes, new_nodes)
    other = _root_keywords_changed(old_nodes[""].own, new_nodes[""].own)
    required_added = [path for path in new_required if path not in old_required]
    required_removed = [path for path in old_required if path not in new_required]
    if not (top_added or top_removed or changed or other or required_added or required_removed):
        return None
    field_flags = _schema_flags(name, old_nodes, new_nodes, new_tool=new_tool)
    added_flags = _schema_flags_placed(
        field_flags, changed, other, top_added=top_added, added=added, new_nodes=new_nodes
    )
    return {
        "field": name,
        "kind": "schema",
        "base": before,
        "proposed": after,
        "properties": _property_rows(
            old_nodes,
            new_nodes,
            old_required=old_required,
            new_required=new_required,
            paths=[*top_added, *top_removed, *(entry["name"] for entry in changed)],
        ),
        "properties_added": top_added,
        "properties_removed": top_removed,
        "properties_added_schemas": {path: new_nodes[path].whole for path in top_added},
        "properties_removed_schemas": {path: old_nodes[path].whole for path in top_removed},
        "properties_added_flags": added_flags,
        "properties_changed": changed,
        "required_added": required_added,
        "required_removed": required_removed,
        "other": other,
        "flags": [flag for _, _, flag in field_flags],
        "loosened": _loosened(
            name, old_nodes, new_nodes, old_required=old_required, new_required=new_required
        )
        if name in CALL_SCHEMAS and not new_tool
        else [],
    }


def _subtrees_only_in(
    nodes: dict[str, SchemaNode], other: dict[str, SchemaNode]
) -> tuple[list[str], set[str]]:
    """The paths of ``nodes`` that ``other`` lacks, each such subtree once at its top (its
    schema shows what is inside), then all of them."""
    only = [path for path in nodes if path and path not in other]
    only_set = set(only)
    return [path for path in only if nodes[path].parent not in only_set], only_set


def _properties_changed(
    old_nodes: dict[str, SchemaNode], new_nodes: dict[str, SchemaNode]
) -> list[dict[str, Any]]:
    """The subschemas below the root in both schemas whose own keywords changed."""
    changed: list[dict[str, Any]] = []
    for path, node in new_nodes.items():
        if path and path in old_nodes and old_nodes[path].own != node.own:
            old_text = _schema_text(old_nodes[path].own, "description")
            new_text = _schema_text(node.own, "description")
            changed.append(
                {
                    "name": path,
                    "base": old_nodes[path].own,
                    "proposed": node.own,
                    "keys_changed": _keys_changed(old_nodes[path].own, node.own),
                    "words": text_words(old_text, new_text) if old_text != new_text else [],
                    "flags": [],
                }
            )
    return changed


def _root_keywords_changed(old_root: Any, new_root: Any) -> list[dict[str, Any]]:
    """The root's keywords added, removed or changed; a boolean root schema changed whole."""
    other: list[dict[str, Any]] = []
    if isinstance(old_root, Mapping) and isinstance(new_root, Mapping):
        for keyword in _keys_changed(old_root, new_root):
            op = (
                "added"
                if keyword not in old_root
                else "removed"
                if keyword not in new_root
                else "changed"
            )
            other.append(
                {
                    "key": keyword,
                    "op": op,
                    "base": old_root.get(keyword),
                    "proposed": new_root.get(keyword),
                    "flags": [],
                }
            )
    elif old_root != new_root:
        other.append(
            {"key": "", "op": "changed", "base": old_root, "proposed": new_root, "flags": []}
        )
    return other


def _schema_flags_placed(
    field_flags: list[tuple[str, str, LocatedFlag]],
    changed: list[dict[str, Any]],
    other: list[dict[str, Any]],
    *,
    top_added: list[str],
    added: set[str],
    new_nodes: dict[str, SchemaNode],
) -> dict[str, list[LocatedFlag]]:
    """Each flag attached to the root keyword or the changed property it was found in;
    returns those found in an added subtree, by its top."""
    added_flags: dict[str, list[LocatedFlag]] = {path: [] for path in top_added}
    by_path = {entry["name"]: entry for entry in changed}
    by_root_keyword = {entry["key"]: entry for entry in other}
    for path, keyword, flag in field_flags:
        if path == "" and keyword in by_root_keyword:
            by_root_keyword[keyword]["flags"].append(flag)
        elif path in by_path:
            by_path[path]["flags"].append(flag)
        else:
            top = _top_added_ancestor(path, new_nodes, added)
            if top in added_flags:
                added_flags[top].append(flag)
    return added_flags


def _property_rows(
    old_nodes: dict[str, SchemaNode],
    new_nodes: dict[str, SchemaNode],
    *,
    old_required: list[str],
    new_required: list[str],
    paths: list[str],
) -> list[dict[str, Any]]:
    """One row per property a reviewer must judge: added, removed, changed, or only made
    (not) required, each with its type, required-ness and description before and after.

    Only properties (paths whose last step is a property name, not a keyword such as
    ``items`` or ``anyOf.0``) get rows; other subschemas stay in the detailed lists.
    """
    required_moved = [
        path
        for path in _unique([*new_required, *old_required])
        if (path in new_required) != (path in old_required)
    ]
    rows = []
    for path in _unique([*paths, *required_moved]):
        old, new = old_nodes.get(path), new_nodes.get(path)
        if old is None and new is None:
            continue  # required names a property that is declared nowhere
        op = "added" if old is None else "removed" if new is None else "changed"
        rows.append(
            {
                "name": path,
                "op": op,
                "base": _property_facts(old, required=path in old_required),
                "proposed": _property_facts(new, required=path in new_required),
            }
        )
    return rows


def _property_facts(node: SchemaNode | None, *, required: bool) -> dict[str, Any] | None:
    if node is None:
        return None
    own = node.own if isinstance(node.own, Mapping) else {}
    kind = own.get("type")
    if isinstance(kind, list):
        kind = " | ".join(str(item) for item in kind)
    elif kind is None:
        kind = next(
            (
                keyword
                for keyword in ("anyOf", "oneOf", "allOf", "$ref", "enum", "const")
                if isinstance(node.whole, Mapping) and keyword in node.whole
            ),
            "any",
        )
    return {
        "type": str(kind),
        "required": required,
        "description": _schema_text(own, "description"),
        "enum": own.get("enum") if isinstance(own.get("enum"), list) else None,
    }


def _schema_text(own: Any, keyword: str) -> str:
    value = own.get(keyword) if isinstance(own, Mapping) else None
    return value if isinstance(value, str) else ""


_DIALECT = re.compile(r"https?://json-schema\.org/[\w./-]*#?\Z")


def _node_texts(node: SchemaNode, where: str) -> dict[str, tuple[str, str]]:
    """The texts of one subschema a model reads, by place, each with the keyword it sits under
    (``"(name)"`` for the node's own name): its name in its parent's map, every keyword's
    value at any depth (description, title, enum, const, default, examples, and any other),
    every keyword itself, and the names ``required`` lists."""
    texts: dict[str, tuple[str, str]] = {}
    if node.name is not None:
        texts[where + _NAME] = ("(name)", node.name)
    if isinstance(node.own, Mapping):
        for keyword, value in node.own.items():
            for place, text in _texts({keyword: value}, where).items():
                texts[place] = (str(keyword), text)
    elif isinstance(node.own, str):
        texts[where] = ("", node.own)
    for index, required in enumerate(node.required):
        texts[join(where, f"required.{index}")] = ("required", required)
    return texts


def _schema_flags(
    name: str,
    old_nodes: dict[str, SchemaNode],
    new_nodes: dict[str, SchemaNode],
    *,
    new_tool: bool,
) -> list[tuple[str, str, LocatedFlag]]:
    """Poisoning flags in every text of the proposed schema (``_node_texts``), each compared
    with the text at the same place in the base; ``(path, keyword, flag)``."""
    found: list[tuple[str, str, LocatedFlag]] = []
    for path, node in new_nodes.items():
        where = join(name, path) if path else name
        old_node = None if new_tool else old_nodes.get(path)
        old_texts = _node_texts(old_node, where) if old_node is not None else {}
        old_required = set(old_node.required) if old_node is not None else set()
        for place, (keyword, text) in _node_texts(node, where).items():
            if keyword == "required" and text in old_required:
                continue  # the same name, perhaps listed in another order
            if keyword == "$schema" and _DIALECT.match(text):
                continue  # the dialect's address is a link by design
            base_text = old_texts.get(place, (keyword, None))[1]
            if not text or text == base_text:
                continue
            for flag in _located(list(_flags_cached(text, base_text)), field=name, where=place):
                found.append((path, keyword, flag))
    return found


def _loosened(
    name: str,
    old_nodes: dict[str, SchemaNode],
    new_nodes: dict[str, SchemaNode],
    *,
    old_required: list[str],
    new_required: list[str],
) -> list[dict[str, str]]:
    """Where the proposed schema accepts calls the base refused, each ``{"field", "where",
    "message"}`` (``reviews.schema_changes``): a required property no longer required, a
    subschema removed, a type or enum widened, a bound dropped or relaxed, an object or array
    opened, an alternative added. A change this cannot prove tighter (a new pattern) counts
    as loosening too: such a change needs a person, never auto-publication."""
    changes = node_changes(
        old_nodes, new_nodes, old_required=old_required, new_required=new_required
    )
    return [
        {"field": name, "where": join(name, change.path), "message": change.message}
        for change in changes
        if change.loosens
    ]


def _top_added_ancestor(path: str, nodes: dict[str, SchemaNode], added: set[str]) -> str | None:
    top = None
    current: str | None = path
    while current is not None and current in added:
        top = current
        current = nodes[current].parent
    return top
