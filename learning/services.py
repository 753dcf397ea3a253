"""Refresh: infer each tool's contract from its aggregates, judge drift, prune old traces.

A refresh reads aggregates only (folded at ingest, ``learning.ingest``): O(tools with new
traces), never a rescan of traces. Drift is reported here; the ticket a person reviews is
opened (or updated) by ``reviews.services.drift_ticket_open_or_update``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from registry.contract import proposal_of
from registry.models import Application, ContractVersion, Tool
from registry.selectors import registry_context, risk_ranks
from reviews.services import drift_ticket_open_or_update

from .evidence import MAX_ITEM_EXAMPLES, contract_differences, drift_item_support
from .inference import (
    apply_drift,
    contract_drift,
    drift_fingerprint,
    infer_contract,
    prepare_labels,
    suggest_risk,
)
from .ingest import stats_locked, stats_write, tool_fold
from .models import DriftReport, InferredContract, ToolDayStats, ToolStats, Trace

logger = logging.getLogger(__name__)
REFRESH_CHUNK = 500


def tools_with_new_traces() -> list[str]:
    """Tools whose aggregates moved since their last inference, or with traces still pending."""
    dirty = ToolStats.objects.filter(dirty=True).values_list("tool_name", flat=True)
    pending = Trace.objects.filter(aggregated=False).values_list("tool_name", flat=True)
    return sorted(set(dirty) | set(pending.distinct()))


@dataclass
class RefreshResult:
    tool_name: str
    folded: int = 0
    inferred: dict | None = None
    drift: list[dict] = field(default_factory=list)
    ticket_id: int | None = None
    published: bool = False


def tool_refresh(*, tool_name: str) -> RefreshResult:
    """Infer one tool's contract and judge drift against the approved one."""
    return tools_refresh(tool_names=[tool_name])[0]


def tools_refresh(*, tool_names: list[str]) -> list[RefreshResult]:
    """Infer and judge drift for many tools with a handful of queries per chunk."""
    ranks = risk_ranks()
    labelled = prepare_labels(_labelled_tools())
    results = []
    for start in range(0, len(tool_names), REFRESH_CHUNK):
        chunk = tool_names[start : start + REFRESH_CHUNK]
        pending = set(
            Trace.objects.filter(aggregated=False, tool_name__in=chunk)
            .values_list("tool_name", flat=True)
            .distinct()
        )
        folded = {name: tool_fold(tool_name=name) for name in pending}
        # A version published since the last fold resets the since-version aggregate.
        stale = ToolStats.objects.filter(tool_name__in=chunk, tool__isnull=False).exclude(
            since_version_id=F("tool__current_version_id")
        )
        stale_names = sorted(stale.values_list("tool_name", flat=True))
        if stale_names:
            with transaction.atomic():
                stats_write(stats_locked(stale_names))
        stats_by_name = {
            stats.tool_name: stats
            for stats in ToolStats.objects.filter(tool_name__in=chunk).select_related(
                "tool__current_version__risk"
            )
        }
        inferred_rows = []
        for name in chunk:
            result = RefreshResult(tool_name=name, folded=folded.get(name, 0))
            results.append(result)
            stats = stats_by_name.get(name)
            if stats is None:
                continue
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
                labelled=labelled,
                permissions=approved.permissions if approved else [],
            )
            result.inferred = inferred
            differing = contract_differences(approved.document() if approved else None, inferred)
            inferred_rows.append(
                InferredContract(
                    tool_name=name,
                    tool=tool,
                    document=inferred,
                    support=inferred.get("support", 0),
                    confidence=inferred.get("confidence", {}),
                    differs=bool(differing),
                    differing_fields=differing,
                )
            )
            if approved is not None and use_since:
                approved_document = approved.document()
                baseline, _ = suggest_risk(
                    name=name,
                    description=approved.description,
                    produces=approved.produces,
                    permissions=approved.permissions,
                    labelled=labelled,
                )
                result.drift = contract_drift(
                    approved=approved_document,
                    inferred=inferred,
                    risk_rank=ranks,
                    baseline_risk=baseline,
                )
                if result.drift:
                    _drift_record(
                        tool=approved.tool,
                        approved=approved,
                        inferred=inferred,
                        stats=stats,
                        result=result,
                    )
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
        ToolStats.objects.filter(tool_name__in=chunk).update(
            dirty=False, inferred_at=timezone.now()
        )
    return results


