"""Rendering an application's bundle: the first render against one after a publication.

    .venv/bin/python benchmarks/bundles.py [--tools 1000 10000] [--redis-db 12]

Uses its own database (``registry_bench_bundles``, recreated) on the PostgreSQL of
DATABASE_URL's host, and Redis databases ``--redis-db`` (the broker) and the next (the cache
that holds bundles), both flushed. For each size: an application that sees every tool of a
scaled world; its bundle's first render (every contract and export entry made), then, after one
tool's new version is published, the next render, which makes only that tool's parts and joins
the rest. Prints seconds, the parts made, and the ratio of the two renders.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--redis-db", type=int, default=12)
    args = parser.parse_args()

    from benchmarks import database

    for db in (args.redis_db, args.redis_db + 1):
        subprocess.run(["redis-cli", "-n", str(db), "flushdb"], check=True, capture_output=True)
    database.django_on_fresh_database(
        "registry_bench_bundles",
        REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
        CACHE_REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db + 1}",
    )
    from django.db import connection

    from api import bundles
    from api.services import runtime_token_create
    from demo import scaled_world as world
    from registry.models import Application, Permission, Tool
    from reviews.services import registry_import

    print(f"{'tools':>7} {'first render':>13} {'parts':>7} {'after one change':>17} {'parts':>6}"
          f" {'ratio':>7}")  # fmt: skip
    for size in args.tools:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE registry_tool CASCADE")
        subprocess.run(
            ["redis-cli", "-n", str(args.redis_db + 1), "flushdb"], check=True, capture_output=True
        )
        registry = world.registry(size)
        with tempfile.TemporaryDirectory() as tmp:
            database.import_approved(registry, tmp)
        application, _ = Application.objects.get_or_create(name="bench", all_tools=True)
        application.allowed_permissions.set(Permission.objects.all())
        runtime_token_create(application_name="bench", scopes=["contracts:read"])

        first, first_parts = render(bundles, application.pk)
        document = dict(next(tool for tool in registry["tools"]))
        document["description"] += " Changed."
        registry_import(data=[document], approve=True)
        assert Tool.objects.get(name=document["name"]).current_version.description.endswith(
            "Changed."
        )
        second, second_parts = render(bundles, application.pk)
        print(f"{size:>7} {first:>12.2f}s {first_parts:>7} {second:>16.2f}s {second_parts:>6}"
              f" {first / second:>6.1f}×")  # fmt: skip


def render(bundles, application_id: int) -> tuple[float, int]:
    """Seconds of one render of the application's bundle, and how many parts it made."""
    made = 0
    original = bundles._Parts.bodies

    def counted(self, *args, **kwargs):
        nonlocal made
        before = self.rendered
        result = original(self, *args, **kwargs)
        made += self.rendered - before
        return result

    bundles._Parts.bodies = counted
    try:
        started = time.perf_counter()
        assert bundles.bundle_render(application_id=application_id) is not None
        return time.perf_counter() - started, made
    finally:
        bundles._Parts.bodies = original


if __name__ == "__main__":
    main()
