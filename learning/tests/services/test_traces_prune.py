"""``learning.services.traces_prune``: retention."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from learning.fold import traces_fold_pending
from learning.ingest import traces_ingest
from learning.models import ToolStats, Trace
from learning.partitions import day_partition_name, trace_partition_create
from learning.services import traces_prune
from tests.helpers import event_call
from tests.partitions import (
    constraints_checked,
    days_ago,
    noon,
    partition_names,
    postgresql_only,
    trace_at,
)

pytestmark = pytest.mark.django_db


def test_prune_deletes_only_folded_traces_past_retention(get_event):
    traces_ingest(items=enumerate(event_call(i) for i in range(40)))
    traces_fold_pending()
    Trace.objects.filter(step__lt=30).update(occurred_at=timezone.now() - timedelta(days=90))
    Trace.objects.filter(step__lt=5).update(aggregated=False)  # not folded yet: kept
    assert traces_prune(older_than=timedelta(days=30)) == 25
    assert Trace.objects.count() == 15
    assert ToolStats.objects.get().traces_total == 40  # the aggregates survive


@postgresql_only
def test_it_drops_a_whole_day_past_retention_and_keeps_newer_rows():
    old, recent = days_ago(40), days_ago(10)
    for day in (old, recent):
        trace_partition_create(day=day)
    Trace.objects.bulk_create([trace_at(n, when=noon(old)) for n in range(30)])
    newer = Trace.objects.bulk_create([trace_at(n, when=noon(recent)) for n in range(30, 42)])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {day_partition_name(old)}")
    constraints_checked()

    assert traces_prune(older_than=timedelta(days=30)) == 30

    assert day_partition_name(old) not in partition_names()
    assert day_partition_name(recent) in partition_names()
    assert set(Trace.objects.values_list("pk", flat=True)) == {trace.pk for trace in newer}


@postgresql_only
def test_it_keeps_a_day_with_traces_still_to_fold_until_they_are():
    old = days_ago(40)
    trace_partition_create(day=old)
    Trace.objects.bulk_create([trace_at(n, when=noon(old), aggregated=n != 3) for n in range(10)])

    # Its folded traces go as rows outside the days' partitions do: in chunks.
    assert traces_prune(older_than=timedelta(days=30)) == 9

    assert day_partition_name(old) in partition_names()  # the rollback attached it again
    assert list(Trace.objects.values_list("aggregated", flat=True)) == [False]
    Trace.objects.update(aggregated=True)
    constraints_checked()
    traces_prune(older_than=timedelta(days=30))
    assert day_partition_name(old) not in partition_names()
    assert not Trace.objects.exists()


@postgresql_only
def test_it_drops_the_day_the_cutoff_falls_in_whole_the_next_day():
    # Past retention, on the UTC day the cutoff falls in, whatever the hour the test runs at:
    # that day also holds traces that are not past it.
    cutoff = timezone.now() - timedelta(days=30)
    straddling = max(cutoff - timedelta(hours=1), datetime.combine(cutoff.date(), time.min, UTC))
    trace_partition_create(day=straddling.date())
    Trace.objects.bulk_create([trace_at(0, when=straddling)])

    traces_prune(older_than=timedelta(days=30))

    assert Trace.objects.count() == 1
    assert day_partition_name(straddling.date()) in partition_names()


def test_it_deletes_old_rows_in_chunks_outside_day_partitions():
    # SQLite has no partitions; on PostgreSQL these rows are in the default partition.
    old = timezone.now() - timedelta(days=90)
    Trace.objects.bulk_create([trace_at(n, when=old) for n in range(25)])
    Trace.objects.bulk_create([trace_at(n, when=timezone.now()) for n in range(25, 30)])
    Trace.objects.filter(step=0, occurred_at__lt=timezone.now() - timedelta(days=1)).update(
        aggregated=False
    )  # not folded yet: kept

    assert traces_prune(older_than=timedelta(days=30), chunk=4) == 18

    assert Trace.objects.count() == 12
    assert not Trace.objects.filter(occurred_at__lt=old + timedelta(days=1), aggregated=True)