def _labelled_tools() -> list[dict]:
    """The risk labels people gave approved tools: what risk suggestions learn from."""
    return [
        {
            "name": name,
            "description": description,
            "risk": risk,
            "produces": produces,
            "permissions": permissions,
        }
        for name, description, risk, produces, permissions in ContractVersion.objects.filter(
            status=ContractVersion.Status.APPROVED
        ).values_list("tool__name", "description", "risk__name", "produces", "permissions")
    ]


def _drift_record(
    *,
    tool: Tool,
    approved: ContractVersion,
    inferred: dict[str, Any],
    stats: ToolStats,
    result: RefreshResult,
) -> None:
    items = result.drift
    # The base version is part of the fingerprint: the same drift after a new approval is new.
    fingerprint = drift_fingerprint(f"{tool.name}@v{approved.number}", items)
    evidence = {
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
    report, created = _report_get_or_create(tool, approved, fingerprint, items, evidence)
    if not created:
        DriftReport.objects.filter(pk=report.pk).update(
            evidence=evidence, updated_at=timezone.now()
        )
    risk = approved.risk
    if not (risk.ticket_on_drift or risk.auto_approve_inferred):
        return
    proposal = _proposal(apply_drift(approved.document(), inferred, items), evidence)
    drift = drift_ticket_open_or_update(
        tool=tool, base=approved, document=proposal, evidence=evidence, fingerprint=fingerprint
    )
    if drift is None:
        return
    reports = DriftReport.objects.filter(fingerprint=fingerprint)
    reports.update(ticket=drift.ticket)
    if drift.published:
        reports.update(auto_published=True)
    result.ticket_id = drift.ticket.pk
    result.published = drift.published


def _drift_items_supported(
    tool_name: str, items: list[dict[str, Any]], aggregate: dict[str, Any]
) -> list[dict[str, Any]]:
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
        runs = [
            {"trace_id": trace_id, "application_id": application_id}
            for trace_id in item.get("example_trace_ids", [])
            for application_id in owners.get(trace_id, [])
        ]
        if runs:
            item["example_runs"] = runs[:MAX_ITEM_EXAMPLES]
    return supported


def _sources(aggregate: dict[str, Any]) -> dict[str, int]:
    """Which applications' traces (by name) showed the behaviour, with how many each."""
    counts = aggregate.get("sources") or {}
    ids = [int(key) for key in counts if key.isdigit()]
    names = dict(Application.objects.filter(pk__in=ids).values_list("pk", "name"))
    named: dict[str, int] = {}
    for key, count in counts.items():
        name = names.get(int(key), f"application #{key}") if key.isdigit() else key
        named[name] = named.get(name, 0) + count
    return dict(sorted(named.items()))


def _report_get_or_create(
    tool: Tool,
    approved: ContractVersion,
    fingerprint: str,
    items: list[dict[str, Any]],
    evidence: dict[str, Any],
) -> tuple[DriftReport, bool]:
    try:
        with transaction.atomic():
            return DriftReport.objects.get_or_create(
                fingerprint=fingerprint,
                defaults={"tool": tool, "base": approved, "items": items, "evidence": evidence},
            )
    except IntegrityError:
        return DriftReport.objects.get(fingerprint=fingerprint), False


def _proposal(document: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
    """Keep the proposal a valid contract: variables outside the vocabulary go to the evidence."""
    context = registry_context()
    for key in ("requires", "produces"):
        known = [name for name in document.get(key, []) if context.canonical(name)]
        unknown = sorted(set(document.get(key, [])) - set(known))
        if unknown:
            evidence.setdefault("unknown_variables", {})[key] = unknown
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
    contracts are deleted too, so junk names cannot pile up."""
    cutoff = timezone.now() - (older_than or settings.TRACE_RETENTION)
    deleted = 0
    while True:
        ids = list(
            Trace.objects.filter(aggregated=True, occurred_at__lt=cutoff).values_list(
                "pk", flat=True
            )[:chunk]
        )
        if not ids:
            break
        deleted += Trace.objects.filter(pk__in=ids).delete()[0]
    remaining = Trace.objects.filter(tool_name=OuterRef("tool_name"))
    for model in (ToolStats, InferredContract, ToolDayStats):
        model.objects.filter(tool__isnull=True).exclude(Exists(remaining)).delete()
    # A registered tool's days outlive its traces, up to their own (much longer) retention.
    day_cutoff = (timezone.now() - settings.TOOL_DAY_RETENTION).date()
    ToolDayStats.objects.filter(day__lt=day_cutoff).delete()
    return deleted
