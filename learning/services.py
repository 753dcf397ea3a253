"""Writes of the learning capability: ingest traces, fold them, infer, judge drift, prune.

Ingest stores a batch and, in the same transaction, folds the traces it actually inserted into
each tool's aggregates: it claims them (``aggregated = false``) with ``FOR UPDATE SKIP LOCKED``,
merges one delta per tool under the tool's stats row lock (taken in name order, so two ingests
never deadlock) and marks them folded. A duplicate that lost an insert race is never folded
twice and a trace is never lost. A refresh then reads aggregates only: O(tools with new
traces), never a rescan of traces.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import islice

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from registry.models import ContractVersion, Tool
from registry.selectors import alias_map, registry_context, risk_ranks
from registry.validation import KNOWN_KEYS, ContractInvalid
from reviews.models import AuditEntry, ReviewTicket
from reviews.services import contract_propose, contract_publish, inferred_change_may_auto_publish

from .aggregates import aggregate_add, aggregate_merge, new_aggregate
from .inference import (
    apply_drift,
    contract_drift,
    drift_fingerprint,
    infer_contract,
    prepare_labels,
    suggest_risk,
)
from .models import DriftReport, InferredContract, ToolStats, Trace
from .traces import trace_parse

logger = logging.getLogger(__name__)
FOLD_BATCH = 5000
REFRESH_CHUNK = 500
TRACE_FIELDS = ["trace_id", "step", "status", "args", "state_before", "state_after", "duration_ms"]
DOCUMENT_KEYS = KNOWN_KEYS - {"version"}  # what a proposal may hold


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
    application_id = application.pk if application else None
    while batch := list(islice(iterator, batch_size)):
        rows: dict[tuple[str, int], dict] = {}
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
            rows[key] = {
                **trace,
                "tool_name": trace["tool"],
                "tool_id": tools.get(trace["tool"]),
                "unknown_tool": trace["tool"] not in tools,
                "error": trace["error"] or "",
                "application_id": application_id,
            }
        if not rows:
            continue
        with transaction.atomic():
            # Either way, exactly the rows this transaction stored come back, to be folded once;
            # a (trace_id, step) stored before, or by a concurrent writer, is a duplicate.
            if connection.vendor == "postgresql":
                stored = _insert_returning(list(rows.values()))
            else:
                Trace.objects.bulk_create(
                    [Trace(**_model_fields(row)) for row in rows.values()], ignore_conflicts=True
                )
                stored = _claim_inserted(rows)
            by_tool: dict[str, list[dict]] = {}
            for row in stored:
                by_tool.setdefault(row["tool_name"], []).append(row)
            _fold(by_tool, received_at=None)
        result.accepted += len(stored)
        result.duplicates += len(rows) - len(stored)
    return result


def _model_fields(row: dict) -> dict:
    return {column: row[column] for column in TRACE_COLUMNS if column in row}


def _claim_inserted(rows: dict[tuple[str, int], dict]) -> list[dict]:
    """SQLite: the batch's rows still unfolded are the ones this transaction inserted."""
    claimed = Trace.objects.select_for_update(skip_locked=True).filter(
        aggregated=False, trace_id__in={key[0] for key in rows}
    )
    ids = {
        (trace_id, step): pk for pk, trace_id, step in claimed.values_list("pk", "trace_id", "step")
    }
    ids = {key: pk for key, pk in ids.items() if key in rows}
    Trace.objects.filter(pk__in=ids.values()).update(aggregated=True)
    return [rows[key] for key in ids]


TRACE_COLUMNS = [
    "trace_id", "step", "tool_name", "tool_id", "unknown_tool", "args", "status", "state_before",
    "state_after", "output", "error", "duration_ms", "occurred_at", "received_at",
    "application_id", "aggregated",
]  # fmt: skip
JSON_COLUMNS = {"args", "state_before", "state_after", "output"}


def _copy_value(row: dict, column: str):
    value = row.get(column)
    if value is None:
        return None
    return json.dumps(value) if column in JSON_COLUMNS else value


def _insert_returning(rows: list[dict]) -> list[dict]:
    """PostgreSQL: COPY the batch into a temporary table, then INSERT ... ON CONFLICT DO NOTHING
    RETURNING: exactly the rows this transaction stored come back.

    They are stored already marked as folded: the fold happens in this same transaction.
    """
    now = timezone.now()
    columns = ", ".join(TRACE_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS learning_trace_incoming "
            f"AS SELECT {columns} FROM learning_trace WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY learning_trace_incoming ({columns}) FROM STDIN") as copy:
            for row in rows:
                row["received_at"], row["aggregated"] = now, True
                copy.write_row([_copy_value(row, column) for column in TRACE_COLUMNS])
        cursor.execute(
            f"INSERT INTO learning_trace ({columns}) SELECT {columns} "
            "FROM learning_trace_incoming ON CONFLICT (trace_id, step) DO NOTHING "
            "RETURNING trace_id, step"
        )
        stored = set(cursor.fetchall())
        cursor.execute("DELETE FROM learning_trace_incoming")
    return [row for row in rows if (row["trace_id"], row["step"]) in stored]


