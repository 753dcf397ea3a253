"""Refresh: infer each tool's contract from its aggregates, judge drift, prune old traces.

A refresh reads aggregates only (folded after ingest, ``learning.fold.traces_fold``): O(tools
with new traces), never a rescan of traces. Drift is reported here; the ticket a person reviews is
opened (or updated) by ``reviews.services.drift_ticket_open_or_update``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from registry.contract import proposal_of
from registry.models import Application, ContractVersion, RiskLevel, Tool
from registry.revision import revision_memo
from registry.selectors import registry_context, risk_ranks
from registry.validation import VARIABLE_NAME, ContractInvalid
from reviews.services import drift_ticket_open_or_update, new_tool_proposal_open_or_update

from .baselines import behaviour_drift
from .evidence import MAX_ITEM_EXAMPLES, contract_differences, drift_item_support
from .fold import stats_locked, stats_write, traces_fold_pending
from .inference import (
    apply_drift,
    contract_drift,
    drift_fingerprint,
    infer_contract,
    suggest_risk,
)
from .models import DriftReport, InferredContract, ToolDayStats, ToolStats, Trace
from .partitions import partitioned, trace_partitions_drop
from .risk import LabelIndex, Lexicon
from .selectors import risk_label_index, risk_lexicon
from .shapes import (
    Aggregate,
    Dataflow,
    DriftItem,
    ExampleRun,
    InferredDocument,
    RiskShown,
    TicketEvidence,
)

logger = logging.getLogger(__name__)
REFRESH_CHUNK = 500


def tools_with_new_traces() -> list[str]:
    """Tools whose aggregates moved since their last inference, or with traces still pending."""
    dirty = ToolStats.objects.filter(dirty=True).values_list("tool_name", flat=True)
    # ``order_by()``: the model's ordering would make DISTINCT return a row per trace.
    pending = (
        Trace.objects.filter(aggregated=False)
        .order_by()
        .values_list("tool_name", flat=True)
        .distinct()
    )
    return sorted(set(dirty) | set(pending))


@dataclass
class RefreshResult:
    tool_name: str
    folded: int = 0
    inferred: InferredDocument | None = None
    drift: list[DriftItem] = field(default_factory=list)  # report-only items included
    ticket_id: int | None = None  # a drift ticket, or the new-tool proposal of a shadow tool
    published: bool = False


def tool_refresh(*, tool_name: str) -> RefreshResult:
    """Infer one tool's contract and judge drift against the approved one."""
    return tools_refresh(tool_names=[tool_name])[0]


@dataclass
class RefreshInputs:
    """What every refresh reads of the registry, the same for each tool: read once per call,
    from what this process keeps per registry revision (``revision_memo``)."""

    ranks: dict[str, int]
    lex: Lexicon
    labelled: LabelIndex
    lowest: RiskLevel | None
    # (approved version id, gated) -> the risk suggested for the approved contract itself
    # (``_risk_baseline``): computed once per version and revision, not per refresh.
    baselines: dict[tuple[int, tuple[str, ...]], str]


def tools_refresh(*, tool_names: list[str]) -> list[RefreshResult]:
    """Infer and judge drift for many tools, ``REFRESH_CHUNK`` at a time, each chunk in phases
    with a handful of queries: fold what is pending, read the statistics, infer and judge each
    tool, store the inferred contracts. What the registry says (risk levels, the labelled
    tools) is read once for all chunks."""
    inputs = RefreshInputs(
        ranks=risk_ranks(),
        lex=risk_lexicon(),
        labelled=risk_label_index(),
        lowest=RiskLevel.objects.order_by("rank").first(),
        baselines=revision_memo("learning:risk-baselines", dict),
    )
    results = []
    for start in range(0, len(tool_names), REFRESH_CHUNK):
        chunk = tool_names[start : start + REFRESH_CHUNK]
        folded = _refresh_fold(chunk)
        stats_by_name = _refresh_stats_read(chunk)
        inferred_rows = []
        for name in chunk:
            result = RefreshResult(tool_name=name, folded=folded.get(name, 0))
            results.append(result)
            stats = stats_by_name.get(name)
            if stats is not None:
                inferred_rows.append(_refresh_tool(name, stats, result, inputs))
        _refresh_store(inferred_rows, stats_by_name.values())
    return results


