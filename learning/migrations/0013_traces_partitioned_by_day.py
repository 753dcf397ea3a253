"""The trace table becomes partitioned by day of ``occurred_at`` on PostgreSQL.

Retention then drops a whole day (``learning.partitions``) instead of deleting its rows one
by one. Nothing changes in Django's model state, and nothing at all on SQLite, which has no
partitions: the operations below are SQL run on PostgreSQL only.

A populated table is converted in place, never copied, so that a large live table is locked
only for a moment:

1. ``CREATE UNIQUE INDEX CONCURRENTLY`` on ``(id, occurred_at)``: a partitioned table's
   primary key must hold its partition key. Built while ingest keeps writing.
2. ``CHECK (occurred_at < D)`` added ``NOT VALID`` (a moment's lock), then ``VALIDATE``d (a
   scan that lets writes through). ``D`` is a week ahead, and after the newest trace: rows
   arriving meanwhile (at most a day ahead, ``learning.traces.FUTURE_SLACK``) satisfy it.
3. One short transaction (``lock_timeout``: it fails, to be run again, rather than queue
   ingest behind a long query): the table is renamed ``learning_trace_legacy``, its primary
   key moves to the index of step 1, the partitioned ``learning_trace`` is created with the
   same columns, checks, foreign keys and indexes, and the old table is attached as the
   partition of everything before ``D``. The check proves the range, so the attach reads no
   row; the old table's indexes, primary key and foreign keys match the new parent's and are
   adopted, not rebuilt. A default partition takes what no day's partition does. If it
   fails, the check of step 2 is dropped again (it would refuse traces from D on); the index
   stays for the next run.

An empty table (a new installation, the test database) is not kept as a partition: every
day then has its own. Whatever is not in a day's partition is pruned by the chunked delete.

The unique keys on (application, trace_id, step) cannot be declared on the parent, since they
do not hold ``occurred_at``: each partition has its own (``learning.partitions``), so a step
is unique within its day. The old partition keeps its own across its whole range.

Backwards (PostgreSQL): the plain table is created as Django creates it and every row is
copied into it, under a lock for the whole copy.
"""

import re
from datetime import UTC, datetime, timedelta

from django.db import OperationalError, migrations, transaction

TABLE = "learning_trace"
LEGACY = "learning_trace_legacy"
DEFAULT = "learning_trace_default"
ID_INDEX = "learning_trace_id_occurred"
RANGE_CHECK = "learning_trace_legacy_range"
LEGACY_DAYS_AHEAD = 7  # a validation that runs for days on a huge table still finds D ahead
# The swap fails rather than queue ingest behind a long query for longer than this.
LOCK_TIMEOUT = "10s"
CLEANUP_TRIES = 6


def _unique_sql(partition: str) -> list[str]:
    """The idempotency keys of one partition (the same as ``learning.partitions``)."""
    return [
        f'CREATE UNIQUE INDEX "{partition}_app_step" ON "{partition}" '
        "(application_id, trace_id, step) WHERE application_id IS NOT NULL",
        f'CREATE UNIQUE INDEX "{partition}_operator_step" ON "{partition}" '
        "(trace_id, step) WHERE application_id IS NULL",
    ]


def _relkind(cursor, name: str) -> str | None:
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [name])
    row = cursor.fetchone()
    return row[0] if row else None


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if _relkind(cursor, TABLE) == "p":
            return  # converted already (a run that stopped after step 3)
        # 1. The primary key to be, built without blocking writes; an invalid one left by an
        # interrupted build is built again.
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", [ID_INDEX]
        )
        found = cursor.fetchone()
        if found and not found[0]:
            cursor.execute(f'DROP INDEX CONCURRENTLY "{ID_INDEX}"')
        if not found or not found[0]:
            cursor.execute(
                f'CREATE UNIQUE INDEX CONCURRENTLY "{ID_INDEX}" ON "{TABLE}" (id, occurred_at)'
            )
        # 2. The range of the old rows, proved without holding a lock through the scan.
        cursor.execute(f'SELECT max(occurred_at) FROM "{TABLE}"')
        newest = cursor.fetchone()[0]
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        bound = today + timedelta(days=LEGACY_DAYS_AHEAD)
        if newest is not None:
            after_newest = newest.astimezone(UTC).replace(
                hour=0, minute=0, second=0, microsecond=0
            ) + timedelta(days=1)
            bound = max(bound, after_newest)
        cursor.execute(f'ALTER TABLE "{TABLE}" DROP CONSTRAINT IF EXISTS "{RANGE_CHECK}"')
        cursor.execute(
            f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{RANGE_CHECK}" '
            f"CHECK (occurred_at < '{bound.isoformat()}') NOT VALID"
        )
        cursor.execute(f'ALTER TABLE "{TABLE}" VALIDATE CONSTRAINT "{RANGE_CHECK}"')
    # 3. The swap. Should it fail (its lock not had in time), the range check goes again, or
    # rows from D on would be refused; the index stays, for the next run.
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            _swap(cursor, bound)
    except Exception:
        _range_check_dropped(connection, bound)
        raise


def _range_check_dropped(connection, bound: datetime) -> None:
    for _ in range(CLEANUP_TRIES):
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(f'ALTER TABLE "{TABLE}" DROP CONSTRAINT IF EXISTS "{RANGE_CHECK}"')
            return
        except OperationalError:
            continue
    raise RuntimeError(
        f'The check "{RANGE_CHECK}" is still on "{TABLE}": run migrate again, or drop it, '
        f"before {bound.isoformat()}, from when it refuses traces that occur after."
    )


