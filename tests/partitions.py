"""What the tests of the trace table's day partitions share (``learning.partitions``)."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from learning.models import Trace
from learning.partitions import trace_partitions
from registry.models import Application

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="Partitions are PostgreSQL's (CI)"
)


def trace_at(
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


def partition_of(pks) -> dict[int, str]:
    """The partition each trace is stored in."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, tableoid::regclass::text FROM learning_trace WHERE id = ANY(%s)",
            [list(pks)],
        )
        return dict(cursor.fetchall())


def partition_names() -> list[str]:
    return [partition.name for partition in trace_partitions()]


def constraints_checked() -> None:
    """Check the foreign keys of the rows this test inserted now: a table with checks still
    pending (deferred to a commit the test never makes) cannot be dropped."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def days_ago(days: int) -> date:
    return (timezone.now() - timedelta(days=days)).date()


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
