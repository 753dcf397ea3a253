"""Ingest and refresh at scale on PostgreSQL: prints traces/s, seconds and peak memory.

    .venv/bin/python benchmarks/ingest.py [--traces 1000000] [--tools 1000]

Uses its own database (``registry_bench``, recreated) on the PostgreSQL of DATABASE_URL's host
(default postgres://postgres@127.0.0.1:5432). The traces file is written by a child process so
the figures are the importer's own: `import_traces` streams it; memory stays bounded by the batch.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--new", type=int, default=10_000)
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