def _swap(cursor, bound: datetime) -> None:
    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    cursor.execute(f'LOCK TABLE "{TABLE}" IN ACCESS EXCLUSIVE MODE')
    cursor.execute(f'ALTER TABLE "{TABLE}" RENAME TO "{LEGACY}"')
    # The indexes' names go to the new parent; the old table's are renamed to be adopted.
    cursor.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisprimary "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = %s::regclass AND c.relname <> %s ORDER BY c.relname",
        [LEGACY, ID_INDEX],
    )
    indexes = cursor.fetchall()
    parent_indexes = []
    for name, definition, unique, primary in indexes:
        if primary:
            continue  # replaced below
        cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{_legacy_name(name)}"')
        if not unique:
            parent_indexes.append(
                re.sub(
                    rf"^CREATE INDEX \S+ ON (\S+\.)?{LEGACY} ",
                    f'CREATE INDEX "{name}" ON "{TABLE}" ',
                    definition,
                )
            )
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid), contype FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('c', 'f') AND conname <> %s "
        "ORDER BY conname",
        [LEGACY, RANGE_CHECK],
    )
    constraints = cursor.fetchall()
    # The identity becomes a sequence the parent owns (partitioned tables take no identity
    # column before PostgreSQL 17); it goes on from where the identity was.
    cursor.execute(f"SELECT pg_get_serial_sequence('{LEGACY}', 'id')")
    (identity,) = cursor.fetchone()
    cursor.execute(f"SELECT last_value, is_called FROM {identity}")
    last_value, is_called = cursor.fetchone()
    cursor.execute(f'ALTER TABLE "{LEGACY}" ALTER COLUMN id DROP IDENTITY')
    cursor.execute(f'ALTER TABLE "{LEGACY}" DROP CONSTRAINT "{TABLE}_pkey"')
    cursor.execute(
        f'ALTER TABLE "{LEGACY}" ADD CONSTRAINT "{LEGACY}_pkey" '
        f'PRIMARY KEY USING INDEX "{ID_INDEX}"'
    )
    cursor.execute(
        f'CREATE TABLE "{TABLE}" (LIKE "{LEGACY}" INCLUDING DEFAULTS) '
        "PARTITION BY RANGE (occurred_at)"
    )
    cursor.execute(f'CREATE SEQUENCE "{TABLE}_id_seq" OWNED BY "{TABLE}".id')
    cursor.execute(f"SELECT setval('\"{TABLE}_id_seq\"', %s, %s)", [last_value, is_called])
    cursor.execute(
        f'ALTER TABLE "{TABLE}" ALTER COLUMN id SET DEFAULT nextval(\'"{TABLE}_id_seq"\')'
    )
    cursor.execute(
        f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{TABLE}_pkey" PRIMARY KEY (id, occurred_at)'
    )
    for name, definition, _ in constraints:
        cursor.execute(f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{name}" {definition}')
    for definition in parent_indexes:
        cursor.execute(definition)
    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{LEGACY}")')
    if cursor.fetchone()[0]:
        cursor.execute(
            f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{LEGACY}" '
            f"FOR VALUES FROM (MINVALUE) TO ('{bound.isoformat()}')"
        )
        cursor.execute(f'ALTER TABLE "{LEGACY}" DROP CONSTRAINT "{RANGE_CHECK}"')
    else:
        cursor.execute(f'DROP TABLE "{LEGACY}"')
    cursor.execute(f'CREATE TABLE "{DEFAULT}" PARTITION OF "{TABLE}" DEFAULT')
    for statement in _unique_sql(DEFAULT):
        cursor.execute(statement)


def _legacy_name(name: str) -> str:
    return f"legacy_{name}"[:63]


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if _relkind(cursor, TABLE) != "p":
            return
        old = "learning_trace_partitioned"
        cursor.execute(f'LOCK TABLE "{TABLE}" IN ACCESS EXCLUSIVE MODE')
        cursor.execute(f'ALTER TABLE "{TABLE}" RENAME TO "{old}"')
        # Free the names the plain table's indexes take: the parent's own (its partitions'
        # go with them).
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary",
            [old],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX "{name}"')
        # Its checks too: PostgreSQL names the plain table's after the free names.
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype IN ('p', 'c')",
            [old],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
        cursor.execute(f'ALTER SEQUENCE "{TABLE}_id_seq" RENAME TO "{old}_id_seq"')
        schema_editor.create_model(apps.get_model("learning", "Trace"))
        cursor.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [TABLE],
        )
        (columns,) = cursor.fetchone()
        cursor.execute(
            f'INSERT INTO "{TABLE}" ({columns}) OVERRIDING SYSTEM VALUE '
            f'SELECT {columns} FROM "{old}"'
        )
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), "
            f'(SELECT last_value FROM "{old}_id_seq"))'
        )
        cursor.execute(f'DROP TABLE "{old}" CASCADE')


class Migration(migrations.Migration):
    # Concurrent index builds run outside a transaction; the swap is one transaction of its own.
    atomic = False

    dependencies = [
        ("learning", "0012_traces_folded_after_they_are_stored"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
