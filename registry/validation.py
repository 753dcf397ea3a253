"""Checks every contract document before it is stored, on every path (admin, import, API).

``contract_check`` is pure: the caller passes a ``RegistryContext`` with the vocabulary,
risk labels, permissions and dependency graph, so the same checks serve a single admin
form and an import of a thousand tools. Problems come back as ``{field: [reason, ...]}``;
``ContractInvalid`` names the tool too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import invariants
from .contract import (
    ANNOTATION_HINTS,
    COST_KEYS,
    KNOWN_KEYS,
    LIFECYCLES,
    LIMIT_KEYS,
    MAX_ANNOTATION_KEY,
    MAX_ANNOTATION_TITLE,
    MAX_ANNOTATIONS_CHARS,
    MAX_DESCRIPTION,
    MERGE_RULES,
)
from .metaschema import METASCHEMA_VALIDATOR
from .schema_limits import schema_limit_errors

# Names are checked whole: ``fullmatch``, and ``\Z`` rather than ``$`` (which also matches
# before a final newline) for validators that search, such as Django's RegexValidator.
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\Z")
TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\Z")


def export_name(name: str) -> str:
    """The function name LLM SDKs get for a tool (``^[a-zA-Z0-9_-]{1,64}$``): each ``.`` sent
    as ``__``. Two registry names may map to one (``aa_.y`` and ``aa._y``), so it is unique
    among tools (``Tool.export_name``) and checked with the name."""
    return name.replace(".", "__")


def export_clash(name: str, other: str) -> str:
    return (
        f"exports as {export_name(name)!r}, the function name of the tool {other!r}: "
        "a model could not tell the two apart"
    )


Errors = dict[str, list[str]]


@dataclass
class RegistryContext:
    variables: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> canonical name
    risks: set[str] = field(default_factory=set)
    permissions: set[str] = field(default_factory=set)
    tools: set[str] = field(default_factory=set)
    dependencies: dict[str, list[str]] = field(default_factory=dict)  # tool -> its dependencies
    # Export name -> tools, rebuilt when ``tools`` grew (``tool_exporting_as``).
    _exports: dict[str, list[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _exports_of: int = field(default=-1, init=False, repr=False, compare=False)

    def canonical(self, name: str) -> str | None:
        if name in self.variables:
            return name
        return self.aliases.get(name)

    def tool_exporting_as(self, name: str) -> str | None:
        """Another tool whose export name is ``name``'s, if any."""
        if len(self.tools) != self._exports_of:  # tools only grow while a file is checked
            self._exports = {}
            for tool in sorted(self.tools):
                self._exports.setdefault(export_name(tool), []).append(tool)
            self._exports_of = len(self.tools)
        others = [tool for tool in self._exports.get(export_name(name), []) if tool != name]
        return others[0] if others else None


class ContractInvalid(Exception):
    def __init__(self, tool: str, errors: Errors):
        self.tool = tool
        self.errors = errors
        super().__init__(self.message())

    def lines(self) -> list[str]:
        return [
            f"{self.tool}: {field_name}: {reason}"
            for field_name, reasons in self.errors.items()
            for reason in reasons
        ]

    def message(self) -> str:
        return "; ".join(self.lines())


def contract_check(document: Any, *, context: RegistryContext) -> tuple[dict[str, Any], Errors]:
    """Validate one contract document; return it normalised (aliases resolved) and its errors.

    A document that is no object, or holds what no database can store, is refused whole;
    otherwise each field is checked in turn (``_ContractCheck``)."""
    if not isinstance(document, Mapping):
        return {}, {"document": ["must be a JSON object"]}
    doc = dict(document)
    problem = unstorable_text(doc)
    if problem:
        field_name, _, reason = problem.partition(": ")
        return {}, {field_name.split(".")[0].split("[")[0]: [f"{field_name}: {reason}"]}
    check = _ContractCheck(doc, context)
    check.run()
    return doc, check.errors


