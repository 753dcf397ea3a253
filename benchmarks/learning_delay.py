"""Delay from a trace's arrival to its tool's inferred contract, under steady ingest.

    .venv/bin/python benchmarks/learning_delay.py [--seconds 120] [--rate 200] [--tools 50]

Uses its own database (``runtime_learning_delay``, recreated) on the PostgreSQL of
DATABASE_URL's host and the broker of REDIS_URL, and starts one Celery worker (solo pool). Each
second, ``--rate`` traces of ``--tools`` tools (``demo.scaled_world``) are ingested as the API
does; meanwhile each tool's ``InferredContract.inferred_at`` is sampled. A trace's delay is from
its commit to the first inference of its tool that began after it (an inference is stamped when
it writes). Prints the median, p95 and max delay and how many refreshes ran; nothing else runs
inference (no beat), so every refresh is a debounced one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--rate", type=int, default=200, help="traces per second")
    parser.add_argument("--tools", type=int, default=50)
    args = parser.parse_args()

    from benchmarks import database
    from demo import scaled_world as world

    database.django_on_fresh_database("runtime_learning_delay")
    from django.conf import settings
    from django.db import connection

    from learning.ingest import traces_ingest
    from learning.models import InferredContract

    registry = world.registry(args.tools)
    with tempfile.TemporaryDirectory() as tmp:
        database.import_approved(registry, tmp)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=dict(os.environ),
    )  # fmt: skip
    stream = world.traces(registry, args.rate * args.seconds, seed=5, prefix="steady")
    arrivals: list[tuple[str, float]] = []
    inferences: dict[str, set[float]] = {}

    def sample() -> None:
        for name, at in InferredContract.objects.values_list("tool_name", "inferred_at"):
            inferences.setdefault(name, set()).add(at.timestamp())

    try:
        time.sleep(5)  # the worker connects
        started = time.time()
        for second in range(args.seconds):
            batch = [next(stream) for _ in range(args.rate)]
            traces_ingest(items=enumerate(batch))  # commits: the debounced refreshes are queued
            now = time.time()
            arrivals += [(trace["tool"], now) for trace in batch]
            sample()
            time.sleep(max(0.0, started + second + 1 - time.time()))
        deadline = time.time() + settings.LEARNING_REFRESH_DEBOUNCE_SECONDS + 60
        while time.time() < deadline:
            sample()
            last = max(at for _, at in arrivals)
            if all(any(t >= last for t in inferences.get(tool, ())) for tool, _ in arrivals[-50:]):
                break
            time.sleep(0.5)
    finally:
        worker.terminate()
        worker.wait(30)
    delays = []
    missed = 0
    for tool, at in arrivals:
        later = [t for t in inferences.get(tool, ()) if t >= at]
        if later:
            delays.append(min(later) - at)
        else:
            missed += 1
    delays.sort()
    runs = sum(len(times) for times in inferences.values())
    print(
        f"{len(arrivals)} traces over {args.seconds} s ({args.rate}/s, {args.tools} tools, "
        f"debounce {settings.LEARNING_REFRESH_DEBOUNCE_SECONDS} s, {connection.vendor}): "
        f"delay to inferred contract median {statistics.median(delays):.1f} s, "
        f"p95 {delays[int(len(delays) * 0.95)]:.1f} s, max {delays[-1]:.1f} s; "
        f"{runs} refreshes; {missed} traces never inferred"
    )


if __name__ == "__main__":
    main()
