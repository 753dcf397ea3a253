"""Writes of the learning capability: ingest traces, fold them, infer, judge drift, prune.

Ingest only stores (fast, and nothing accepted is lost). Refresh claims the traces not yet
folded (``aggregated = false``) with ``FOR UPDATE SKIP LOCKED``, folds them into the tool's
aggregates under a row lock and marks them folded in the same transaction: two workers, a
retried task or a killed worker never fold a trace twice or lose one, and a refresh costs
O(new traces), never a rescan.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import islice

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from registry.models import ContractVersion, Tool
from registry.selectors import alias_map, registry_context, risk_ranks
from registry.validation import ContractInvalid
from reviews.models import AuditEntry, ReviewTicket
from reviews.services import contract_propose, contract_publish, inferred_change_may_auto_publish

from .aggregates import aggregate_add, aggregate_merge, new_aggregate
from .inference import apply_drift, contract_drift, drift_fingerprint, infer_contract
from .models import DriftReport, InferredContract, ToolStats, Trace
from .traces import trace_parse

logger = logging.getLogger(__name__)
FOLD_BATCH = 5000
TRACE_FIELDS = ["trace_id", "step", "status", "args", "state_before", "state_after", "duration_ms"]


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict] = field(default_factory=list)  # {"index", "field", "reason"}


def traces_ingest(
    *,
    items: Iterable[tuple[int, object]],
    application=None,
    batch_size: int | None = None,
) -> IngestResult:
    """Store valid traces in batches, skip duplicates of (trace_id, step), report the rest.

    ``items`` pairs each trace with where it came from (a list index, a line number), which
    problems report. Each batch commits on its own: a bad line late in a file never loses the
    good ones before it, and memory stays bounded by the batch size.
    """
    batch_size = batch_size or settings.TRACE_BATCH_SIZE
    aliases = alias_map()
    tools = dict(Tool.objects.values_list("name", "pk"))
    result = IngestResult()
    iterator = iter(items)
    while batch := list(islice(iterator, batch_size)):
        rows: dict[tuple[str, int], Trace] = {}
        for index, item in batch:
            trace, errors = trace_parse(item, aliases=aliases)
            if errors:
                result.rejected += [
                    {"index": index, "field": name, "reason": reason} for name, reason in errors
                ]
                continue
            key = (trace["trace_id"], trace["step"])
            if key in rows:
                result.duplicates += 1
                continue
            rows[key] = Trace(
                trace_id=trace["trace_id"],
                step=trace["step"],
                tool_name=trace["tool"],
                tool_id=tools.get(trace["tool"]),
                unknown_tool=trace["tool"] not in tools,
                args=trace["args"],
                status=trace["status"],
                state_before=trace["state_before"],
                state_after=trace["state_after"],
                output=trace["output"],
                error=trace["error"] or "",
                duration_ms=trace["duration_ms"],
                occurred_at=trace["occurred_at"],
                application=application,
            )
        if not rows:
            continue
        existing = set(
            Trace.objects.filter(trace_id__in={key[0] for key in rows}).values_list(
                "trace_id", "step"
            )
        )
        new = [row for key, row in rows.items() if key not in existing]
        result.duplicates += len(rows) - len(new)
        # ignore_conflicts covers a concurrent writer of the same (trace_id, step): stored once.
        with transaction.atomic():
            Trace.objects.bulk_create(new, ignore_conflicts=True)
        result.accepted += len(new)
    return result


def tools_with_new_traces() -> list[str]:
    return sorted(
        Trace.objects.filter(aggregated=False).values_list("tool_name", flat=True).distinct()
    )


def tool_fold(*, tool_name: str) -> int:
    """Fold the tool's pending traces into its aggregates; return how many were folded."""
    folded = 0
    while True:
        with transaction.atomic():
            claimed = list(
                Trace.objects.select_for_update(skip_locked=True)
                .filter(tool_name=tool_name, aggregated=False)
                .order_by("id")
                .values("id", "received_at", *TRACE_FIELDS)[:FOLD_BATCH]
            )
            if not claimed:
                return folded
            stats = _stats_locked(tool_name)
            since = stats.since_version
            delta_all, delta_since, since_count = new_aggregate(), new_aggregate(), 0
            for trace in claimed:
                aggregate_add(delta_all, trace)
                if (
                    since is not None
                    and since.approved_at
                    and trace["received_at"] >= since.approved_at
                ):
                    aggregate_add(delta_since, trace)
                    since_count += 1
            aggregate_merge(stats.aggregate, delta_all)
            aggregate_merge(stats.aggregate_since_version, delta_since)
            stats.traces_total += len(claimed)
            stats.traces_since_version += since_count
            stats.dirty = True
            stats.save()
            Trace.objects.filter(pk__in=[trace["id"] for trace in claimed]).update(aggregated=True)
            folded += len(claimed)


