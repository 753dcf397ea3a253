"""Retention on PostgreSQL: a day past retention dropped as a partition, against the chunked
delete of the same rows, in one run.

    flock /tmp/bench.lock .venv/bin/python benchmarks/partitions.py [--rows 300000]

Uses its own database (``registry_bench_partitions``, recreated) on the PostgreSQL at
127.0.0.1. The rows are loaded by SQL (``INSERT … SELECT`` over ``generate_series``: ingest
would take too long and is not what is measured), about 550 bytes each, all of one day 40 days
ago, folded. Each round then times ``traces_prune`` (30 days' retention) and prints rows/s:

- ``partition``: the day has its partition, which is dropped whole (``--rows`` and a tenth of
  it, to show the cost does not follow the rows);
- ``chunked, default partition``: the same rows in the default partition, deleted in chunks
  of 10,000 (the fallback for rows outside the days' partitions);
- ``chunked, plain table``: the same rows in the unpartitioned table (learning at migration
  0012), deleted in chunks: what retention did before partitions.

Then what partitions cost ingest: ``--rows`` traces spread over the 30 days kept, and 5,000
runs whose first steps are stored, then their 15,000 later steps ingested and timed
(``traces_ingest``: the earlier steps read back by ``trace_id``, which visits every partition,
and the insert), on the plain table and on 30 days' partitions, the 7 ahead and the default.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEPT_DAYS = 30  # the default retention: the days whose partitions a query visits
INGESTED = 20_000  # traces of 5,000 runs: the first steps stored, then the later ones timed
LOAD = """
INSERT INTO learning_trace (trace_id, step, tool_name, unknown_tool, args, status, state_before,
    state_after, output, error, duration_ms, occurred_at, received_at, aggregated, captured)
SELECT 'run-' || (n / 4), mod(n, 4), 'tool.' || mod(n, 1000), false,
    jsonb_build_object('query', repeat('q', 60), 'n', n),
    'success',
    jsonb_build_object('calendar_query', repeat('c', 60), 'user_id', 'u_' || mod(n, 977)),
    jsonb_build_object('calendar_query', repeat('c', 60), 'user_id', 'u_' || mod(n, 977),
                       'event_id', 'evt_' || n),
    jsonb_build_object('event_id', 'evt_' || n, 'title', repeat('t', 40)),
    '', 40 + mod(n, 200), %s + mod(n, %s) * interval '1 millisecond', now(), true, true
FROM generate_series(1, %s) AS n
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    args = parser.parse_args()

    from benchmarks import database

    database.django_on_fresh_database("registry_bench_partitions")
    from django.core.management import call_command
    from django.db import connection

    from learning.ingest import traces_ingest
    from learning.signals import traces_stored

    # No fold is queued (no broker here): ingest's own work is what is timed.
    traces_stored.disconnect(dispatch_uid="learning-fold-soon")
    from learning.partitions import DAYS_AHEAD, trace_partition_create
    from learning.services import traces_prune

    day = (datetime.now(UTC) - timedelta(days=40)).date()
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)

    def load(rows: int, *, first: datetime = start, days: int = 1) -> None:
        with connection.cursor() as cursor:
            # Spread over ``days`` days from ``first``, an hour short of the last day's end.
            cursor.execute(LOAD, [first, (days * 24 - 1) * 3_600_000, rows])
            cursor.execute("VACUUM ANALYZE learning_trace")

    def prune(label: str, rows: int) -> float:
        started = time.perf_counter()
        pruned = traces_prune(older_than=timedelta(days=30))
        seconds = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM learning_trace")
            left = cursor.fetchone()[0]
        assert left == 0, f"{label}: {left} rows left"
        rate = rows / seconds
        print(f"{label:<34} {rows:>9,} rows  {seconds:8.3f} s  {rate:>14,.0f} rows/s  ({pruned:,})")
        return rate

    def ingest(label: str, rows: int) -> float:
        """Later steps of runs whose first step is stored: each batch reads the earlier steps
        of its runs back (by ``trace_id``, in every partition) and inserts with ON CONFLICT."""
        first = datetime.combine(datetime.now(UTC).date(), datetime.min.time(), tzinfo=UTC)
        load(rows, first=first - timedelta(days=KEPT_DAYS), days=KEPT_DAYS)
        now = datetime.now(UTC)
        calls = [
            {
                "trace_id": f"live-{n // 4}",
                "step": n % 4,
                "tool": f"tool.{n % 1000}",
                "status": "success",
                "args": {"query": "q" * 60},
                "output": {"n": n},
                "state_before": {"user_id": f"u_{n % 977}"},
                "state_after": {"user_id": f"u_{n % 977}", "event_id": f"evt_{n}"},
                "occurred_at": (now - timedelta(seconds=n % 3600)).isoformat(),
            }  # fmt: skip
            for n in range(INGESTED)
        ]
        traces_ingest(items=enumerate(c for c in calls if c["step"] == 0))
        later = [c for c in calls if c["step"] > 0]
        started = time.perf_counter()
        result = traces_ingest(items=enumerate(later))
        seconds = time.perf_counter() - started
        assert result.accepted == len(later), result
        rate = len(later) / seconds
        print(f"{label:<34} {len(later):>9,} rows  {seconds:8.3f} s  {rate:>14,.0f} rows/s  "
              f"(beside {rows:,})")  # fmt: skip
        return rate

    print(f"{'round':<34} {'rows':>14}  {'time':>10}  {'rate':>21}  (counted)")
    rates = {}
    for rows in (args.rows // 10, args.rows):
        trace_partition_create(day=day)
        load(rows)
        rates[f"partition {rows}"] = prune("partition (dropped whole)", rows)
    load(args.rows)
    rates["default"] = prune("chunked, default partition", args.rows)
    call_command("migrate", "learning", "0012", verbosity=0)
    load(args.rows)
    rates["plain"] = prune("chunked, plain table (before)", args.rows)
    ingest_plain = ingest("ingest, plain table (before)", args.rows)
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE learning_trace")
    today = datetime.now(UTC).date()
    for offset in range(-KEPT_DAYS, DAYS_AHEAD + 1):
        trace_partition_create(day=today + timedelta(days=offset))
    ingest_days = ingest(f"ingest, {KEPT_DAYS + DAYS_AHEAD + 2} partitions", args.rows)
    whole = rates[f"partition {args.rows}"]
    print(
        f"dropping a day against the chunked delete: {whole / rates['plain']:,.0f}x the plain "
        f"table's rate, {whole / rates['default']:,.0f}x the default partition's"
    )
    print(
        f"ingest with partitions against the plain table: {ingest_days / ingest_plain:.2f}x "
        "its rate"
    )


if __name__ == "__main__":
    main()
