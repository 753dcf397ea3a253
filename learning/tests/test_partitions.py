"""Traces partitioned by day (PostgreSQL, ``learning.partitions``): days created ahead and in
the past, each with its unique keys, and a populated table converted in place. Retention's
drops are tested with ``traces_prune`` (``services/test_traces_prune.py``)."""

import importlib
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, OperationalError, connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from learning import tasks
from learning.ingest import traces_ingest
from learning.models import Trace
from learning.partitions import (
    DAYS_AHEAD,
    day_partition_name,
    partitioned,
    trace_partition_create,
    trace_partitions,
)
from registry.models import Application
from tests.partitions import (
    days_ago,
    noon,
    partition_names,
    partition_of,
    postgresql_only,
    trace_at,
)

pytestmark = pytest.mark.django_db
BEFORE = ("learning", "0012_traces_folded_after_they_are_stored")


def _call(n: int, *, occurred_at: str | None) -> dict:
    item = {"trace_id": f"run-{n // 3}", "step": n % 3, "tool": "tool.x", "status": "success"}
    return item if occurred_at is None else {**item, "occurred_at": occurred_at}


@postgresql_only
def test_it_is_partitioned_with_a_default_partition():
    assert partitioned()
    partitions = trace_partitions()
    # The test database's table was empty when converted: no partition of old rows.
    assert [p.name for p in partitions if p.default] == ["learning_trace_default"]
    assert "learning_trace_legacy" not in partition_names()


@postgresql_only
def test_it_creates_the_days_ahead_once():
    created = tasks.trace_partitions_ensure()

    today = datetime.now(UTC).date()
    days = [today + timedelta(days=n) for n in range(DAYS_AHEAD + 1)]
    assert created == [day_partition_name(day) for day in days]
    assert set(created) <= set(partition_names())
    assert tasks.trace_partitions_ensure() == []  # idempotent
    tomorrow = Trace.objects.bulk_create([trace_at(0, when=noon(days[1]))])[0]
    far = Trace.objects.bulk_create([trace_at(1, when=noon(today) - timedelta(days=400))])[0]
    assert partition_of([tomorrow.pk, far.pk]) == {
        tomorrow.pk: day_partition_name(days[1]),
        far.pk: "learning_trace_default",  # no insert fails for want of a partition
    }


@postgresql_only
def test_a_past_day_created_later_takes_its_rows_from_the_default_partition():
    day = days_ago(40)
    kept = Trace.objects.bulk_create(
        [trace_at(n, when=noon(day) + timedelta(minutes=n)) for n in range(6)]
        + [trace_at(9, when=noon(day) + timedelta(days=1))]
    )

    assert trace_partition_create(day=day)

    where = partition_of(trace.pk for trace in kept)
    assert list(where.values()).count(day_partition_name(day)) == 6
    assert where[kept[-1].pk] == "learning_trace_default"
    assert Trace.objects.count() == 7
    assert not trace_partition_create(day=day)


@postgresql_only
def test_a_retried_batch_is_reported_as_duplicates_in_day_and_default_partitions():
    application = Application.objects.create(name="app")
    tasks.trace_partitions_ensure()
    sent = (timezone.now() - timedelta(minutes=5)).isoformat()
    long_ago = (timezone.now() - timedelta(days=200)).isoformat()  # the default partition
    batch = [
        *(_call(n, occurred_at=sent) for n in range(6)),
        *(_call(n, occurred_at=long_ago) for n in range(6, 9)),
        *(_call(n, occurred_at=None) for n in range(9, 12)),  # stamped on arrival
    ]

    first = traces_ingest(items=enumerate(batch), application=application)
    again = traces_ingest(items=enumerate(batch), application=application)
    imported = traces_ingest(items=enumerate(batch))  # the operator's keys are their own
    imported_again = traces_ingest(items=enumerate(batch))

    assert (first.accepted, first.duplicates) == (12, 0)
    assert (again.accepted, again.duplicates) == (0, 12)
    assert (imported.accepted, imported_again.duplicates) == (12, 12)
    assert Trace.objects.count() == 24
    assert set(partition_of(Trace.objects.values_list("pk", flat=True)).values()) == {
        day_partition_name(datetime.now(UTC).date()),
        "learning_trace_default",
    }


@postgresql_only
def test_each_partition_holds_the_unique_keys():
    application = Application.objects.create(name="app")
    tasks.trace_partitions_ensure()
    when = noon(datetime.now(UTC).date())
    Trace.objects.bulk_create([trace_at(0, when=when, application=application)])
    with pytest.raises(IntegrityError), transaction.atomic():
        later = when + timedelta(hours=1)  # the same day: the same partition
        Trace.objects.bulk_create([trace_at(0, when=later, application=application)])


