"""Traces partitioned by day (PostgreSQL): created ahead, dropped whole by retention, and a
populated table converted in place; pruning without partitions (SQLite, and the rows outside
the days' partitions) still deletes in chunks."""

import threading
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, connections, transaction
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
from learning.services import traces_prune
from registry.models import Application

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="Partitions are PostgreSQL's (CI)"
)
BEFORE = ("learning", "0012_traces_folded_after_they_are_stored")


def _trace(
    n: int, *, when: datetime, application: Application | None = None, aggregated: bool = True
) -> Trace:
    return Trace(
        trace_id=f"run-{n // 4}",
        step=n % 4,
        tool_name=f"tool.{n % 5}",
        status="success",
        occurred_at=when,
        application=application,
        aggregated=aggregated,
    )


def _where(pks) -> dict[int, str]:
    """The partition each trace is stored in."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, tableoid::regclass::text FROM learning_trace WHERE id = ANY(%s)",
            [list(pks)],
        )
        return dict(cursor.fetchall())


def _names() -> list[str]:
    return [partition.name for partition in trace_partitions()]


def _call(n: int, *, occurred_at: str | None) -> dict:
    item = {"trace_id": f"run-{n // 3}", "step": n % 3, "tool": "tool.x", "status": "success"}
    return item if occurred_at is None else {**item, "occurred_at": occurred_at}


def _committed() -> None:
    """Check the foreign keys of the rows this test inserted now: a table with checks still
    pending (deferred to a commit the test never makes) cannot be dropped."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _day(days_ago: int) -> date:
    return (timezone.now() - timedelta(days=days_ago)).date()


def _noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


@postgresql_only
def test_it_is_partitioned_with_a_default_partition():
    assert partitioned()
    partitions = trace_partitions()
    # The test database's table was empty when converted: no partition of old rows.
    assert [p.name for p in partitions if p.default] == ["learning_trace_default"]
    assert "learning_trace_legacy" not in _names()


@postgresql_only
def test_it_creates_the_days_ahead_once():
    created = tasks.trace_partitions_ensure()

    today = datetime.now(UTC).date()
    days = [today + timedelta(days=n) for n in range(DAYS_AHEAD + 1)]
    assert created == [day_partition_name(day) for day in days]
    assert set(created) <= set(_names())
    assert tasks.trace_partitions_ensure() == []  # idempotent
    tomorrow = Trace.objects.bulk_create([_trace(0, when=_noon(days[1]))])[0]
    far = Trace.objects.bulk_create([_trace(1, when=_noon(today) - timedelta(days=400))])[0]
    assert _where([tomorrow.pk, far.pk]) == {
        tomorrow.pk: day_partition_name(days[1]),
        far.pk: "learning_trace_default",  # no insert fails for want of a partition
    }


@postgresql_only
def test_a_past_day_created_later_takes_its_rows_from_the_default_partition():
    day = _day(40)
    kept = Trace.objects.bulk_create(
        [_trace(n, when=_noon(day) + timedelta(minutes=n)) for n in range(6)]
        + [_trace(9, when=_noon(day) + timedelta(days=1))]
    )

    assert trace_partition_create(day=day)

    where = _where(trace.pk for trace in kept)
    assert list(where.values()).count(day_partition_name(day)) == 6
    assert where[kept[-1].pk] == "learning_trace_default"
    assert Trace.objects.count() == 7
    assert not trace_partition_create(day=day)


@postgresql_only
def test_retention_drops_a_whole_old_day_and_keeps_newer_rows():
    old, recent = _day(40), _day(10)
    for day in (old, recent):
        trace_partition_create(day=day)
    Trace.objects.bulk_create([_trace(n, when=_noon(old)) for n in range(30)])
    newer = Trace.objects.bulk_create([_trace(n, when=_noon(recent)) for n in range(30, 42)])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {day_partition_name(old)}")
    _committed()

    assert traces_prune(older_than=timedelta(days=30)) == 30

    assert day_partition_name(old) not in _names()
    assert day_partition_name(recent) in _names()
    assert set(Trace.objects.values_list("pk", flat=True)) == {trace.pk for trace in newer}