def _refresh_fold(chunk: list[str]) -> dict[str, int]:
    """Phase 1: traces the fold has not reached yet (its task queued, or lost) are folded
    first, and statistics whose tool has a version published since are reset."""
    folded = traces_fold_pending(tool_names=chunk, refreshing=chunk)
    # A version published since the last fold resets the since-version aggregate.
    stale = ToolStats.objects.filter(tool_name__in=chunk, tool__isnull=False).exclude(
        since_version_id=F("tool__current_version_id")
    )
    stale_names = sorted(stale.values_list("tool_name", flat=True))
    if stale_names:
        with transaction.atomic():
            stats_write(stats_locked(stale_names))
    return folded


def _refresh_stats_read(chunk: list[str]) -> dict[str, ToolStats]:
    """Phase 2: the chunk's statistics with their tools' approved versions, in one statement:
    what this refresh saw, by its ``changes``."""
    return {
        stats.tool_name: stats
        for stats in ToolStats.objects.filter(tool_name__in=chunk).select_related(
            "tool__current_version__risk"
        )
    }


def _refresh_tool(
    name: str, stats: ToolStats, result: RefreshResult, inputs: RefreshInputs
) -> InferredContract:
    """Phase 3, per tool: infer its contract, judge drift against the approved one (recording
    it, and opening or updating its ticket), or propose a shadow tool."""
    tool = stats.tool
    approved = tool.current_version if tool is not None else None
    if tool is not None and approved is not None:
        approved.tool = tool  # document() reads its name: no query per tool
    risk = approved.risk if approved else None
    use_since = risk is not None and stats.traces_since_version >= risk.min_support
    inferred = infer_contract(
        name=name,
        description=approved.description if approved else "",
        input_schema=approved.input_schema if approved else None,
        aggregate=stats.aggregate_since_version if use_since else stats.aggregate,
        labelled=inputs.labelled,
        permissions=approved.permissions if approved else [],
        annotations=approved.annotations if approved else None,
        lex=inputs.lex,
    )
    result.inferred = inferred
    differing = contract_differences(approved.document() if approved else None, inferred)
    if approved is not None and use_since:
        approved_document = approved.document()
        baseline = _risk_baseline(name=name, approved=approved, inferred=inferred, inputs=inputs)
        result.drift = contract_drift(
            approved=approved_document,
            inferred=inferred,
            risk_rank=inputs.ranks,
            baseline_risk=baseline,
        ) + behaviour_drift(
            approved=approved_document,
            since=stats.aggregate_since_version,
            min_support=approved.risk.min_support,
            latency_is_drift=approved.risk.ticket_on_latency,
        )
        if result.drift:
            _drift_record(
                tool=approved.tool, approved=approved, inferred=inferred, stats=stats, result=result
            )
    elif approved is None and inputs.lowest is not None:
        # A name with no approved contract, with as many traces as the least any tool is
        # judged on (the lowest risk level's min_support), is a shadow tool.
        if stats.traces_total >= inputs.lowest.min_support:
            result.ticket_id = _shadow_tool_propose(
                name=name,
                stats=stats,
                inferred=inferred,
                labelled=inputs.labelled,
                support=inputs.lowest,
            )
    return InferredContract(
        tool_name=name,
        tool=tool,
        document=inferred,
        support=inferred.get("support", 0),
        confidence=inferred.get("confidence", {}),
        differs=bool(differing),
        differing_fields=differing,
    )


def _refresh_store(inferred_rows: list[InferredContract], seen: Iterable[ToolStats]) -> None:
    """Phase 4: the chunk's inferred contracts in one upsert, and its statistics marked seen."""
    InferredContract.objects.bulk_create(
        inferred_rows,
        update_conflicts=True,
        unique_fields=["tool_name"],
        update_fields=[
            "tool",
            "document",
            "support",
            "confidence",
            "differs",
            "differing_fields",
            "inferred_at",
        ],  # fmt: skip
    )
    _stats_mark_inferred(seen)


def _risk_baseline(
    *,
    name: str,
    approved: ContractVersion,
    inferred: InferredDocument,
    inputs: RefreshInputs,
) -> str:
    """The risk suggested for the approved contract itself, read with every input the inferred
    risk was read with (hints, permissions, arguments, the preconditions calls failed without),
    so that only what the traces changed can raise it. When they show the approved effects and
    arguments, the inferred reading is that reading: one refresh reads the tool's risk once,
    and a label a reviewer set below the hints drifts nothing while nothing changes.

    Otherwise it depends on the approved version, the preconditions and the labels only: it is
    suggested once per version, preconditions and registry revision (``inputs.baselines``),
    not on every refresh of the tool."""
    arguments = sorted((approved.input_schema or {}).get("properties") or {})
    observed = sorted((inferred.get("input_schema") or {}).get("properties") or {})
    if sorted(approved.produces) == sorted(inferred["produces"]) and arguments == observed:
        return str(inferred["risk"])
    gated = tuple(inferred["evidence"]["gated"])
    key = (approved.pk, gated)
    if key not in inputs.baselines:
        inputs.baselines[key] = suggest_risk(
            name=name,
            description=approved.description,
            produces=approved.produces,
            permissions=approved.permissions,
            labelled=inputs.labelled,
            annotations=approved.annotations,
            arguments=arguments,
            gated=gated,
            lex=inputs.lex,
        ).risk
    return inputs.baselines[key]