class _ContractCheck:
    """One document's checks, a phase per field; the phases resolve ``doc``'s variable names
    and sort its permissions in place."""

    def __init__(self, doc: dict[str, Any], context: RegistryContext) -> None:
        self.doc, self.context = doc, context
        self.errors: Errors = {}

    def add(self, field_name: str, reason: str) -> None:
        self.errors.setdefault(field_name, []).append(reason)

    def run(self) -> None:
        self.unknown_fields()
        self.name()
        self.description()
        self.schemas()
        self.annotations()
        self.variables()
        self.effects()
        self.risk()
        self.permissions()
        self.cost()
        self.resource_limits()
        self.status()
        self.entries()
        self.dependencies()

    def unknown_fields(self) -> None:
        for key in sorted(set(self.doc) - KNOWN_KEYS):
            self.add(key, "unknown field")

    def name(self) -> None:
        name = self.doc.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            self.add("name", "must be a dotted name of letters, digits, '_' and '-'")
        elif "__" in name or len(export_name(name)) > 64:
            # LLM SDKs take ^[a-zA-Z0-9_-]{1,64}$; '.' is sent as '__', so this keeps names
            # reversible.
            self.add(
                "name",
                "must not contain '__' and must fit in 64 characters with each '.' as '__'",
            )
        elif (other := self.context.tool_exporting_as(name)) is not None:
            self.add("name", export_clash(name, other))

    def description(self) -> None:
        description = self.doc.get("description")
        if not isinstance(description, str) or not description.strip():
            self.add("description", "must be non-empty text")
        elif len(description) > MAX_DESCRIPTION:
            self.add(
                "description",
                f"{len(description):,} characters; at most {MAX_DESCRIPTION:,}, what a reviewer "
                "can read: move reference material to documentation the tool links to",
            )

    def schemas(self) -> None:
        """The input schema (required, an object) and the output schema (optional)."""
        for schema_field, required in (("input_schema", True), ("output_schema", False)):
            schema = self.doc.get(schema_field)
            if schema is None and not required:
                continue
            for reason in schema_errors(schema, needs_object=schema_field == "input_schema"):
                self.add(schema_field, reason)

    def annotations(self) -> None:
        for reason in annotation_errors(self.doc.get("annotations")):
            self.add("annotations", reason)

    def variables(self) -> None:
        """``requires`` and ``produces``, resolved to canonical names."""
        for set_field in ("requires", "produces"):
            names, reasons = _resolve_variables(self.doc.get(set_field, []), self.context)
            self.doc[set_field] = names
            for reason in reasons:
                self.add(set_field, reason)

    def effects(self) -> None:
        """Each effect's variable, resolved and produced, and its metadata."""
        effects = self.doc.get("effects") or {}
        if not isinstance(effects, Mapping):
            self.add("effects", "must be an object mapping produced variables to their metadata")
            return
        resolved_effects = {}
        for var, meta in effects.items():
            canonical = self.context.canonical(var) if isinstance(var, str) else None
            if canonical is None:
                self.add("effects", f"unknown state variable {_shown(var)}")
                continue
            if canonical not in self.doc.get("produces", []):
                self.add("effects", f"{_shown(canonical)} is not in produces")
            for reason in _effect_errors(meta):
                self.add("effects", f"{canonical}: {reason}")
            resolved_effects[canonical] = meta
        self.doc["effects"] = resolved_effects

    def risk(self) -> None:
        risk = self.doc.get("risk")
        known = ", ".join(sorted(self.context.risks))
        if not isinstance(risk, str):
            self.add("risk", f"must be the name of a risk level; known: {known}")
        elif risk not in self.context.risks:
            self.add("risk", f"unknown risk level {_shown(risk)}; known: {known}")

    def permissions(self) -> None:
        permissions = self.doc.get("permissions", [])
        if not _is_list_of_str(permissions):
            self.add("permissions", "must be a list of permission names")
            return
        for unknown in sorted(set(permissions) - self.context.permissions):
            self.add("permissions", f"unknown permission {_shown(unknown)}")
        self.doc["permissions"] = sorted(set(permissions))

    def cost(self) -> None:
        cost = self.doc.get("cost") or {}
        if not isinstance(cost, Mapping):
            self.add("cost", "must be an object")
            return
        for key, value in cost.items():
            if key not in COST_KEYS:
                allowed = ", ".join(sorted(COST_KEYS))
                self.add("cost", f"unknown key {_shown(key)}; allowed: {allowed}")
            elif not _is_number(value) or value < 0:
                self.add("cost", f"{key} must be a non-negative number")
            elif key == "error_rate" and value > 1:
                self.add("cost", "error_rate must be between 0 and 1")

    def resource_limits(self) -> None:
        limits = self.doc.get("resource_limits") or {}
        if not isinstance(limits, Mapping):
            self.add("resource_limits", "must be an object")
            return
        for key, value in limits.items():
            if key not in LIMIT_KEYS:
                self.add(
                    "resource_limits",
                    f"unknown key {_shown(key)}; allowed: {', '.join(sorted(LIMIT_KEYS))}",
                )
            elif not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                self.add("resource_limits", f"{key} must be a positive integer")

    def status(self) -> None:
        status = self.doc.get("status", "active")
        if not isinstance(status, str) or status not in LIFECYCLES:
            self.add("status", "must be 'active' or 'deprecated'")

    def entries(self) -> None:
        """The invariants and config params: each entry, and their ids or keys unique."""
        for list_field, check in (
            ("invariants", invariants.invariant_errors),
            ("config_params", invariants.config_param_errors),
        ):
            entries = self.doc.get(list_field, [])
            if not isinstance(entries, list):
                self.add(list_field, "must be a list")
                continue
            for index, entry in enumerate(entries):
                for reason in check(entry):
                    self.add(list_field, f"[{index}] {reason}")
            for duplicate in _duplicates(entries, "id" if list_field == "invariants" else "key"):
                self.add(list_field, f"duplicate {_shown(duplicate)}")

    def dependencies(self) -> None:
        """Each dependency a known tool other than this one, and no cycle through it."""
        name = self.doc.get("name")
        dependencies = self.doc.get("dependencies", [])
        if not _is_list_of_str(dependencies):
            self.add("dependencies", "must be a list of tool names")
            return
        for dependency in dependencies:
            if dependency == name:
                self.add("dependencies", "a tool cannot depend on itself")
            elif dependency not in self.context.tools:
                self.add("dependencies", f"unknown tool {_shown(dependency)}")
        if isinstance(name, str):
            cycle = dependency_cycle(name, dependencies, self.context.dependencies)
            if cycle:
                self.add("dependencies", "cycle: " + " -> ".join(cycle))


