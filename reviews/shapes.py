"""The JSON shapes stored on review records (pure: no Django).

``ReviewTicket.evidence`` is written by the learning loop (drift tickets, shadow-tool
proposals), by MCP sources (declared tools, retirements) and by people (``contract_propose``);
every key is optional, since each writer sets its own subset and old rows may lack any.
Readers of stored rows still check what they read (``reviews.evidence``): a type says what
writers write, not what an old row holds.
"""

from typing import Any, NotRequired, TypedDict


class ExampleRun(TypedDict):
    """A trace to open, with the application that reported it."""

    trace_id: str
    application_id: int | None


class DriftItem(TypedDict):
    """What drifted in one field of a contract (``learning.inference.contract_drift``,
    ``learning.baselines``), with the support ``learning.evidence.drift_item_support`` adds."""

    field: str  # requires, produces, input_schema, risk, error_rate, latency, outputs
    added: list[str]
    removed: list[str]
    detail: str
    # Behaviour drift (learning.baselines): what it is judged against, and what was seen.
    baseline: NotRequired[dict[str, Any] | None]
    observed: NotRequired[dict[str, Any]]
    examples: NotRequired[list[Any]]
    # An item that is reported but never opens a ticket on its own.
    report_only: NotRequired[bool]
    # The support: how many of ``total`` ``total_of`` (calls, successful calls) showed each name.
    counts: NotRequired[dict[str, int]]
    total: NotRequired[int]
    total_of: NotRequired[str]
    example_trace_ids: NotRequired[list[str]]
    example_runs: NotRequired[list[ExampleRun]]


class CallsSeen(TypedDict):
    """When the calls behind the evidence were first and last made (UTC ISO texts)."""

    first: str
    last: str


class Route(TypedDict):
    """One way a variable's values went: ``origin → argument`` or an output path."""

    route: str
    traces: int
    examples: list[Any]
    # An effect's output path: the calls that brought new values there, in any trace.
    new_values: NotRequired[int]


class Dataflow(TypedDict, total=False):
    """The routes behind inferred requirements and effects, by variable."""

    requires: dict[str, list[Route]]
    produces: dict[str, list[Route]]


class RiskShown(TypedDict, total=False):
    """A suggested risk as the ticket page shows it."""

    suggested: str
    confidence: float
    evidence: list[Any]  # learning.risk.RiskEvidence items


class PoisoningFlag(TypedDict):
    code: Any
    where: Any
    message: Any


class TicketEvidence(TypedDict, total=False):
    """``ReviewTicket.evidence`` (and ``DriftReport.evidence``): what a reviewer reads beside
    the diff. Keys ``reviews.evidence.evidence_summary`` does not know are still shown."""

    # Drift (learning.services): the approved version it is measured against, the traces
    # since, the inferred contract and each drifted field with its support.
    base_version: int
    traces_since_version: int
    support: int
    applications: dict[str, int]  # traces per application name
    drift: list[DriftItem]
    inferred: dict[str, Any]
    calls_seen: CallsSeen
    dataflow: Dataflow
    unsafe_names: int  # argument names and output keys left out for not being identifiers
    # Variables outside the vocabulary: approving adds them; unusable names are listed only.
    unknown_variables: dict[str, list[str]]
    unusable_variables: dict[str, list[str]]
    # The suggested risk and why (drift, shadow tools and declared tools alike).
    risk: RiskShown
    risk_evidence: list[Any]  # learning.risk.RiskEvidence items
    risk_confidence: float | None
    # A shadow tool: traces of a name with no approved contract.
    shadow_tool: str
    min_support: int
    examples: dict[str, list[Any]]  # example trace ids per application
    # A tool an MCP server declares (sources.services), or one it no longer declares.
    source: str
    server: str
    server_info: dict[str, str]
    runs: str
    declared_name: str
    definition_hash: str
    poisoning: list[PoisoningFlag]
    compatibility: dict[str, Any]
    gone: str