def _stats_locked(tool_name: str) -> ToolStats:
    tool = Tool.objects.select_related("current_version").filter(name=tool_name).first()
    try:
        with transaction.atomic():
            ToolStats.objects.get_or_create(
                tool_name=tool_name,
                defaults={"aggregate": new_aggregate(), "aggregate_since_version": new_aggregate()},
            )
    except IntegrityError:
        pass  # another worker created it first
    stats = (
        ToolStats.objects.select_for_update()
        .select_related("since_version")
        .get(tool_name=tool_name)
    )
    current = tool.current_version if tool else None
    if stats.tool_id != (tool.pk if tool else None) or stats.since_version_id != (
        current.pk if current else None
    ):
        # A new approved version: drift is judged only on what the tool did since then.
        stats.tool = tool
        stats.since_version = current
        stats.aggregate_since_version = new_aggregate()
        stats.traces_since_version = 0
    if not stats.aggregate:
        stats.aggregate = new_aggregate()
    return stats


@dataclass
class RefreshResult:
    tool_name: str
    folded: int = 0
    inferred: dict | None = None
    drift: list[dict] = field(default_factory=list)
    ticket_id: int | None = None
    published: bool = False


def tool_refresh(*, tool_name: str) -> RefreshResult:
    """Fold new traces, infer the tool's contract and judge drift against the approved one."""
    result = RefreshResult(tool_name=tool_name, folded=tool_fold(tool_name=tool_name))
    stats = ToolStats.objects.filter(tool_name=tool_name).select_related("since_version").first()
    if stats is None:
        return result
    tool = Tool.objects.select_related("current_version__risk").filter(name=tool_name).first()
    approved = tool.current_version if tool else None
    if tool and tool.current_version_id != stats.since_version_id:
        with transaction.atomic():
            stats = _stats_locked(tool_name)
            stats.save()
    risk = approved.risk if approved else None
    use_since = risk is not None and stats.traces_since_version >= risk.min_support
    aggregate = stats.aggregate_since_version if use_since else stats.aggregate
    labelled = _labelled_tools(exclude=tool_name)
    inferred = infer_contract(
        name=tool_name,
        description=approved.description if approved else "",
        input_schema=approved.input_schema if approved else None,
        aggregate=aggregate,
        labelled=labelled,
        permissions=approved.permissions if approved else [],
    )
    InferredContract.objects.update_or_create(
        tool_name=tool_name,
        defaults={
            "tool": tool,
            "document": inferred,
            "support": inferred.get("support", 0),
            "confidence": inferred.get("confidence", {}),
        },
    )
    ToolStats.objects.filter(pk=stats.pk).update(dirty=False, inferred_at=timezone.now())
    result.inferred = inferred
    if approved is None or not use_since:
        return result
    approved_document = approved.document()
    items = contract_drift(approved=approved_document, inferred=inferred, risk_rank=risk_ranks())
    result.drift = items
    if items:
        _drift_record(
            tool=tool, approved=approved, inferred=inferred, items=items, stats=stats, result=result
        )
    return result


def _labelled_tools(*, exclude: str) -> list[dict]:
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
        )
        .exclude(tool__name=exclude)
        .values_list("tool__name", "description", "risk__name", "produces", "permissions")
    ]


