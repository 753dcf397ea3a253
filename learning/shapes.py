"""The JSON shapes the learning loop stores and passes between modules (pure: no Django).

``ToolStats.aggregate`` (``learning.aggregates``), the inferred contract document
(``learning.inference``, stored in ``InferredContract.document``), drift items and ticket
evidence (``reviews.shapes``, which the review app owns) and an MCP server's last sync report
(``McpServer.last_sync_report``, written by ``sources.services``).
"""

from typing import Any, NotRequired, TypedDict

from reviews.shapes import Dataflow, DriftItem, ExampleRun, RiskShown, Route, TicketEvidence

from .risk import RiskEvidence

__all__ = [
    "NO_ARG",
    "NO_VARIABLE",
    "Aggregate",
    "ArgCounts",
    "Baseline",
    "Dataflow",
    "DriftItem",
    "ExampleRun",
    "InferredConfidence",
    "InferredCost",
    "InferredDocument",
    "InferredEvidence",
    "OutputCounts",
    "RiskShown",
    "Route",
    "RouteCounts",
    "SyncRecord",
    "TicketEvidence",
    "TypeCounts",
    "VariableCounts",
]


class RouteCounts(TypedDict):
    count: int
    examples: list[Any]  # trace ids


class VariableCounts(TypedDict):
    """One state variable: in how many calls it was there before (success, error), was added
    by a success, or flowed into an argument; a few example trace ids and the routes."""

    before_ok: int
    before_err: int
    added_ok: int
    flows: int
    examples: list[Any]
    routes: NotRequired[dict[str, RouteCounts]]


# One argument name: how often sent, its JSON types, and the variables that fed it ("from" is
# a keyword, so the functional form).
ArgCounts = TypedDict("ArgCounts", {"count": int, "types": dict[str, int], "from": dict[str, int]})


# What a reader takes for a variable or an argument an aggregate has no counts of.
NO_VARIABLE: VariableCounts = {"before_ok": 0, "before_err": 0, "added_ok": 0, "flows": 0,
                               "examples": []}  # fmt: skip
NO_ARG: ArgCounts = {"count": 0, "types": {}, "from": {}}


class TypeCounts(TypedDict):
    count: int
    types: dict[str, int]


class OutputCounts(TypedDict):
    """Output checks against the approved contract (``learning.outputs``)."""

    checked: int
    failed: int
    unchecked: int
    paths: dict[str, int]  # failing output paths
    missing: dict[str, int]  # produced variables missing from state_after
    examples: list[Any]
    keys: dict[str, TypeCounts]  # the outputs' keys seen
    roots: dict[str, int]  # the outputs' JSON types


class Baseline(TypedDict):
    """What the traces before a version's publication showed: counts and durations only."""

    version: int | None
    total: int
    errors: int
    durations: dict[str, int]


class Aggregate(TypedDict):
    """``ToolStats.aggregate``: per-tool statistics folded one trace at a time and merged
    (``learning.aggregates``); bounded whatever the number of traces."""

    total: int
    successes: int
    errors: int
    variables: dict[str, VariableCounts]
    args: dict[str, ArgCounts]
    durations: dict[str, int]  # logarithmic bucket -> calls
    overflow: int  # variables and arguments past the caps
    sources: dict[str, int]  # traces per application id
    source_examples: dict[str, list[Any]]
    error_examples: list[Any]
    slowest: list[list[Any]]  # [duration_ms, trace_id], slowest first
    outputs: OutputCounts
    unsafe_names: NotRequired[int]
    # Output path -> successful calls whose output brought a value new to its trace there.
    new_paths: NotRequired[dict[str, int]]
    first_seen: NotRequired[str]
    last_seen: NotRequired[str]
    # A since-version aggregate: what the traces before the version showed (learning.baselines).
    baseline: NotRequired[Baseline]


class InferredCost(TypedDict):
    latency_ms_p50: float | None
    latency_ms_p95: float | None
    error_rate: float


class InferredConfidence(TypedDict):
    requires: float
    produces: float
    input_schema: float
    risk: float
    cost: float


class InferredEvidence(TypedDict):
    risk: list[RiskEvidence]
    gated: list[str]  # state variables its calls failed without
    unsafe_names: int
    dataflow: Dataflow


class InferredDocument(TypedDict):
    """A contract as the traces show it (``learning.inference.infer_contract``)."""

    name: str
    description: str
    requires: list[str]
    produces: list[str]
    risk: str
    input_schema: dict[str, Any]
    cost: InferredCost
    support: int
    confidence: InferredConfidence
    evidence: InferredEvidence


class SyncRecord(TypedDict):
    """``McpServer.last_sync_report``: what one sync did, each list cut to its first names."""

    server: str
    outcome: str
    error: str
    declared: int
    proposed: list[str]
    published: list[str]
    changed: list[str]
    updated: list[str]
    withdrawn: list[str]
    retired: list[str]
    deferred: list[str]
    repinned: list[str]
    server_info: dict[str, str]
    unchanged: int
    refused: dict[str, str]
    flagged: dict[str, str]
