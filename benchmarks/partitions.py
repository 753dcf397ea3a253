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
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
    '', 40 + mod(n, 200), %s + mod(n, 82800000) * interval '1 millisecond', now(), true, true
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

    from learning.partitions import trace_partition_create
    from learning.services import traces_prune

    day = (datetime.now(UTC) - timedelta(days=40)).date()
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)

    def load(rows: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute(LOAD, [start, rows])
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
    call_command("migrate", verbosity=0)
    whole = rates[f"partition {args.rows}"]
    print(
        f"dropping a day against the chunked delete: {whole / rates['plain']:,.0f}x the plain "
        f"table's rate, {whole / rates['default']:,.0f}x the default partition's"
    )


if __name__ == "__main__":
    main()
