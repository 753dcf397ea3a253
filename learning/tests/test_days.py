"""Per-tool, per-day statistics folded after ingest: what the tool-health charts draw."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from learning.aggregates import aggregate_percentile
from learning.fold import traces_fold_pending
from learning.ingest import traces_ingest
from learning.models import InferredContract, ToolDayStats, Trace
from learning.services import tool_refresh, traces_prune
from tests.helpers import event_call

pytestmark = pytest.mark.django_db
DAY_1 = datetime(2026, 3, 1, 10, tzinfo=UTC)
DAY_2 = datetime(2026, 3, 2, 23, 59, tzinfo=UTC)


def at(moment: datetime, step: int, **kwargs) -> dict:
    return {
        **event_call(step, **kwargs),
        "occurred_at": moment.isoformat(),
        "duration_ms": 100 + step,
    }


def ingest_and_fold(**kwargs) -> None:
    """Ingest, then the fold its commit queues (a test's transaction never commits)."""
    traces_ingest(**kwargs)
    traces_fold_pending()


def days() -> dict[date, ToolDayStats]:
    return {row.day: row for row in ToolDayStats.objects.filter(tool_name="calendar.get_event")}


def test_it_folds_calls_errors_durations_and_last_seen_per_day(get_event):
    traces = [at(DAY_1 + timedelta(minutes=n), n, run="a") for n in range(5)]
    traces += [at(DAY_2 - timedelta(minutes=n), n, run="b", status="error") for n in range(3)]
    ingest_and_fold(items=enumerate(traces))

    rows = days()
    assert sorted(rows) == [date(2026, 3, 1), date(2026, 3, 2)]
    first, second = rows[date(2026, 3, 1)], rows[date(2026, 3, 2)]
    assert (first.calls, first.errors, second.calls, second.errors) == (5, 0, 3, 3)
    assert sum(first.durations.values()) == 5
    assert 95 <= aggregate_percentile({"durations": first.durations}, 50) <= 110
    assert first.last_seen_at == DAY_1 + timedelta(minutes=4)
    assert second.last_seen_at == DAY_2
    assert first.tool_id == get_event.pk


def test_it_adds_later_batches_and_never_counts_a_duplicate_twice(get_event):
    ingest_and_fold(items=enumerate([at(DAY_1, n, run="a") for n in range(4)]))
    ingest_and_fold(items=enumerate([at(DAY_1, n, run="a") for n in range(6)]))  # 4 repeats
    ingest_and_fold(items=enumerate([at(DAY_1, 0, run="c", status="error")]), batch_size=1)
    row = days()[date(2026, 3, 1)]
    assert (row.calls, row.errors) == (7, 1)
    assert Trace.objects.filter(tool_name="calendar.get_event").count() == 7


def test_stored_traces_are_folded_into_days_once(get_event):
    traces_ingest(items=enumerate([at(DAY_1, n, run="a") for n in range(4)]))
    assert days() == {}  # stored, not folded yet
    assert traces_fold_pending(tool_names=["calendar.get_event"]) == {"calendar.get_event": 4}
    assert days()[date(2026, 3, 1)].calls == 4
    assert traces_fold_pending(tool_names=["calendar.get_event"]) == {}
    assert days()[date(2026, 3, 1)].calls == 4


def test_days_outlive_pruned_traces_but_not_their_own_retention(get_event, settings):
    old = timezone.now() - timedelta(days=60)
    ingest_and_fold(items=enumerate([at(old, n, run="old") for n in range(3)]))
    ingest_and_fold(items=enumerate([at(timezone.now(), 0, run="new")]))
    assert traces_prune() == 3
    assert sum(row.calls for row in days().values()) == 4

    settings.TOOL_DAY_RETENTION = timedelta(days=30)
    traces_prune()
    assert sum(row.calls for row in days().values()) == 1


def test_an_unregistered_name_keeps_days_only_as_long_as_its_traces(get_event):
    old = timezone.now() - timedelta(days=60)
    ingest_and_fold(items=enumerate([at(old, 0, run="x", tool="shadow.tool")]))
    assert ToolDayStats.objects.filter(tool_name="shadow.tool").count() == 1
    traces_prune()
    assert not ToolDayStats.objects.filter(tool_name="shadow.tool").exists()


def test_refresh_records_where_the_inferred_contract_differs(get_event):
    traces = [
        at(DAY_1, n, run=f"r{n}", extra_after={"event_updated": f"upd_{n}_long"}) for n in range(40)
    ]
    traces_ingest(items=enumerate(traces))
    tool_refresh(tool_name="calendar.get_event")
    inferred = InferredContract.objects.get(tool_name="calendar.get_event")
    assert inferred.differs is True
    assert "produces" in inferred.differing_fields
