"""The contract document: its one definition, shared by validation, models, diff, services,
serializers and the admin.

Pure Python (no Django). ``FIELDS`` is the table every layer reads: a field's name, the value an
absent field means, how a reviewer's diff compares it, and where the admin shows it. A contract
document is a ``ContractDocument``; anything that lists contract fields takes them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

DiffKind = Literal["name", "text", "schema", "set", "mapping", "keyed", "risk", "value"]


class Cost(TypedDict, total=False):
    latency_ms_p50: float
    latency_ms_p95: float
    error_rate: float


class ResourceLimits(TypedDict, total=False):
    timeout_ms: int
    memory_mb: int
    max_output_bytes: int


class Effect(TypedDict, total=False):
    merge: Literal["replace", "append", "merge_dict"]
    preserve_across_turns: bool
    prompt_template_var: str


class Annotations(TypedDict, total=False):
    """MCP tool annotations, camelCase keys kept verbatim: claims of the tool's author. A
    server may add keys of its own; they are kept as declared too."""

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class ContractDocument(TypedDict):
    """What import, export, the API and the review diff speak (docs/formats.md, "Contract
    document")."""

    name: str
    description: str
    input_schema: dict[str, Any]
    requires: list[str]
    produces: list[str]
    risk: str
    output_schema: NotRequired[dict[str, Any] | None]
    annotations: NotRequired[Annotations]
    effects: NotRequired[dict[str, Effect]]
    cost: NotRequired[Cost]
    permissions: NotRequired[list[str]]
    invariants: NotRequired[list[dict[str, Any]]]
    config_params: NotRequired[list[dict[str, Any]]]
    dependencies: NotRequired[list[str]]
    resource_limits: NotRequired[ResourceLimits]
    status: NotRequired[Literal["active", "deprecated"]]
    version: NotRequired[int]


@dataclass(frozen=True)
class Field:
    """One field of a contract document.

    ``empty`` is what an absent field means (comparisons and storage go through it, so
    ``permissions: []`` and a missing key are the same contract); ``diff`` is how the review
    diff compares two values; ``group`` is the admin fieldset that shows it; ``stored`` says
    whether ``ContractVersion`` keeps it in a column of its own name.
    """

    name: str
    empty: Any
    diff: DiffKind
    group: str
    stored: bool = True
    key: str = ""  # keyed lists: the identifying key of an entry
    text: str = ""  # keyed lists: the text inside an entry that a model reads


# In the order a reviewer reads them: what the model reads first, then what the runtime enforces.
FIELDS: tuple[Field, ...] = (
    Field("name", None, "name", "Contract", stored=False),
    Field("description", "", "text", "Contract"),
    Field("input_schema", {}, "schema", "Interface"),
    Field("output_schema", {}, "schema", "Interface"),
    Field("annotations", {}, "mapping", "Interface"),
    Field("requires", [], "set", "State"),
    Field("produces", [], "set", "State"),
    Field("effects", {}, "mapping", "State"),
    Field("risk", None, "risk", "Contract", stored=False),
    Field("permissions", [], "set", "Contract"),
    Field("cost", {}, "mapping", "Operations"),
    Field("invariants", [], "keyed", "Rules", key="id", text="rule"),
    Field("config_params", [], "keyed", "Rules", key="key", text="description"),
    Field("dependencies", [], "set", "Operations"),
    Field("resource_limits", {}, "mapping", "Operations"),
    Field("status", "active", "value", "Contract", stored=False),
)
FIELDS_BY_NAME: dict[str, Field] = {field.name: field for field in FIELDS}

# The version number is bookkeeping: it is not content, so hashes and diffs ignore it.
BOOKKEEPING_KEYS = frozenset({"version"})
# Every key a document may carry.
KNOWN_KEYS = frozenset(FIELDS_BY_NAME) | BOOKKEEPING_KEYS
# Keys a proposal may hold (a proposal has no version number yet).
PROPOSAL_KEYS = frozenset(FIELDS_BY_NAME)
# The fields ContractVersion stores in columns of their own name.
STORED_FIELDS: tuple[str, ...] = tuple(field.name for field in FIELDS if field.stored)

COST_KEYS = frozenset(Cost.__annotations__)
ANNOTATION_KEYS = frozenset(Annotations.__annotations__)
ANNOTATION_HINTS = ANNOTATION_KEYS - {"title"}
MAX_ANNOTATION_TITLE = 200
# What a reviewer can read and a model's context can hold: a description past it is refused.
MAX_DESCRIPTION = 16_000
# Keys beyond the specification's are a server's own (chrome-devtools' ``category``): kept as
# declared, bounded like any other text a contract stores.
MAX_ANNOTATION_KEY = 100
MAX_ANNOTATIONS_CHARS = 10_000
# Fields added after versions were stored: an empty one is left out of the content hash, so
# the hashes of versions written before the field existed stay what they were.
HASHED_ONLY_WHEN_SET = frozenset({"annotations"})
LIMIT_KEYS = frozenset(ResourceLimits.__annotations__)
MERGE_RULES = frozenset({"replace", "append", "merge_dict"})
LIFECYCLES = frozenset({"active", "deprecated"})


def empty_value(name: str) -> Any:
    """What an absent field means (a fresh copy: callers may mutate it)."""
    field = FIELDS_BY_NAME.get(name)
    if field is None:
        return None
    empty = field.empty
    return type(empty)() if isinstance(empty, (list, dict)) else empty


def with_defaults(document: Mapping[str, Any]) -> dict[str, Any]:
    """Every stored field present, absent or null ones replaced by what they mean."""
    filled = dict(document)
    for name in STORED_FIELDS:
        if filled.get(name) is None and name != "output_schema":
            filled[name] = empty_value(name)
    filled.setdefault("output_schema", None)
    filled["input_schema"] = filled["input_schema"] or {"type": "object"}
    filled["status"] = filled.get("status") or "active"
    return filled


def proposal_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """Only the keys a proposal may hold."""
    return {key: value for key, value in document.items() if key in PROPOSAL_KEYS}
