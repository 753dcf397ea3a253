"""The trace table's day partitions on PostgreSQL (migration 0013): created ahead, dropped whole.

``learning_trace`` is partitioned by range of ``occurred_at``, one partition a UTC day
(``learning_trace_pYYYYMMDD``), beside a default partition (``learning_trace_default``) that
takes any row no day's partition does (a day not created yet, an import of old traces), so no
insert ever fails, and, on a table converted while populated, the partition of everything
before the conversion (``learning_trace_legacy``). Retention drops a day's partition once its
day is past and every trace in it is folded; rows in the default and old partitions are
deleted in chunks, as on SQLite (``learning.services.traces_prune``).

Each partition has its own unique keys on (application, trace_id, step): they cannot be
declared on the parent, whose unique keys must hold the partition key. A step is unique within
its day: a retried batch carries the ``occurred_at`` the runtime sent, so it conflicts with its
first copy; a step sent without one is stamped on arrival, so a retry conflicts with its first
copy unless a UTC midnight fell between them.

The DDL here runs under ``LOCK_TIMEOUT``: a statement that would wait longer behind a long
query fails, and the next run does it, rather than ingest queueing behind it. A day is attached
(a lock on the parent that lets reads and writes through); a day is dropped after
``DETACH PARTITION``, a moment's exclusive lock on the parent.
``DETACH ... CONCURRENTLY`` would take a weaker lock, but PostgreSQL refuses it while a default
partition exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

TABLE = "learning_trace"
DEFAULT = "learning_trace_default"
DAYS_AHEAD = 7  # today and the days after it that have a partition ahead of their traces
LOCK_TIMEOUT = "5s"
_BOUNDS = re.compile(r"FOR VALUES FROM \((?P<start>[^)]*)\) TO \((?P<end>[^)]*)\)")


@dataclass(frozen=True)
class Partition:
    name: str
    start: datetime | None  # None: MINVALUE
    end: datetime | None  # None: MAXVALUE
    default: bool = False

    def covers(self, start: datetime, end: datetime) -> bool:
        """Whether any of [start, end) falls in this partition (never for the default)."""
        return (
            not self.default
            and (self.start is None or self.start < end)
            and (self.end is None or start < self.end)
        )


def partitioned() -> bool:
    """Whether the trace table is partitioned here (PostgreSQL, after migration 0013)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def trace_partitions() -> list[Partition]:
    """The trace table's partitions, oldest first, the default last."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        rows = cursor.fetchall()
    found = []
    for name, bound in rows:
        if bound == "DEFAULT":
            found.append(Partition(name=name, start=None, end=None, default=True))
            continue
        match = _BOUNDS.search(bound)
        if match is None:
            continue  # not a range this module made: left alone
        found.append(Partition(name=name, start=_bound(match["start"]), end=_bound(match["end"])))
    return sorted(found, key=lambda p: (p.default, p.start or datetime.min.replace(tzinfo=UTC)))


def _bound(text: str) -> datetime | None:
    if text in ("MINVALUE", "MAXVALUE"):
        return None
    return datetime.fromisoformat(text.strip("'")).astimezone(UTC)


def day_partition_name(day: date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def unique_keys_sql(partition: str) -> list[str]:
    """One partition's idempotency keys: the model's two unique constraints, within it."""
    return [
        f'CREATE UNIQUE INDEX "{partition}_app_step" ON "{partition}" '
        "(application_id, trace_id, step) WHERE application_id IS NOT NULL",
        f'CREATE UNIQUE INDEX "{partition}_operator_step" ON "{partition}" '
        "(trace_id, step) WHERE application_id IS NULL",
    ]


def trace_partition_create(*, day: date) -> bool:
    """Create ``day``'s partition unless a partition covers any of it; return whether it did.

    The table is made on its own (empty: its keys and range check cost nothing) and then
    attached: ``ATTACH PARTITION`` takes a lock on the parent that lets reads and writes
    through, where ``CREATE TABLE … PARTITION OF`` would hold every one for as long as the
    default partition takes to scan (PostgreSQL proves none of its rows belongs to the new
    day, under an exclusive lock on the default either way). Rows of that day already in the
    default partition move into it in the same transaction. Normally there are none (the days
    are created ahead); a past day is created this way after an import of old traces, so that
    retention drops it whole.
    """
    start, end = _day_bounds(day)
    name = day_partition_name(day)
    bounds = f"FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        partitions = trace_partitions()
        if any(p.covers(start, end) for p in partitions):
            return False
        cursor.execute(
            f'CREATE TABLE "{name}" (LIKE "{TABLE}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
        )
        # Proves the range, so that attaching reads none of the rows moved in.
        cursor.execute(
            f'ALTER TABLE "{name}" ADD CONSTRAINT "{name}_range" CHECK (occurred_at >= '
            f"'{start.isoformat()}' AND occurred_at < '{end.isoformat()}')"
        )
        for statement in unique_keys_sql(name):
            cursor.execute(statement)
        if any(p.default for p in partitions):
            cursor.execute(
                f'WITH moved AS (DELETE FROM "{DEFAULT}" WHERE occurred_at >= %s '
                f'AND occurred_at < %s RETURNING *) INSERT INTO "{name}" SELECT * FROM moved',
                [start, end],
            )
        cursor.execute(f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{name}" FOR VALUES {bounds}')
        cursor.execute(f'ALTER TABLE "{name}" DROP CONSTRAINT "{name}_range"')
    return True


def trace_partitions_ensure(*, today: date | None = None, ahead: int = DAYS_AHEAD) -> list[str]:
    """Create the partitions of today and the ``ahead`` days after it that are missing; return
    their names. Idempotent: the periodic task runs it every hour."""
    today = today or datetime.now(UTC).date()
    created = []
    for offset in range(ahead + 1):
        day = today + timedelta(days=offset)
        if trace_partition_create(day=day):
            created.append(day_partition_name(day))
    return created


@dataclass
class Dropped:
    names: list[str]
    rows: int  # as the planner's statistics count them: counting would read every row


def trace_partitions_drop(*, before: datetime) -> Dropped:
    """Drop each partition (but the default) that ends at or before ``before`` and holds no
    trace still to fold: DETACH and DROP in one short transaction (the table's files are
    unlinked: no row is read or deleted, no dead row is left for vacuum)."""
    dropped = Dropped(names=[], rows=0)
    for partition in trace_partitions():
        if partition.default or partition.end is None or partition.end > before:
            continue
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(f'ALTER TABLE "{TABLE}" DETACH PARTITION "{partition.name}"')
                # Detached, it takes no new row; the partial index of unfolded traces answers
                # without reading the rows.
                cursor.execute(
                    f'SELECT EXISTS (SELECT 1 FROM "{partition.name}" WHERE NOT aggregated)'
                )
                if cursor.fetchone()[0]:
                    raise _StillFolding
                cursor.execute(
                    "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass",
                    [partition.name],
                )
                rows = cursor.fetchone()[0]
                cursor.execute(f'DROP TABLE "{partition.name}"')
        except _StillFolding:
            continue  # attached again by the rollback; dropped once folded
        dropped.names.append(partition.name)
        dropped.rows += rows
    return dropped


class _StillFolding(Exception):
    """A partition holds traces the fold has not taken yet: its drop is rolled back."""
