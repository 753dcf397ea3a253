"""The fold: traces ingest stored, added to their tools' statistics.

The fold (``traces_fold``) claims the oldest unfolded traces in large batches (``FOR UPDATE
SKIP LOCKED``: two folders never take the same trace), checks successful outputs against the
approved output contract, merges one delta per tool under the tool's stats row lock (taken in
name order, so two folders never deadlock) and marks the traces folded, all in one
transaction: a folder that dies mid-way leaves its traces unfolded for the next one, and none
is folded twice. A refresh (``learning.services``) then reads aggregates only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from registry.models import Application, ContractVersion, Tool

from .aggregates import aggregate_add, aggregate_effects_add, aggregate_merge, new_aggregate
from .baselines import baseline_snapshot
from .candidates import Candidate, candidate_variables_count
from .days import days_fold
from .ingest import TRACE_FIELDS, states_read_whole
from .models import ToolStats, Trace
from .outputs import output_batch_budget, output_checker
from .shapes import Aggregate
from .signals import tool_stats_changed

logger = logging.getLogger(__name__)
# Traces one fold transaction claims: a tool's statistics row is read and written once per batch,
# so a larger batch costs less per trace (and holds as much memory as an ingest batch).
FOLD_BATCH = 20_000


@dataclass
class FoldResult:
    claimed: dict[str, int] = field(default_factory=dict)  # traces per tool name
    changed: list[str] = field(default_factory=list)  # tools whose statistics moved

    @property
    def total(self) -> int:
        return sum(self.claimed.values())


def traces_fold(
    *,
    tool_names: Collection[str] | None = None,
    limit: int = FOLD_BATCH,
    refreshing: Collection[str] = (),
) -> FoldResult:
    """Fold at most ``limit`` unfolded traces, the oldest first (only ``tool_names``' when
    given), into their tools' statistics, in one transaction.

    The traces are claimed with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so concurrent folders
    take different traces and ingest is never waited for; SQLite has one writer at a time. A
    trace is folded by the transaction that marks it folded: if the folder dies, both roll back
    and the next fold takes it. Once the fold commits, ``tool_stats_changed`` is sent with the
    tools whose statistics moved (their refreshes are scheduled together), but those named in
    ``refreshing``: the caller refreshes them next.
    """
    result = FoldResult()
    with transaction.atomic():
        claimed = Trace.objects.select_for_update(skip_locked=True).filter(aggregated=False)
        if tool_names is not None:
            claimed = claimed.filter(tool_name__in=tool_names)
        rows = list(claimed.order_by("id").values(*FOLD_FIELDS)[:limit])
        if not rows:
            return result
        for row in rows:
            result.claimed[row["tool_name"]] = result.claimed.get(row["tool_name"], 0) + 1
            row["uncaptured"] = not row["captured"]
        approved = set(
            Tool.objects.filter(name__in=result.claimed, current_version__isnull=False).values_list(
                "name", flat=True
            )
        )
        states_read_whole(rows)
        late: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {}
        found: dict[int, list[Candidate]] = {}
        for row in rows:
            flow = row.pop("dataflow") or {}
            if flow:
                # Stored by ingest; a trace stored without it is read alone (aggregate_add).
                row["dataflow"] = {key: flow[key] for key in ("present", "flows", "effects")}
                row["dataflow"]["new_paths"] = flow.get("new_paths", [])  # none stored before
            for tool, effects in flow.get("revealed", ()):
                late.setdefault(tool, []).append((row["trace_id"], effects))
            if row["application_id"] is not None:
                found.setdefault(row["application_id"], []).extend(
                    (row["step"], tool, name, example, variable)
                    for tool, name, example, variable in flow.get("candidates", ())
                )
        applications = Application.objects.in_bulk([key for key, value in found.items() if value])
        for application_id in sorted(applications):  # their rows locked in one order: no deadlock
            candidate_variables_count(
                application=applications[application_id], found=found[application_id]
            )
        by_tool: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if _foldable(row, approved=approved):
                by_tool.setdefault(row["tool_name"], []).append(row)
        _fold(by_tool, received_at="received_at", late=late)
        ids = [row["id"] for row in rows]
        for start in range(0, len(ids), MARK_CHUNK):
            # What the fold needed of the data flow is in the statistics now. Unfolded (as the
            # claimed rows are): on a partitioned table the ids are looked up in each day's
            # small index of unfolded traces, not in every day's primary key.
            Trace.objects.filter(pk__in=ids[start : start + MARK_CHUNK], aggregated=False).update(
                aggregated=True, dataflow=None
            )
        result.changed = sorted({*by_tool, *late})
        announced = sorted(set(result.changed) - set(refreshing))
        if announced:
            transaction.on_commit(partial(tool_stats_changed.send, None, tool_names=announced))
    return result


def traces_fold_pending(
    *, tool_names: Collection[str] | None = None, refreshing: Collection[str] = ()
) -> dict[str, int]:
    """Fold batch after batch until no trace (of ``tool_names``) is left unfolded; return how
    many traces of each tool were folded."""
    folded: dict[str, int] = {}
    while (result := traces_fold(tool_names=tool_names, refreshing=refreshing)).total:
        for name, count in result.claimed.items():
            folded[name] = folded.get(name, 0) + count
    return folded


def _foldable(row: dict[str, Any], *, approved: set[str]) -> bool:
    """A trace is folded into its tool's learning unless the tool has an approved contract and
    the application that sent it could not see the tool: then it is kept like a trace of an
    unknown name. A name with no approved version (a shadow tool, perhaps proposed already) is
    folded like an unknown one."""
    return not (row["unknown_tool"] and row["tool_name"] in approved)


MARK_CHUNK = 5000
FOLD_FIELDS = [
    "id", "unknown_tool", "captured", "received_at", "dataflow", *TRACE_FIELDS,
]  # fmt: skip


def _fold(
    by_tool: dict[str, list[dict[str, Any]]],
    *,
    received_at: str | None,
    late: dict[str, list[tuple[str, list[tuple[str, str]]]]] | None = None,
) -> None:
    """Merge one delta per tool into its stats, all rows locked and written in a few queries.

    ``received_at`` names the key holding when each trace arrived; None means "just now", which
    is after the current version's approval by construction.
    """
    learnt = {
        name: kept
        for name, traces in by_tool.items()
        if (kept := [trace for trace in traces if not trace.get("uncaptured")])
    }
    late = late or {}
    # One lock, in name order, for the tools folded and those whose earlier calls' effects
    # were revealed: two ingests never deadlock.
    rows = stats_locked(sorted({*learnt, *late}))
    with output_batch_budget():
        _fold_into(rows, learnt, received_at=received_at)
    for stats in rows:
        for trace_id, effects in late.get(stats.tool_name, ()):
            aggregate_effects_add(stats.aggregate, effects, trace_id)
            if stats.since_version_id is not None:
                aggregate_effects_add(stats.aggregate_since_version, effects, trace_id)
            stats.dirty = True
    stats_write(rows)
    tool_ids: dict[str, int | None] = dict(
        Tool.objects.filter(name__in=by_tool.keys() - learnt.keys()).values_list("name", "pk")
    )
    days_fold(by_tool, tool_ids | {stats.tool_name: stats.tool_id for stats in rows})


def _fold_into(
    rows: list[ToolStats], by_tool: dict[str, list[dict[str, Any]]], *, received_at: str | None
) -> None:
    for stats in rows:
        since = stats.since_version
        traces = by_tool.get(stats.tool_name, [])
        delta_all, delta_since, since_count = new_aggregate(), new_aggregate(), 0
        check = output_check_for(since)
        for trace in traces:
            # Drift is judged only on what the tool did after its current version was approved;
            # a trace received just now always is (so the same delta serves both, below).
            after_approval = since is not None and (
                received_at is None
                or bool(since.approved_at and trace[received_at] >= since.approved_at)
            )
            if check is not None and after_approval:
                check(trace)
            aggregate_add(delta_all, trace)
            if after_approval and received_at is not None:
                aggregate_add(delta_since, trace)
                since_count += 1
        if since is not None and received_at is None:
            delta_since, since_count = delta_all, len(traces)
        aggregate_merge(stats.aggregate, delta_all)
        aggregate_merge(stats.aggregate_since_version, delta_since)
        stats.traces_total += len(traces)
        stats.traces_since_version += since_count
        stats.dirty = True


def output_check_for(version: ContractVersion | None) -> Callable[[dict[str, Any]], None] | None:
    """Checks a successful trace's output against ``version``'s output contract (its
    ``output_schema`` and ``produces``) and leaves the result on the trace as ``output_check``,
    for the aggregates to count by failing path; None when the version promises nothing."""
    if version is None:
        return None
    checker = output_checker(schema=version.output_schema, produces=version.produces)
    if checker is None:
        return None

    def check(trace: dict[str, Any]) -> None:
        if trace.get("status") == "success":
            trace["output_check"] = checker(trace.get("output"), trace.get("state_after") or {})

    return check


def stats_write(rows: list[ToolStats]) -> None:
    """Write locked stats rows back: one UPDATE ... FROM (VALUES ...) on PostgreSQL, where
    Django's bulk_update would build a CASE per field and row."""
    if connection.vendor != "postgresql":
        for stats in rows:  # locked by stats_locked: no other writer between read and write
            stats.changes += 1
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
                "dirty = true, changes = s.changes + 1, updated_at = %s "
                f"FROM (VALUES {values}) AS v(id, tool_id, since_version_id, aggregate, since, "
                "total, since_total) WHERE s.id = v.id::bigint",
                [now, *params],
            )


STATS_FIELDS = [
    "tool", "since_version", "aggregate", "aggregate_since_version", "traces_total",
    "traces_since_version", "dirty", "changes",
]  # fmt: skip


def stats_locked(tool_names: list[str]) -> list[ToolStats]:
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
            stats.aggregate = stats.aggregate or new_aggregate()
            stats.aggregate_since_version = since_version_aggregate(stats.aggregate, current)
            stats.traces_since_version = 0
        stats.aggregate = stats.aggregate or new_aggregate()
    return rows


def since_version_aggregate(before: Aggregate, version: ContractVersion | None) -> Aggregate:
    """A fresh since-version aggregate holding the baseline of what came before ``version``: the
    error and duration counts of every trace folded before it was published (what
    ``learning/baselines.py`` compares against when the contract declares no cost)."""
    fresh = new_aggregate()
    fresh["baseline"] = baseline_snapshot(before, version=version.number if version else None)
    return fresh
