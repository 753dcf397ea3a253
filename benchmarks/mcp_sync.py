"""Syncing an MCP server that declares 1,000 tools: the first sync, then an unchanged resync.

    .venv/bin/python benchmarks/mcp_sync.py [--tools 1000] [--memory]

Uses its own database (``registry_bench_mcp``, recreated) on the PostgreSQL of DATABASE_URL's
host. The server is the tests' stand-in (``sources/tests/standin_server.py``) over stdio,
declaring generated tools; the figures are wall time (listing included), SQL queries, and with
``--memory`` the peak of Python memory allocated during the sync (tracemalloc, which slows
Python down: times of that run are not comparable), for the first sync (every tool a
new_tool proposal) and an unchanged resync (no write but the server's record).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--memory", action="store_true", help="trace Python allocations")
    args = parser.parse_args()

    from benchmarks import database

    # Every tool in the first sync, as an operator raising the cap on new tools would.
    database.django_on_fresh_database(
        "registry_bench_mcp",
        MCP_MAX_TOOLS=str(args.tools),
        MCP_MAX_NEW_TOOLS_PER_SYNC=str(args.tools),
    )
    from django.db import connection

    from reviews.models import ReviewTicket
    from sources.services import mcp_server_add, mcp_server_sync

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "tools.json"
        spec.write_text(json.dumps({"tools": args.tools}))
        standin = ROOT / "sources/tests/standin_server.py"
        server = mcp_server_add(name="bench", command=[sys.executable, str(standin), str(spec)])
        print(f"MCP server with {args.tools:,} tools over stdio (PostgreSQL)")
        print(f"{'sync':<18} {'seconds':>8} {'queries':>8} {'peak MB':>8} {'tickets':>8}")
        for label in ("first", "unchanged resync"):
            queries = []
            if args.memory:
                tracemalloc.start()
            started = time.perf_counter()
            with connection.execute_wrapper(
                lambda run, sql, *rest, seen=queries: seen.append(sql) or run(sql, *rest)
            ):
                report = mcp_server_sync(server=server)
            elapsed = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] / 2**20 if args.memory else float("nan")
            tracemalloc.stop()
            assert report.outcome == "ok", report.error
            print(
                f"{label:<18} {elapsed:>8.2f} {len(queries):>8,} {peak:>8.1f} "
                f"{ReviewTicket.objects.count():>8,}"
            )


if __name__ == "__main__":
    main()