def _stats_mark_inferred(seen: Iterable[ToolStats]) -> None:
    """Record that these rows were inferred; clear ``dirty`` only where nothing was folded
    since they were read (a fold bumps ``changes``), so new traces are never marked seen."""
    rows = list(seen)
    if not rows:
        return
    now = timezone.now()
    ToolStats.objects.filter(pk__in=[row.pk for row in rows]).update(inferred_at=now)
    unchanged = Q()
    for row in rows:
        unchanged |= Q(pk=row.pk, changes=row.changes)
    ToolStats.objects.filter(unchanged).update(dirty=False)


def _drift_record(
    *,
    tool: Tool,
    approved: ContractVersion,
    inferred: InferredDocument,
    stats: ToolStats,
    result: RefreshResult,
) -> None:
    items = result.drift
    # The base version is part of the fingerprint: the same drift after a new approval is new.
    # The report covers every item; the ticket only those that may open one, so a report-only
    # item coming and going never opens a second ticket for the same drift.
    fingerprint = drift_fingerprint(f"{tool.name}@v{approved.number}", items)
    ticketed = [item for item in items if not item.get("report_only")]
    evidence: TicketEvidence = {
        "base_version": approved.number,
        "traces_since_version": stats.traces_since_version,
        "support": inferred.get("support"),
        "applications": _sources(stats.aggregate_since_version),
        "drift": _drift_items_supported(tool.name, items, stats.aggregate_since_version),
        "inferred": {
            key: inferred.get(key)
            for key in ("requires", "produces", "risk", "input_schema", "cost")
        },
    }
    since = stats.aggregate_since_version
    if since.get("first_seen") and since.get("last_seen"):
        # When the calls the evidence counts were made (not when the version was approved).
        evidence["calls_seen"] = {"first": since["first_seen"], "last": since["last_seen"]}
    if any(item["field"] == "risk" for item in items):
        # Why the higher risk is suggested, for the ticket page (learning.risk).
        evidence["risk_evidence"] = list(inferred["evidence"]["risk"])
        evidence["risk_confidence"] = inferred["confidence"]["risk"]
    _note_dataflow(evidence, inferred, [item["field"] for item in items])
    _note_unsafe_names(evidence, inferred)
    report, created = _report_get_or_create(tool, approved, fingerprint, items, evidence)
    if not created:
        DriftReport.objects.filter(pk=report.pk).update(
            evidence=evidence, updated_at=timezone.now()
        )
    risk = approved.risk
    if not ticketed or not (risk.ticket_on_drift or risk.auto_approve_inferred):
        return
    outputs = stats.aggregate_since_version.get("outputs")
    proposal = _proposal(
        apply_drift(approved.document(), inferred, ticketed, outputs=outputs), evidence
    )
    drift = drift_ticket_open_or_update(
        tool=tool,
        base=approved,
        document=proposal,
        evidence=evidence,
        fingerprint=drift_fingerprint(f"{tool.name}@v{approved.number}", ticketed),
    )
    if drift is None:
        return
    reports = DriftReport.objects.filter(pk=report.pk)
    reports.update(ticket=drift.ticket)
    if drift.published:
        reports.update(auto_published=True)
    result.ticket_id = drift.ticket.pk
    result.published = drift.published


def _note_dataflow(evidence: TicketEvidence, inferred: InferredDocument, fields: list[str]) -> None:
    """The routes behind the inferred requires and produces (``learning.dataflow``): which
    output path fed which argument, in how many calls, with example runs."""
    routes = inferred["evidence"]["dataflow"]
    shown: Dataflow = {}
    if routes.get("requires"):
        shown["requires"] = routes["requires"]
    if routes.get("produces"):
        shown["produces"] = routes["produces"]
    if shown and any(field in ("requires", "produces") for field in fields):
        evidence["dataflow"] = shown