@postgresql_only
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_migration_converts_a_populated_table_keeping_every_row_and_key():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("learning")
    executor.migrate([BEFORE])
    try:
        old_apps = executor.loader.project_state([BEFORE]).apps
        OldTrace = old_apps.get_model("learning", "Trace")
        OldApplication = old_apps.get_model("registry", "Application")
        application = OldApplication.objects.create(name="app", unknown_tool_names=10)
        now = timezone.now()
        rows = [
            OldTrace(
                trace_id=f"run-{n // 4}",
                step=n % 4,
                tool_name="tool.x",
                status="success",
                occurred_at=now - timedelta(hours=7 * n),
                aggregated=True,
                application_id=None if n % 3 == 0 else application.pk,
            )  # fmt: skip
            for n in range(500)
        ]
        OldTrace.objects.bulk_create(rows)
        before = sorted(OldTrace.objects.values_list("pk", "trace_id", "step", "occurred_at"))

        executor = MigrationExecutor(connection)
        executor.migrate(latest)

        assert partitioned()
        assert sorted(Trace.objects.values_list("pk", "trace_id", "step", "occurred_at")) == before
        assert {p.name for p in trace_partitions()} == {
            "learning_trace_legacy",
            "learning_trace_default",
        }
        # The old rows' keys hold, and new rows get new ids.
        duplicate = Trace(
            trace_id="run-1", step=1, tool_name="tool.x", status="success", occurred_at=now,
            application_id=application.pk,
        )  # fmt: skip
        with pytest.raises(IntegrityError), transaction.atomic():
            Trace.objects.bulk_create([duplicate])
        fresh = Trace.objects.create(
            trace_id="new", step=0, tool_name="tool.x", status="success", occurred_at=now
        )
        assert fresh.pk > max(pk for pk, *_ in before)
        # The old table's indexes were adopted, not built twice.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT tablename, count(*) FROM pg_indexes WHERE tablename IN "
                "('learning_trace', 'learning_trace_legacy') GROUP BY tablename"
            )
            counts = dict(cursor.fetchall())
            # The parent's primary key and indexes, and the two unique keys of its own.
            assert counts["learning_trace_legacy"] == counts["learning_trace"] + 2
            cursor.execute(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = "
                "'learning_trace_legacy'::regclass AND contype = 'f'"
            )
            assert cursor.fetchone()[0] == 2
        # A day of its own beside the old rows; backwards, every row is in the plain table.
        trace_partition_create(day=(now + timedelta(days=30)).date())
        Trace.objects.create(
            trace_id="later", step=0, tool_name="tool.x", status="success",
            occurred_at=now + timedelta(days=30),
        )  # fmt: skip
        kept = sorted(Trace.objects.values_list("pk", "trace_id", "step", "occurred_at"))
        executor = MigrationExecutor(connection)
        executor.migrate([BEFORE])
        assert not partitioned()
        assert sorted(OldTrace.objects.values_list("pk", "trace_id", "step", "occurred_at")) == kept
        assert OldTrace.objects.create(
            trace_id="after", step=0, tool_name="tool.x", status="success", occurred_at=now
        ).pk > max(pk for pk, *_ in kept)
    finally:
        # The empty table's layout again, for the tests after this one.
        Trace.objects.all().delete()
        executor = MigrationExecutor(connection)
        executor.migrate([BEFORE])
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("learning"))
    assert "learning_trace_legacy" not in partition_names()


@postgresql_only
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_creating_a_day_lets_traces_of_other_days_through():
    today = datetime.now(UTC).date()
    trace_partition_create(day=today)
    Trace.objects.bulk_create([trace_at(n, when=noon(days_ago(200))) for n in range(20)])  # default
    stored: list[int] = []

    def store_today() -> None:
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
            stored.append(Trace.objects.bulk_create([trace_at(99, when=noon(today))])[0].pk)
        finally:
            connections.close_all()

    with transaction.atomic():
        # The new day is attached and its transaction still open, holding its locks.
        assert trace_partition_create(day=today + timedelta(days=30))
        thread = threading.Thread(target=store_today)
        thread.start()
        thread.join(10)
    assert stored, "the insert into today's partition waited for the new day's locks"
    assert partition_of(stored) == {stored[0]: day_partition_name(today)}


@postgresql_only
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_failed_swap_leaves_the_plain_table_taking_every_trace(monkeypatch):
    migration = importlib.import_module("learning.migrations.0013_traces_partitioned_by_day")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("learning")
    executor.migrate([BEFORE])
    try:

        def swap_not_locked(cursor, bound):
            raise OperationalError("canceling statement due to lock timeout")

        monkeypatch.setattr(migration, "_swap", swap_not_locked)
        with pytest.raises(OperationalError), connection.schema_editor(atomic=False) as editor:
            migration.forwards(None, editor)

        assert not partitioned()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = 'learning_trace'::regclass"
            )
            assert migration.RANGE_CHECK not in {name for (name,) in cursor.fetchall()}
        # A trace a year ahead (past the check's bound, had it stayed) is stored.
        far = executor.loader.project_state([BEFORE]).apps.get_model("learning", "Trace")
        far.objects.create(
            trace_id="far", step=0, tool_name="tool.x", status="success",
            occurred_at=timezone.now() + timedelta(days=365),
        )  # fmt: skip
        far.objects.all().delete()
        monkeypatch.undo()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    assert partitioned()