def _drift_record(*, tool, approved, inferred, items, stats, result: RefreshResult) -> None:
    fingerprint = drift_fingerprint(f"{tool.name}@v{approved.number}", items)
    evidence = {
        "base_version": approved.number,
        "traces_since_version": stats.traces_since_version,
        "support": inferred.get("support"),
        "drift": items,
        "inferred": {
            key: inferred.get(key)
            for key in ("requires", "produces", "risk", "input_schema", "cost")
        },
    }
    with transaction.atomic():
        report, created = _report_get_or_create(tool, approved, fingerprint, items, evidence)
        if not created:
            DriftReport.objects.filter(pk=report.pk).update(
                evidence=evidence, updated_at=timezone.now()
            )
    risk = approved.risk
    if not (risk.ticket_on_drift or risk.auto_approve_inferred):
        return
    proposal = _proposal(apply_drift(approved.document(), inferred, items), evidence)
    with transaction.atomic():
        ticket = ReviewTicket.objects.select_for_update().filter(fingerprint=fingerprint).first()
        if ticket is None:
            try:
                with transaction.atomic():
                    ticket = contract_propose(
                        document=proposal,
                        author=None,
                        source=ContractVersion.Source.INFERRED,
                        evidence=evidence,
                        fingerprint=fingerprint,
                        kind=ReviewTicket.Kind.DRIFT,
                    )
            except IntegrityError:
                # Another worker opened it between our read and our insert: same drift, one ticket.
                ticket = ReviewTicket.objects.get(fingerprint=fingerprint)
            except ContractInvalid as exc:
                logger.warning("drift proposal for %s is not a valid contract: %s", tool.name, exc)
                return
        elif ticket.status == ReviewTicket.Status.OPEN and ticket.evidence != evidence:
            ReviewTicket.objects.filter(pk=ticket.pk).update(evidence=evidence)
            AuditEntry.objects.create(
                action=AuditEntry.Action.DRIFT_UPDATED,
                tool=tool,
                ticket=ticket,
                version=ticket.proposed,
                before_hash=approved.content_hash,
                after_hash=ticket.proposed.content_hash,
                detail={"traces_since_version": stats.traces_since_version},
            )
        if ticket is None:
            return
        DriftReport.objects.filter(fingerprint=fingerprint).update(ticket=ticket)
        result.ticket_id = ticket.pk
        if (
            not risk.ticket_on_drift
            and ticket.status == ReviewTicket.Status.OPEN
            and inferred_change_may_auto_publish(ticket)
        ):
            contract_publish(ticket=ticket, actor=None, action=AuditEntry.Action.AUTO_PUBLISHED)
            DriftReport.objects.filter(fingerprint=fingerprint).update(auto_published=True)
            result.published = True


def _report_get_or_create(tool, approved, fingerprint, items, evidence):
    try:
        with transaction.atomic():
            return DriftReport.objects.get_or_create(
                fingerprint=fingerprint,
                defaults={"tool": tool, "base": approved, "items": items, "evidence": evidence},
            )
    except IntegrityError:
        return DriftReport.objects.get(fingerprint=fingerprint), False


def _proposal(document: dict, evidence: dict) -> dict:
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
    return {key: value for key, value in document.items() if key in _DOCUMENT_KEYS}


_DOCUMENT_KEYS = {
    "name", "description", "input_schema", "output_schema", "requires", "produces", "effects",
    "risk", "cost", "permissions", "invariants", "config_params", "dependencies",
    "resource_limits", "status",
}  # fmt: skip


def traces_prune(*, older_than: timedelta | None = None, chunk: int = 10_000) -> int:
    """Delete folded traces past retention; what inference needs lives on in ToolStats."""
    cutoff = timezone.now() - (older_than or settings.TRACE_RETENTION)
    deleted = 0
    while True:
        ids = list(
            Trace.objects.filter(aggregated=True, occurred_at__lt=cutoff).values_list(
                "pk", flat=True
            )[:chunk]
        )
        if not ids:
            return deleted
        deleted += Trace.objects.filter(pk__in=ids).delete()[0]
