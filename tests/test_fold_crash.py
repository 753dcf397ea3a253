"""A fold killed mid-way loses nothing: a real worker on PostgreSQL and Redis is killed with
SIGKILL (``kill -9``) while it holds a claim of unfolded traces, and the next worker folds every
trace exactly once, into the statistics a clean fold of the same traces gives.

The worker is stopped mid-fold by a lock the test holds: the tool's statistics row, which the
fold locks after it has claimed its traces and found their data flow.
"""

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from config.celery_app import app as celery_app
from learning.aggregates import new_aggregate
from learning.fold import traces_fold_pending
from learning.models import ToolDayStats, ToolStats, Trace
from learning.tasks import refresh_contracts
from reviews.services import registry_import
from tests.helpers import contract, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="a claim held across processes: PostgreSQL"
    ),
]
TOOLS = ("calendar.get_event", "calendar.find_events")


def calls(count: int) -> list[dict]:
    return [
        {"trace_id": f"run-{n // 4}", "step": n % 4, "tool": TOOLS[n % 2],
         "status": "error" if n % 7 == 0 else "success",
         "args": {"event_id": f"evt_{n // 4}", "note": f"n{n}"},
         "state_before": {"event_id": f"evt_{n // 4}"},
         "state_after": {"event_id": f"evt_{n // 4}", "event_details": f"details {n}"},
         "output": {"event_details": f"details {n}"}, "duration_ms": 10 + n % 50,
         "occurred_at": timezone.now().isoformat()}
        for n in range(count)
    ]  # fmt: skip


def statistics() -> dict:
    """What the fold wrote: each tool's counts and aggregates, and its days."""
    stats = {
        row.tool_name: (row.traces_total, row.traces_since_version, row.aggregate,
                        row.aggregate_since_version)
        for row in ToolStats.objects.all()
    }  # fmt: skip
    days = sorted(
        ToolDayStats.objects.values_list("tool_name", "day", "calls", "errors", "durations")
    )
    return {"stats": stats, "days": days}


def others_in_a_transaction(lock: psycopg.Connection) -> list[tuple]:
    """The backends of the test database inside a transaction, but this test's and the one
    holding the lock, with what they wait on (read on this test's connection: a transaction,
    like the lock's, would read one snapshot of the activity throughout)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, wait_event_type FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid NOT IN (pg_backend_pid(), %s) AND xact_start IS NOT NULL",
            [lock.info.backend_pid],
        )
        return cursor.fetchall()


@pytest.mark.slow  # two real workers, 2,000 traces: about a minute (`make test-slow`)
def test_a_fold_killed_mid_way_loses_nothing_and_the_next_worker_folds_each_trace_once(
    vocabulary, start_worker, runtime_client_factory
):
    registry_import(
        data=[contract(name, requires=["event_id"], produces=["event_details"]) for name in TOOLS],
        approve=True,
    )
    client = runtime_client_factory("assistant")
    # Messages earlier tests left in the broker would keep the worker busy before the fold.
    celery_app.control.purge()
    sent = calls(2000)
    for start in range(0, len(sent), 1000):
        response = client.post("/api/v1/traces/", sent[start : start + 1000], format="json")
        assert response.status_code == 200 and response.json()["accepted"] == 1000
    # Stored and answered; the fold each commit queued waits for a worker.
    assert Trace.objects.filter(aggregated=False).count() == 2000
    stored_flows = dict(Trace.objects.values_list("pk", "dataflow"))
    assert all(stored_flows.values())  # found at ingest, kept until folded
    ToolStats.objects.create(
        tool_name=TOOLS[0], aggregate=new_aggregate(), aggregate_since_version=new_aggregate()
    )

    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
        password=settings["PASSWORD"] or None, dbname=settings["NAME"],
    ) as lock:  # fmt: skip
        lock.execute(
            "SELECT id FROM learning_toolstats WHERE tool_name = %s FOR UPDATE", [TOOLS[0]]
        )
        first = start_worker()
        # The worker has claimed the traces and waits for the statistics row: mid-fold.
        assert wait_for(
            lambda: any(wait == "Lock" for _, wait in others_in_a_transaction(lock)), timeout=60
        ), "the worker never reached the fold"
        first.kill()  # SIGKILL: no clean-up, no acknowledgement
        first.wait(20)
        lock.rollback()
        # Its backend notices the lost client once the lock is free, and rolls back.
        assert wait_for(lambda: not others_in_a_transaction(lock), timeout=30)

    assert Trace.objects.filter(aggregated=False).count() == 2000  # nothing lost or half-folded
    assert ToolStats.objects.get(tool_name=TOOLS[0]).traces_total == 0
    assert not ToolDayStats.objects.exists()

    start_worker()
    refresh_contracts.delay()  # the hourly sweep queues a fold, and refreshes what it folds
    assert wait_for(lambda: not Trace.objects.filter(aggregated=False).exists(), timeout=90)
    assert wait_for(lambda: not ToolStats.objects.filter(dirty=True).exists(), timeout=90)
    recovered = statistics()
    per_tool = {name: sum(1 for call in sent if call["tool"] == name) for name in TOOLS}
    assert {name: row[0] for name, row in recovered["stats"].items()} == per_tool
    assert {name: row[2]["total"] for name, row in recovered["stats"].items()} == per_tool
    assert sum(day[2] for day in recovered["days"]) == 2000

    # A clean fold of the same stored traces, in this process, writes the same statistics.
    ToolStats.objects.all().delete()
    ToolDayStats.objects.all().delete()
    for pk, flow in stored_flows.items():
        Trace.objects.filter(pk=pk).update(aggregated=False, dataflow=flow)
    ToolStats.objects.create(
        tool_name=TOOLS[0], aggregate=new_aggregate(), aggregate_since_version=new_aggregate()
    )
    assert sum(traces_fold_pending().values()) == 2000
    assert statistics() == recovered
