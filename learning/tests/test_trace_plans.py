"""The trace table's reads that people and refreshes make are served by its indexes.

On PostgreSQL, with enough traces (spread over tools, applications, days, a few errors and
unregistered names) and fresh statistics (``ANALYZE``) that the planner costs a sequential scan
honestly: every query the admin's trace list runs, for each filter it offers and its search,
and drift evidence's lookup of example runs, is planned without a ``Seq Scan on
learning_trace``. No ``enable_seqscan = off``: the plans are the ones production gets for
these statistics, so an index that did not fit a filter would show as a scan here.

Twice: with the traces in the default partition, and spread over day partitions
(``learning.partitions``), where a filter by day reads its day's partition alone and an empty
partition's scan (today's, the days ahead) is free.
"""

import re
from datetime import date, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from learning.admin import CappedCountPaginator
from learning.models import ToolDayStats, Trace
from learning.partitions import day_partition_name, trace_partition_create, trace_partitions
from learning.services import _drift_items_supported
from registry.models import Application, Tool

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (CI)"),
]

TRACES = 12_000
TOOLS = 200
APPLICATIONS = 60


@pytest.fixture(params=["default partition", "day partitions"])
def traces(db, request) -> list[Application]:
    """The traces, in the default partition (the days not created), or each in its day's
    partition (as ingest stores them once the days are created ahead)."""
    applications = [Application.objects.create(name=f"app-{n}") for n in range(APPLICATIONS)]
    for n in range(TOOLS):  # the tool filter offers registered tools
        Tool.objects.create(name=f"tool.{n}")
    now = timezone.now()
    newest, spacing = now, timedelta(minutes=7)
    if request.param == "day partitions":
        # Three days of a few thousand traces each, the oldest first at midnight: partitions
        # of a handful of pages would be read whole, rightly, and say nothing of the indexes.
        oldest = (now - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
        spacing = timedelta(seconds=20)
        newest = oldest + spacing * (TRACES - 1)
        for days in range(4):
            trace_partition_create(day=oldest.date() + timedelta(days=days))
    # The day filter offers the days the per-day statistics have.
    ToolDayStats.objects.create(tool_name="tool.7", day=(now - timedelta(days=3)).date(), calls=1)
    Trace.objects.bulk_create(
        Trace(
            trace_id=f"run-{n // 4}",
            step=n % 4,
            tool_name=f"tool.{n % TOOLS}",
            unknown_tool=n % 20 == 0,
            status=Trace.Status.ERROR if n % 37 == 0 else Trace.Status.SUCCESS,
            args={"n": n},
            occurred_at=newest - spacing * n,
            application=None if n % 50 < 4 else applications[(n // 4) % APPLICATIONS],
            aggregated=True,
        )
        for n in range(TRACES)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE learning_trace")
    return applications


def _trace_plans(queries: list[dict]) -> dict[str, str]:
    """Each query's plan; on a partitioned table, a partition's index is named after the
    table's index it belongs to (``learning_trace_default_tool_name_id_idx (trace_tool_idx)``)
    and a partition's scan reads ``Seq Scan on learning_trace_...``."""
    plans = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind = 'i'"
        )
        parents = dict(cursor.fetchall())
        # Each partition's own unique keys are the model's, within it (``learning.partitions``).
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'i' AND relname LIKE 'learning_trace%%' "
            "AND (relname LIKE '%%_app_step' OR relname LIKE '%%_operator_step')"
        )
        for (name,) in cursor.fetchall():
            parents[name] = (
                "unique_trace_step_per_application"
                if name.endswith("_app_step")
                else "unique_operator_trace_step"
            )
        for query in queries:
            if '"learning_trace"' not in query["sql"]:
                continue
            cursor.execute("EXPLAIN " + query["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            plans[query["sql"]] = re.sub(
                r"\b(\w+)\b",
                lambda m: f"{m[1]} ({parents[m[1]]})" if m[1] in parents else m[1],
                plan,
            )
    return plans


def _scanned(plan: str) -> set[str]:
    """The trace table, or its partitions holding traces, that ``plan`` reads sequentially (an
    empty partition, today's or one ahead, costs nothing to scan and is not counted)."""
    scanned = set(re.findall(r"Seq Scan on (learning_trace\w*)", plan))
    if not scanned:
        return scanned
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM learning_trace")
        holding = {name for (name,) in cursor.fetchall()} | {"learning_trace"}
    return scanned & holding


def _list_filters(applications: list[Application]) -> dict[str, tuple[str, ...]]:
    """Each filter of the list (and its search), with the indexes every query it runs must
    read: the ones made for it, where the filter alone picks few rows."""
    day = (timezone.now() - timedelta(days=3)).date().isoformat()
    application = applications[3].pk
    return {
        "": (),
        "tool_name=tool.7": ("trace_tool_idx",),
        f"day={day}": ("trace_occurred_idx",),
        f"day={day}&tool_name=tool.7": (),
        "status__exact=error": ("trace_error_idx",),
        "status__exact=success": (),
        "unknown_tool__exact=1": (),
        "unknown_tool__exact=0": (),
        # On partitions, the planner may read a partition's unique key, which leads with the
        # application as well.
        f"application__id__exact={application}": (
            "trace_application_idx|unique_trace_step_per_application",
        ),
        f"application__id__exact={application}&tool_name=tool.3": (),
        "application__isnull=True": (),
        "q=tool.7": ("trace_run_idx", "trace_tool_idx"),
        "q=run-12": ("trace_run_idx", "trace_tool_idx"),
        f"trace_id=run-15&application__id__exact={applications[15].pk}": (),
        "trace_id=run-15": ("trace_run_idx",),
        "p=3": (),
    }


def test_the_trace_list_reads_by_index_for_every_filter_and_search(traces, admin_client):
    days = {p.name for p in trace_partitions() if not p.default}
    for query, indexes in _list_filters(traces).items():
        with CaptureQueriesContext(connection) as captured:
            answer = admin_client.get(f"/admin/learning/trace/?{query}")
        assert answer.status_code == 200, query
        if query and not query.startswith("p="):  # the filter was applied
            assert answer.context["cl"].result_count < TRACES, query
        plans = _trace_plans(captured.captured_queries)
        assert plans, query
        for sql, plan in plans.items():
            if days and query.startswith("day="):
                # Filtered by day, on day partitions: that day's partition alone is read,
                # however (every row of it is the filter's).
                day = date.fromisoformat(query.split("&")[0].removeprefix("day="))
                read = {name for name in days if re.search(rf"\b{name}\b", plan)}
                assert read == {day_partition_name(day)}, f"{query}\n{sql}\n{plan}"
                continue
            assert not _scanned(plan), f"{query}\n{sql}\n{plan}"
            assert all(any(name in plan for name in index.split("|")) for index in indexes), (
                f"{query}\n{sql}\n{plan}"
            )
            # No count of every row the filter chose: a count reads a limited subquery.
            if "COUNT(" in sql.upper():
                assert "LIMIT" in sql.upper(), f"{query}\n{sql}"


def test_the_trace_list_counts_no_further_than_its_cap(traces, admin_client, monkeypatch):
    monkeypatch.setattr(CappedCountPaginator, "CAP", 1_000)
    answer = admin_client.get("/admin/learning/trace/")
    assert answer.context["cl"].result_count == 1_000
    answer = admin_client.get("/admin/learning/trace/?tool_name=tool.7")
    assert answer.context["cl"].result_count == TRACES // TOOLS
    assert all(trace.tool_name == "tool.7" for trace in answer.context["cl"].result_list)


def test_drift_evidence_finds_its_example_runs_by_index(traces):
    items = [{"field": "produces", "added": ["event_details"]}]
    aggregate = {"variables": {"event_details": {"examples": ["run-2", "run-52"]}}}
    with CaptureQueriesContext(connection) as captured:
        [item] = _drift_items_supported("tool.8", items, aggregate)
    assert [run["trace_id"] for run in item["example_runs"]] == ["run-2", "run-52"]
    plans = _trace_plans(captured.captured_queries)
    assert len(plans) == 1
    for sql, plan in plans.items():
        assert not _scanned(plan), f"{sql}\n{plan}"
        assert "trace_run_idx" in plan, plan


def test_the_folds_claim_reads_only_the_backlog(traces):
    """The fold claims the oldest unfolded traces (and a refresh a tool's) from the partial
    indexes of the backlog, never by scanning the folded traces."""
    from learning.fold import traces_fold

    for tool_names in (None, ["tool.7", "tool.8"]):
        newest = Trace.objects.order_by("-pk").values("pk")[:300]
        Trace.objects.filter(pk__in=newest).update(aggregated=False)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE learning_trace")
        with CaptureQueriesContext(connection) as captured:
            assert traces_fold(tool_names=tool_names).total
        claim = next(q for q in captured.captured_queries if "SKIP LOCKED" in q["sql"])
        plan = _trace_plans([claim])[claim["sql"]]
        assert not _scanned(plan), plan
        assert "trace_unfolded_idx" in plan or "trace_pending_idx" in plan, plan