def unstorable_text(value: Any, path: str = "") -> str | None:
    """Where a string (key or value) holds what no database text column can store (a NUL
    character or an unpaired surrogate), or a number is out of range (JSON's ``1e999`` reads
    as infinity, which no JSON column stores). Returns the path and reason, or None.

    The walk keeps one iterator per open container, so its memory grows with the depth, never
    with the size, and the path is spelt only for the value it reports: spelling it for every
    value would copy a long key once per item of the list under it (100 KB of request body
    would cost gigabytes).
    """
    if _storable(value):
        return None
    reason = _unstorable_value(value)
    if reason:
        return f"{path or '(value)'}: {reason}"
    trail: list[str | int] = []  # the keys and indexes leading to the innermost open container
    pending: list[Iterator[tuple[Any, Any]]] = []
    # JSON values are dicts and lists: exact type checks, cheaper than an ABC's, on the hot path.
    if isinstance(value, dict | list):
        pending.append(_children(value))
    while pending:
        pair = next(pending[-1], None)
        if pair is None:
            pending.pop()
            if trail:
                trail.pop()
            continue
        key, item = pair
        if isinstance(key, str) and (reason := _unstorable_value(key)):
            return f"{_spelt(path, trail) or '(value)'}: {reason}"
        if isinstance(item, dict | list):
            trail.append(key)
            pending.append(_children(item))
        elif reason := _unstorable_value(item):
            trail.append(key)
            return f"{_spelt(path, trail)}: {reason}"
    return None


