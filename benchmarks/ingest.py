"""Ingest and refresh at scale on PostgreSQL: prints traces/s, seconds and peak memory.

    .venv/bin/python benchmarks/ingest.py [--traces 1000000] [--tools 1000]
    .venv/bin/python benchmarks/ingest.py --doors [--traces 20000] [--database NAME]

Uses its own database (``registry_bench``, recreated; ``--database`` names another) on the
PostgreSQL of DATABASE_URL's host (default postgres://postgres@127.0.0.1:5432). The traces file
is written by a child process so the figures are the importer's own: `import_traces` streams it;
memory stays bounded by the batch.

``--doors``: the same traces through every ingest door, each timed until it has answered, and
each as a ratio against COPY of the same rows in the same run (the database's own pace, the
reference): `import_traces` (an operator's file), `POST traces/` (500 per request, Django's
test client in process: middleware, authentication, JSON), and OTLP (protobuf spans, 512 per
request, then the assembly that hands them to ingest). The reference copies the rows
`import_traces` stored, as stored, into a table with the trace table's columns, defaults,
constraints and indexes. A second line shows what the trace table itself costs: the same rows,
typed, inserted as ingest inserts them (``ON CONFLICT DO NOTHING`` into the partitioned table,
the foreign keys checked), then rolled back; each door is also given as a multiple of it. Then
the fold of everything stored (in this process), where the code has one. The broker is Redis
(``--redis-db``, and the next for the cache, both flushed): the
fold each commit queues is published, as in production, and left there.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE_FLOOR = "INSERT ON CONFLICT, keys"
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--doors", action="store_true", help="every door against COPY")
    parser.add_argument("--database", default="registry_bench")
    parser.add_argument("--redis-db", type=int, default=10)
    args = parser.parse_args()
    if args.doors:
        doors(args.traces, args.tools, database_name=args.database, redis_db=args.redis_db)
        return

    from benchmarks import database
    from demo import scaled_world as world

    database.django_on_fresh_database("registry_bench")
    from django.core.management import call_command

    registry = world.registry(args.tools)
    with tempfile.TemporaryDirectory() as tmp:
        registry_path = database.import_approved(registry, tmp)
        traces_path = Path(tmp) / "traces.jsonl"
        new_path = Path(tmp) / "new.jsonl"
        for path, count, seed, prefix in (
            (traces_path, args.traces, 2, "run"),
            (new_path, args.new, 3, "new"),
        ):
            subprocess.run(
                [sys.executable, "-m", "demo.scaled_world", str(registry_path), str(path),
                 str(count), str(seed), prefix],
                cwd=ROOT, check=True,
            )  # fmt: skip
        size = traces_path.stat().st_size

        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        call_command("import_traces", str(traces_path), "--no-progress")
        ingest_seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        started = time.perf_counter()
        call_command("refresh_contracts", "--no-progress")
        refresh_seconds = time.perf_counter() - started

        started = time.perf_counter()
        call_command("import_traces", str(new_path), "--no-progress")
        new_ingest = time.perf_counter() - started
        started = time.perf_counter()
        call_command("refresh_contracts", "--no-progress")
        refresh_new = time.perf_counter() - started

    print()
    print(f"traces file: {args.traces:,} traces over {args.tools:,} tools, {size / 1e6:.0f} MB")
    print(f"import_traces: {ingest_seconds:.1f} s, {args.traces / ingest_seconds:,.0f} traces/s")
    print(f"peak memory (RSS): {peak / 1024:.0f} MB (before import: {before / 1024:.0f} MB)")
    print(f"refresh_contracts after the import: {refresh_seconds:.2f} s")
    print(
        f"import of {args.new:,} new traces: {new_ingest:.2f} s; "
        f"refresh after them: {refresh_new:.2f} s"
    )


def doors(count: int, tools: int, *, database_name: str, redis_db: int) -> None:
    import json

    from benchmarks import database
    from demo import scaled_world as world

    subprocess.run(["redis-cli", "-n", str(redis_db), "flushdb"], check=True, capture_output=True)
    subprocess.run(
        ["redis-cli", "-n", str(redis_db + 1), "flushdb"], check=True, capture_output=True
    )
    database.django_on_fresh_database(
        database_name,
        REDIS_URL=f"redis://127.0.0.1:6379/{redis_db}",
        CACHE_REDIS_URL=f"redis://127.0.0.1:6379/{redis_db + 1}",
        API_THROTTLE_RATE="1000000/min",
        ALLOWED_HOSTS="testserver",
    )
    from datetime import timedelta

    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.utils import timezone

    from api.services import runtime_token_create
    from learning import ingest
    from learning.models import Trace
    from learning.otel_ingest import otel_traces_assemble
    from learning.otel_replay import export_request, spans_from_traces

    registry = world.registry(tools)
    calls = list(world.traces(registry, count, seed=2, prefix="run"))
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        database.import_approved(registry, tmp)
        path = Path(tmp) / "traces.jsonl"
        world.write_jsonl(str(path), iter(calls))
        started = time.perf_counter()
        call_command("import_traces", str(path), "--no-progress")
        timings["import_traces"] = time.perf_counter() - started

    # The reference: the rows import_traces stored, as stored, copied in by the database, into
    # a table like the one they went to: where traces are partitioned by day, their partition
    # (which holds the unique keys; the partitioned parent cannot), else the table itself.
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM learning_trace LIMIT 1")
        like = cursor.fetchone()[0]
        cursor.execute(
            f"CREATE TABLE bench_copy_reference (LIKE {like} INCLUDING DEFAULTS "
            "INCLUDING CONSTRAINTS INCLUDING INDEXES)"
        )
        with cursor.cursor.copy(
            "COPY (SELECT * FROM learning_trace WHERE application_id IS NULL) TO STDOUT"
        ) as copy:
            text = b"".join(bytes(chunk) for chunk in copy)
        started = time.perf_counter()
        with cursor.cursor.copy("COPY bench_copy_reference FROM STDIN") as copy:
            for start in range(0, len(text), 1 << 20):
                copy.write(text[start : start + (1 << 20)])
        timings["COPY"] = time.perf_counter() - started
        cursor.execute("DROP TABLE bench_copy_reference")

        # What the trace table itself costs: the same rows, typed, inserted as ingest inserts
        # them (into the partitioned table, ON CONFLICT DO NOTHING, the foreign keys checked as
        # at commit), then rolled back. No door can be quicker than this.
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_typed AS "
            "SELECT * FROM learning_trace WHERE application_id IS NULL"
        )
        with transaction.atomic():
            cursor.execute("DELETE FROM learning_trace WHERE application_id IS NULL")
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the delete's checks, untimed
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            started = time.perf_counter()
            cursor.execute(
                "INSERT INTO learning_trace SELECT * FROM bench_typed ON CONFLICT DO NOTHING"
            )
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            timings[TABLE_FLOOR] = time.perf_counter() - started
            transaction.set_rollback(True)
        cursor.execute("DROP TABLE bench_typed")

    client = Client()
    _, native = runtime_token_create(application_name="native", scopes=["traces:write"])
    _, otel = runtime_token_create(application_name="otel", scopes=["traces:write"])
    bodies = [json.dumps(calls[i : i + 500]) for i in range(0, len(calls), 500)]
    started = time.perf_counter()
    for body in bodies:
        response = client.post(
            "/api/v1/traces/", body, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {native}",
        )  # fmt: skip
        assert response.status_code == 200 and response.json()["accepted"] == 500, response
    timings["POST traces/"] = time.perf_counter() - started

    spans = spans_from_traces(calls)
    requests = [
        export_request(spans[i : i + 512]).SerializeToString() for i in range(0, len(spans), 512)
    ]
    started = time.perf_counter()
    for body in requests:
        response = client.post(
            "/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {otel}",
        )  # fmt: skip
        assert response.status_code == 200, response.content
    otel_traces_assemble(now=timezone.now() + timedelta(minutes=5))
    timings["OTLP (receive + assembly)"] = time.perf_counter() - started
    stored = Trace.objects.count()
    assert stored == 3 * count, (stored, count)

    # Where the code being measured has a fold: its own module, or (older) ingest's.
    fold = getattr(importlib.import_module("learning.fold") if has_fold_module() else ingest,
                   "traces_fold_pending", None)  # fmt: skip
    if fold is not None:
        started = time.perf_counter()
        folded = sum(fold().values())
        timings["fold (in a worker)"] = time.perf_counter() - started
        assert folded == 3 * count, folded

    reference = count / timings["COPY"]
    table = timings[TABLE_FLOOR]
    print()
    print(f"{count:,} traces over {tools:,} tools; each door timed until it answered")
    for name, seconds in timings.items():
        rate = (3 * count if name.startswith("fold") else count) / seconds
        ratio = "reference" if name == "COPY" else f"1/{reference / rate:.1f} of COPY"
        if name not in ("COPY", TABLE_FLOOR) and not name.startswith("fold"):
            ratio += f", {seconds / table:.1f}x the table's own"
        print(f"{name:<28} {seconds:7.2f} s {rate:>9,.0f} traces/s   {ratio}")


def has_fold_module() -> bool:
    return importlib.util.find_spec("learning.fold") is not None


if __name__ == "__main__":
    main()