def tool_fold(*, tool_name: str) -> int:
    """Fold traces still pending (an ingest interrupted mid-way); return how many."""
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
            _fold({tool_name: claimed}, received_at="received_at")
            Trace.objects.filter(pk__in=[trace["id"] for trace in claimed]).update(aggregated=True)
            folded += len(claimed)


def _fold(by_tool: dict[str, list[dict]], *, received_at: str | None) -> None:
    """Merge one delta per tool into its stats, all rows locked and written in a few queries.

    ``received_at`` names the key holding when each trace arrived; None means "just now", which
    is after the current version's approval by construction.
    """
    for stats in (rows := _stats_locked(sorted(by_tool))):
        since = stats.since_version
        traces = by_tool[stats.tool_name]
        delta_all, delta_since, since_count = new_aggregate(), new_aggregate(), 0
        for trace in traces:
            aggregate_add(delta_all, trace)
            # Drift is judged only on what the tool did after its current version was approved;
            # a trace received just now always is (so the same delta serves both, below).
            if (
                since is not None
                and received_at is not None
                and since.approved_at
                and (trace[received_at] >= since.approved_at)
            ):
                aggregate_add(delta_since, trace)
                since_count += 1
        if since is not None and received_at is None:
            delta_since, since_count = delta_all, len(traces)
        aggregate_merge(stats.aggregate, delta_all)
        aggregate_merge(stats.aggregate_since_version, delta_since)
        stats.traces_total += len(traces)
        stats.traces_since_version += since_count
        stats.dirty = True
    _stats_write(rows)


def _stats_write(rows: list[ToolStats]) -> None:
    """Write locked stats rows back: one UPDATE ... FROM (VALUES ...) on PostgreSQL, where
    Django's bulk_update would build a CASE per field and row."""
    if connection.vendor != "postgresql":
        ToolStats.objects.bulk_update(rows, STATS_FIELDS, batch_size=200)
        return
    now = timezone.now()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
            params = []
            for stats in chunk:
                params += [
                    stats.pk, stats.tool_id, stats.since_version_id,
                    json.dumps(stats.aggregate), json.dumps(stats.aggregate_since_version),
                    stats.traces_total, stats.traces_since_version,
                ]  # fmt: skip
            cursor.execute(
                "UPDATE learning_toolstats AS s SET tool_id = v.tool_id::bigint, "
                "since_version_id = v.since_version_id::bigint, "
                "aggregate = v.aggregate::jsonb, aggregate_since_version = v.since::jsonb, "
                "traces_total = v.total::bigint, traces_since_version = v.since_total::bigint, "
                "dirty = true, updated_at = %s "
                f"FROM (VALUES {values}) AS v(id, tool_id, since_version_id, aggregate, since, "
                "total, since_total) WHERE s.id = v.id::bigint",
                [now, *params],
            )


STATS_FIELDS = [
    "tool", "since_version", "aggregate", "aggregate_since_version", "traces_total",
    "traces_since_version", "dirty",
]  # fmt: skip


def _stats_locked(tool_names: list[str]) -> list[ToolStats]:
    """The stats rows of these tools, created if missing and locked in name order.

    Locking in one order means two ingests touching the same tools wait, never deadlock. A row
    whose tool has a new approved version starts its since-version aggregate afresh.
    """
    ToolStats.objects.bulk_create(
        [
            ToolStats(
                tool_name=name, aggregate=new_aggregate(), aggregate_since_version=new_aggregate()
            )
            for name in tool_names
        ],
        ignore_conflicts=True,
    )
    tools = {
        tool.name: tool
        for tool in Tool.objects.filter(name__in=tool_names).select_related("current_version")
    }
    rows = list(
        ToolStats.objects.select_for_update(of=("self",))
        .select_related("since_version")
        .filter(tool_name__in=tool_names)
        .order_by("tool_name")
    )
    for stats in rows:
        tool = tools.get(stats.tool_name)
        current = tool.current_version if tool else None
        if stats.tool_id != (tool.pk if tool else None) or stats.since_version_id != (
            current.pk if current else None
        ):
            stats.tool = tool
            stats.since_version = current
            stats.aggregate_since_version = new_aggregate()
            stats.traces_since_version = 0
        stats.aggregate = stats.aggregate or new_aggregate()
    return rows


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
                _stats_write(_stats_locked(stale_names))
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
            approved = tool.current_version if tool else None
            if approved is not None:
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
            inferred_rows.append(
                InferredContract(
                    tool_name=name,
                    tool=tool,
                    document=inferred,
                    support=inferred.get("support", 0),
                    confidence=inferred.get("confidence", {}),
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
                    _drift_record(tool=tool, approved=approved, inferred=inferred, stats=stats,
                                  result=result)  # fmt: skip
        InferredContract.objects.bulk_create(
            inferred_rows,
            update_conflicts=True,
            unique_fields=["tool_name"],
            update_fields=["tool", "document", "support", "confidence", "inferred_at"],
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


def _drift_record(*, tool, approved, inferred, stats, result: RefreshResult) -> None:
    items = result.drift
    # The base version is part of the fingerprint: the same drift after a new approval is new.
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
        Tool.objects.select_for_update(no_key=True).get(
            pk=tool.pk
        )  # tool first, as publishing does
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
                # Another worker opened it between our read and our insert: one drift, one ticket.
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
    return {key: value for key, value in document.items() if key in DOCUMENT_KEYS}


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