def _note_unsafe_names(evidence: TicketEvidence, inferred: InferredDocument) -> None:
    """How many argument names and output keys the traces carried that are not identifier-like
    and so were left out of the inferred schemas (learning.aggregates.inferable_name)."""
    unsafe = inferred["evidence"]["unsafe_names"]
    if unsafe:
        evidence["unsafe_names"] = unsafe


def _drift_items_supported(
    tool_name: str, items: list[DriftItem], aggregate: Aggregate
) -> list[DriftItem]:
    """Each drift item with its counts and example runs (trace id and application), so the
    ticket can link the whole run behind each example. One query, bounded by the examples."""
    supported = [drift_item_support(item, aggregate) for item in items]
    wanted = {trace_id for item in supported for trace_id in item.get("example_trace_ids", [])}
    owners: dict[str, list[int | None]] = {}
    if wanted:
        rows = (
            Trace.objects.filter(tool_name=tool_name, trace_id__in=wanted)
            .values_list("trace_id", "application_id")
            .distinct()
            .order_by("trace_id", "application_id")
        )
        for trace_id, application_id in rows[: 4 * len(wanted)]:
            owners.setdefault(trace_id, []).append(application_id)
    for item in supported:
        runs: list[ExampleRun] = [
            {"trace_id": trace_id, "application_id": application_id}
            for trace_id in item.get("example_trace_ids", [])
            for application_id in owners.get(trace_id, [])
        ]
        if runs:
            item["example_runs"] = runs[:MAX_ITEM_EXAMPLES]
    return supported


def _sources(aggregate: Aggregate) -> dict[str, int]:
    """Which applications' traces (by name) showed the behaviour, with how many each."""
    counts = aggregate.get("sources") or {}
    names = _application_names(counts)
    named: dict[str, int] = {}
    for key, count in counts.items():
        named[names[key]] = named.get(names[key], 0) + count
    return dict(sorted(named.items()))


def _source_examples(aggregate: Aggregate) -> dict[str, list[Any]]:
    """A few trace ids per application (by name): where a reviewer finds the traces."""
    examples = aggregate.get("source_examples") or {}
    names = _application_names(examples)
    return {names[key]: list(trace_ids) for key, trace_ids in sorted(examples.items())}


def _application_names(keys: Iterable[str]) -> dict[str, str]:
    """Aggregate source keys (application ids, ``operator``, ``other``) to what people read."""
    keys = list(keys)
    ids = [int(key) for key in keys if key.isdigit()]
    names = dict(Application.objects.filter(pk__in=ids).values_list("pk", "name"))
    return {
        key: names.get(int(key), f"application #{key}") if key.isdigit() else key for key in keys
    }


SHADOW_DESCRIPTION = (
    "Inferred from the traces of a tool no one registered: what it requires, produces and "
    "accepts is what its calls showed. Describe what it does before approving it."
)


def _shadow_tool_propose(
    *,
    name: str,
    stats: ToolStats,
    inferred: InferredDocument,
    labelled: LabelIndex,
    support: RiskLevel,
) -> int | None:
    """A shadow tool (traces of a name with no approved contract, at least the lowest risk
    level's ``min_support`` of them) becomes one ``new_tool`` proposal; returns its ticket id.

    One proposal per name, inferred from every application's traces of it; the evidence names
    each application with its count and example trace ids, so a reviewer sees who reported
    what (only reviewers see proposals; runtimes never do). Once approved the tool is visible
    to applications by their usual rules.
    """
    aggregate = stats.aggregate
    risk, risk_evidence = _risk_suggestion(
        name=name,
        produces=inferred["produces"],
        gated=inferred["evidence"]["gated"],
        labelled=labelled,
    )
    evidence: TicketEvidence = {
        "shadow_tool": name,
        "support": aggregate.get("total", 0),
        "min_support": support.min_support,
        "applications": _sources(aggregate),
        "examples": _source_examples(aggregate),
        "risk": risk_evidence,
        "risk_evidence": risk_evidence["evidence"],  # as drift tickets carry it
        "risk_confidence": risk_evidence["confidence"],
        "inferred": {
            key: inferred.get(key) for key in ("requires", "produces", "input_schema", "cost")
        },
    }
    _note_dataflow(evidence, inferred, ["requires", "produces"])
    _note_unsafe_names(evidence, inferred)
    document = {
        "name": name,
        "description": SHADOW_DESCRIPTION,
        "input_schema": inferred["input_schema"],
        "requires": inferred["requires"],
        "produces": inferred["produces"],
        "risk": risk,
        "cost": {key: value for key, value in inferred["cost"].items() if value is not None},
    }
    proposal = _proposal(document, evidence)
    try:
        outcome = new_tool_proposal_open_or_update(document=proposal, evidence=evidence)
    except ContractInvalid as exc:
        logger.warning("the shadow tool %r cannot be proposed: %s", name, exc)
        return None
    return outcome.ticket.pk if outcome is not None else None