def _storable(value: Any) -> bool:
    """Whether every string (key or value) and number of a JSON value can be stored, asked
    quickly: exact types, no path kept. False also for a value of another type, which the walk
    of ``unstorable_text`` then judges (and, when it cannot be stored, says where).

    One iterator per open container, as that walk keeps: memory grows with the depth.
    """
    pending: list[Iterator[Any]] = [iter((value,))]
    while pending:
        for item in pending[-1]:
            kind = type(item)
            if kind is str:
                if not _text_storable(item):
                    return False
            elif kind is dict:
                for key in item:
                    if type(key) is str and not _text_storable(key):
                        return False
                pending.append(iter(item.values()))
                break
            elif kind is list:
                pending.append(iter(item))
                break
            elif kind is float:
                if not math.isfinite(item):
                    return False
            elif kind is not int and kind is not bool and item is not None:
                return False
        else:
            pending.pop()
    return True


def _text_storable(text: str) -> bool:
    """No NUL and no unpaired surrogate: what PostgreSQL's text and jsonb refuse."""
    return "\x00" not in text and (text.isascii() or not _SURROGATE.search(text))


MAX_SHOWN_KEY = 64  # a reason names where, it does not echo a 50 KB key


def _shown(value: object) -> str:
    """A name a document sent, quoted for a reason, cut to ``MAX_SHOWN_KEY`` characters."""
    text = value if isinstance(value, str) else type(value).__name__
    if len(text) > MAX_SHOWN_KEY:
        return repr(text[: MAX_SHOWN_KEY - 3] + "...")
    return repr(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unstorable_value(item: Any) -> str | None:
    if isinstance(item, str):
        if "\x00" in item:
            return "contains a NUL character (\\u0000)"
        # Searched rather than encoded: encoding would copy every string. An ASCII string (most
        # of them; isascii is a flag read) holds no surrogate.
        if not item.isascii() and _SURROGATE.search(item):
            return "contains an unpaired surrogate (invalid Unicode)"
    elif isinstance(item, float) and not math.isfinite(item):
        return "is a number out of range"
    return None


def _children(container: dict[Any, Any] | list[Any]) -> Iterator[tuple[Any, Any]]:
    return iter(container.items()) if isinstance(container, dict) else enumerate(container)


def _spelt(path: str, trail: list[str | int]) -> str:
    for part in trail:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        name = str(part)
        if len(name) > MAX_SHOWN_KEY:
            name = name[: MAX_SHOWN_KEY - 3] + "..."
        path = f"{path}.{name}" if path else name
    return path


def schema_errors(schema: Any, *, needs_object: bool) -> list[str]:
    if not isinstance(schema, Mapping):
        return ["must be a JSON Schema object"]
    # Before the metaschema check: it recurses, and it is the limits that make that safe.
    too_costly = schema_limit_errors(schema)
    if too_costly:
        return too_costly
    # The published metaschema's first error, read from it as one document (metaschema.py).
    invalid = next(METASCHEMA_VALIDATOR.iter_errors(schema), None)
    if invalid is not None:
        path = "/".join(str(part) for part in invalid.path) or "(root)"
        return [f"not a valid JSON Schema at {path}: {invalid.message}"]
    reasons = [
        f"{path}: {_shown(ref)} points outside the schema; only local references ('#...') are "
        "allowed"
        for path, ref in _external_refs(schema, "")
    ]
    if needs_object and schema.get("type") != "object":
        reasons.append('must have "type": "object" (LLM SDKs take object parameters)')
    return reasons


def _external_refs(node: Any, path: str) -> Iterable[tuple[str, str]]:
    # A $ref is data written by people: anything but a local pointer could make a validator
    # fetch a URL or read a file, so it is refused at the door rather than resolved.
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = f"{path}/{key}"
            if key in ("$ref", "$dynamicRef") and not (
                isinstance(value, str) and value.startswith("#")
            ):
                yield here, value
            else:
                yield from _external_refs(value, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _external_refs(value, f"{path}/{index}")


def annotation_errors(annotations: Any) -> list[str]:
    """MCP tool annotations, kept verbatim: the four hints must be booleans and the title short
    text; keys the specification does not name (a server's own, such as ``category``) are kept
    as declared, within a size bound."""
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return ["must be an object of MCP tool annotations"]
    reasons = []
    for key, value in annotations.items():
        if not isinstance(key, str) or len(key) > MAX_ANNOTATION_KEY:
            reasons.append(f"key {_shown(key)} is longer than {MAX_ANNOTATION_KEY} characters")
        elif key in ANNOTATION_HINTS and not isinstance(value, bool):
            reasons.append(f"{key} must be true or false")
        elif key == "title" and (not isinstance(value, str) or len(value) > MAX_ANNOTATION_TITLE):
            reasons.append(f"title must be text of at most {MAX_ANNOTATION_TITLE} characters")
    if not reasons:
        try:
            size = len(json.dumps(annotations, ensure_ascii=False))
        except (TypeError, ValueError):
            return ["must hold JSON values only"]
        if size > MAX_ANNOTATIONS_CHARS:
            reasons.append(f"must fit in {MAX_ANNOTATIONS_CHARS:,} characters of JSON")
    return reasons


def _resolve_variables(names: Any, context: RegistryContext) -> tuple[list[str], list[str]]:
    if not _is_list_of_str(names):
        return [], ["must be a list of state-variable names"]
    resolved, reasons = [], []
    for name in names:
        canonical = context.canonical(name)
        if canonical is None:
            reasons.append(f"unknown state variable {_shown(name)}")
        elif canonical not in resolved:
            resolved.append(canonical)
    return resolved, reasons


def _effect_errors(meta: Any) -> list[str]:
    if not isinstance(meta, Mapping):
        return ["must be an object"]
    reasons = []
    allowed = {"merge", "preserve_across_turns", "prompt_template_var"}
    for key in sorted(set(meta) - allowed):
        reasons.append(f"unknown key {_shown(key)}")
    if "merge" in meta and meta["merge"] not in MERGE_RULES:
        reasons.append(f"merge must be one of {', '.join(sorted(MERGE_RULES))}")
    if "preserve_across_turns" in meta and not isinstance(meta["preserve_across_turns"], bool):
        reasons.append("preserve_across_turns must be true or false")
    template_var = meta.get("prompt_template_var")
    if template_var is not None and not isinstance(template_var, str):
        reasons.append("prompt_template_var must be a name or null")
    return reasons


def dependency_cycle(
    name: str, dependencies: list[str], graph: Mapping[str, list[str]]
) -> list[str] | None:
    """The first cycle through ``name`` once it depends on ``dependencies``, or None."""
    graph = {**graph, name: dependencies}
    stack = [(name, [name])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, []):
            if nxt == name:
                return [*path, name]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def policy_errors(policy: Mapping[str, Any]) -> Errors:
    errors: Errors = {}
    if not isinstance(policy.get("mandate", ""), str):
        errors.setdefault("mandate", []).append("must be text")
    for list_field, check, key in (
        ("rules", invariants.policy_rule_errors, "id"),
        ("config_params", invariants.config_param_errors, "key"),
    ):
        entries = policy.get(list_field, [])
        if not isinstance(entries, list):
            errors.setdefault(list_field, []).append("must be a list")
            continue
        for index, entry in enumerate(entries):
            for reason in check(entry):
                errors.setdefault(list_field, []).append(f"[{index}] {reason}")
        for duplicate in _duplicates(entries, key):
            errors.setdefault(list_field, []).append(f"duplicate {_shown(duplicate)}")
    return errors


def _duplicates(entries: list[Any], key: str) -> list[str]:
    seen, duplicates = set(), []
    for entry in entries:
        value = entry.get(key) if isinstance(entry, Mapping) else None
        if isinstance(value, str):
            if value in seen:
                duplicates.append(value)
            seen.add(value)
    return duplicates


def _is_list_of_str(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