@postgresql_only
def test_a_day_with_traces_still_to_fold_is_kept_until_they_are():
    old = _day(40)
    trace_partition_create(day=old)
    Trace.objects.bulk_create([_trace(n, when=_noon(old), aggregated=n != 3) for n in range(10)])

    # Its folded traces go as rows outside the days' partitions do: in chunks.
    assert traces_prune(older_than=timedelta(days=30)) == 9

    assert day_partition_name(old) in _names()  # the rollback attached it again
    assert list(Trace.objects.values_list("aggregated", flat=True)) == [False]
    Trace.objects.update(aggregated=True)
    _committed()
    traces_prune(older_than=timedelta(days=30))
    assert day_partition_name(old) not in _names()
    assert not Trace.objects.exists()


@postgresql_only
def test_the_day_the_cutoff_falls_in_is_dropped_whole_the_next_day():
    # 30 days and a few hours ago: past retention, but its day also holds traces that are not.
    straddling = timezone.now() - timedelta(days=30, hours=1)
    trace_partition_create(day=straddling.date())
    Trace.objects.bulk_create([_trace(0, when=straddling)])

    traces_prune(older_than=timedelta(days=30))

    assert Trace.objects.count() == 1
    assert day_partition_name(straddling.date()) in _names()


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
    assert set(_where(Trace.objects.values_list("pk", flat=True)).values()) == {
        day_partition_name(datetime.now(UTC).date()),
        "learning_trace_default",
    }


@postgresql_only
def test_each_partition_holds_the_unique_keys():
    application = Application.objects.create(name="app")
    tasks.trace_partitions_ensure()
    when = _noon(datetime.now(UTC).date())
    Trace.objects.bulk_create([_trace(0, when=when, application=application)])
    with pytest.raises(IntegrityError), transaction.atomic():
        later = when + timedelta(hours=1)  # the same day: the same partition
        Trace.objects.bulk_create([_trace(0, when=later, application=application)])


def test_prune_deletes_old_rows_in_chunks_outside_day_partitions():
    # SQLite has no partitions; on PostgreSQL these rows are in the default partition.
    old = timezone.now() - timedelta(days=90)
    Trace.objects.bulk_create([_trace(n, when=old) for n in range(25)])
    Trace.objects.bulk_create([_trace(n, when=timezone.now()) for n in range(25, 30)])
    Trace.objects.filter(step=0, occurred_at__lt=timezone.now() - timedelta(days=1)).update(
        aggregated=False
    )  # not folded yet: kept

    assert traces_prune(older_than=timedelta(days=30), chunk=4) == 18

    assert Trace.objects.count() == 12
    assert not Trace.objects.filter(occurred_at__lt=old + timedelta(days=1), aggregated=True)


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
    assert "learning_trace_legacy" not in _names()


@postgresql_only
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_creating_a_day_lets_traces_of_other_days_through():
    today = datetime.now(UTC).date()
    trace_partition_create(day=today)
    Trace.objects.bulk_create([_trace(n, when=_noon(_day(200))) for n in range(20)])  # default
    stored: list[int] = []

    def store_today() -> None:
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
            stored.append(Trace.objects.bulk_create([_trace(99, when=_noon(today))])[0].pk)
        finally:
            connections.close_all()

    with transaction.atomic():
        # The new day is attached and its transaction still open, holding its locks.
        assert trace_partition_create(day=today + timedelta(days=30))
        thread = threading.Thread(target=store_today)
        thread.start()
        thread.join(10)
    assert stored, "the insert into today's partition waited for the new day's locks"
    assert _where(stored) == {stored[0]: day_partition_name(today)}