def _risk_suggestion(
    *, name: str, produces: list[str], gated: list[str], labelled: LabelIndex
) -> tuple[str, RiskShown]:
    """The one place a shadow tool's risk is suggested, with the evidence shown to reviewers."""
    suggestion = suggest_risk(
        name=name,
        description="",
        produces=produces,
        permissions=[],
        labelled=labelled,
        gated=gated,
        lex=risk_lexicon(),
    )
    return suggestion.risk, {
        "suggested": suggestion.risk,
        "confidence": round(suggestion.confidence, 3),
        "evidence": suggestion.evidence,
    }


def _report_get_or_create(
    tool: Tool,
    approved: ContractVersion,
    fingerprint: str,
    items: list[DriftItem],
    evidence: TicketEvidence,
) -> tuple[DriftReport, bool]:
    try:
        with transaction.atomic():
            return DriftReport.objects.get_or_create(
                fingerprint=fingerprint,
                defaults={"tool": tool, "base": approved, "items": items, "evidence": evidence},
            )
    except IntegrityError:
        return DriftReport.objects.get(fingerprint=fingerprint), False


def _proposal(document: dict[str, Any], evidence: TicketEvidence) -> dict[str, Any]:
    """Keep the proposal a valid contract: variables outside the vocabulary go to the evidence
    (``unknown_variables``: approving the ticket adds them; ``unusable_variables``: names that
    cannot be variables, listed so a reviewer can map them to an alias)."""
    context = registry_context(document=document)  # the vocabulary, and the tools it names
    for key in ("requires", "produces"):
        known = [name for name in document.get(key, []) if context.canonical(name)]
        unknown = sorted(set(document.get(key, [])) - set(known))
        usable = [name for name in unknown if VARIABLE_NAME.fullmatch(name) and len(name) <= 100]
        if usable:
            evidence.setdefault("unknown_variables", {})[key] = usable
        if len(usable) < len(unknown):
            evidence.setdefault("unusable_variables", {})[key] = [
                name[:100] for name in unknown if name not in usable
            ]
        document[key] = known
    document["effects"] = {
        var: meta
        for var, meta in (document.get("effects") or {}).items()
        if var in document["produces"]
    }
    return proposal_of(document)


def traces_prune(*, older_than: timedelta | None = None, chunk: int = 10_000) -> int:
    """Delete folded traces past retention; what inference needs of registered tools lives on
    in ToolStats. Unregistered names go with their last trace: their statistics and inferred
    contracts are deleted too, so junk names cannot pile up. Return how many traces went.

    On a partitioned trace table (PostgreSQL, ``learning.partitions``) a day past retention is
    dropped whole, at a cost that does not grow with its rows; rows outside the days'
    partitions (the default partition, the one a populated table was converted into) are
    deleted in chunks from before the cutoff's day, so the day the cutoff falls in is dropped
    whole the next day rather than deleted in part now. Elsewhere (SQLite) every row goes in
    chunks of ``chunk``. A dropped day counts as many traces as the planner's statistics say.
    """
    cutoff = timezone.now() - (older_than or settings.TRACE_RETENTION)
    deleted = 0
    if partitioned():
        cutoff = cutoff.replace(hour=0, minute=0, second=0, microsecond=0)
        deleted += trace_partitions_drop(before=cutoff).rows
    while True:
        # Unordered: the model's newest-first ordering would sort what is deleted anyway.
        ids = list(
            Trace.objects.filter(aggregated=True, occurred_at__lt=cutoff)
            .order_by()
            .values_list("pk", flat=True)[:chunk]
        )
        if not ids:
            break
        # The cutoff again: on partitions, only those it reaches are searched for the ids.
        deleted += Trace.objects.filter(pk__in=ids, occurred_at__lt=cutoff).delete()[0]
    remaining = Trace.objects.filter(tool_name=OuterRef("tool_name"))
    for model in (ToolStats, InferredContract, ToolDayStats):
        model.objects.filter(tool__isnull=True).exclude(Exists(remaining)).delete()
    # A registered tool's days outlive its traces, up to their own (much longer) retention.
    day_cutoff = (timezone.now() - settings.TOOL_DAY_RETENTION).date()
    ToolDayStats.objects.filter(day__lt=day_cutoff).delete()
    return deleted
