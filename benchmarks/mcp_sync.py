"""Syncing an MCP server that declares 1,000 tools: the first sync, an unchanged resync, and
the bulk floor the first sync is measured against.

    .venv/bin/python benchmarks/mcp_sync.py [--tools 1000] [--rounds 3] [--memory]
        [--database registry_bench_mcp] [--redis-db N]

Uses its own database (``--database``, recreated) on the PostgreSQL of DATABASE_URL's host,
and with ``--redis-db`` Redis database N as the broker (the cache: the next one, as the
settings derive it) instead of what the environment names. The server is the tests' stand-in
(``sources/tests/standin_server.py``) over stdio, declaring generated tools; the figures are
wall time (listing included), SQL queries, and with ``--memory`` the peak of Python memory
allocated during the sync (tracemalloc, which slows Python down: times of that run are not
comparable), for the first sync (every tool a new_tool proposal), an unchanged resync (no write
but the server's record) and, on a server whose tools were all approved, a resync where each
changed its description (every tool a change proposal).

The bulk floor is what the database needs for the first sync's rows alone: copies of the tools,
versions, tickets, audit entries and declarations it wrote (under other names), inserted with
``bulk_create`` in one transaction, with no listing, no judgement and no sync logic. Each round
syncs a server of its own and measures the floor of its rows right after; the figures are the
medians of the rounds, so the ratio holds on a busy machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measured(run: Callable[[], Any], *, memory: bool) -> tuple[float, int, float, Any]:
    """Seconds, SQL queries and peak Python MB (NaN without ``memory``) of ``run()``, and what
    it returned."""
    from django.db import connection

    queries: list[str] = []
    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    with connection.execute_wrapper(
        lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)
    ):
        result = run()
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if memory else float("nan")
    tracemalloc.stop()
    return elapsed, len(queries), peak, result


def checked(run: Callable[[], Any], *, memory: bool) -> tuple[float, int, float]:
    """``measured``, and the sync it measured (if any) went through."""
    elapsed, queries, peak, report = measured(run, memory=memory)
    assert report is None or report.outcome == "ok", report.error
    return elapsed, queries, peak


def floor_rows(server: Any, name: str) -> Callable[[], None]:
    """A function inserting copies of every row the first sync of ``server`` wrote (its tools
    renamed ``<name>.*``, on a server ``name`` of their own), read beforehand."""
    from django.db import transaction

    from registry.models import ContractVersion, Tool
    from reviews.models import AuditEntry, ReviewTicket
    from sources.models import DeclaredTool, McpServer

    def copied(rows: list[Any], **changes: Callable[[Any], Any]) -> list[Any]:
        for row in rows:
            row.pk = None
            for name, change in changes.items():
                setattr(row, name, change(row))
        return rows

    declared = list(DeclaredTool.objects.filter(server=server).order_by("pk"))
    tool_ids = [row.tool_id for row in declared]
    tools = list(Tool.objects.filter(pk__in=tool_ids).order_by("pk"))
    versions = list(ContractVersion.objects.filter(tool_id__in=tool_ids).order_by("pk"))
    tickets = list(ReviewTicket.objects.filter(tool_id__in=tool_ids).order_by("pk"))
    audits = list(AuditEntry.objects.filter(tool_id__in=tool_ids).order_by("pk"))
    floor = McpServer.objects.create(
        name=name, transport=McpServer.Transport.STDIO, command=["true"]
    )

    def insert() -> None:
        # Each copy's references point at the copies of what it referred to.
        tool_of = {tool.pk: tool for tool in tools}
        version_of = {version.pk: version for version in versions}
        ticket_of = {ticket.pk: ticket for ticket in tickets}
        with transaction.atomic():
            copied(tools, name=lambda tool: f"{name}.{tool.name.split('.', 1)[1]}")
            for tool in tools:
                tool.export_name = tool.name.replace(".", "__")
            Tool.objects.bulk_create(tools)
            ContractVersion.objects.bulk_create(
                copied(versions, tool=lambda version: tool_of[version.tool_id])
            )
            ReviewTicket.objects.bulk_create(
                copied(
                    tickets,
                    tool=lambda ticket: tool_of[ticket.tool_id],
                    proposed=lambda ticket: version_of[ticket.proposed_id],
                )
            )
            AuditEntry.objects.bulk_create(
                copied(
                    audits,
                    tool=lambda entry: tool_of[entry.tool_id],
                    ticket=lambda entry: ticket_of[entry.ticket_id],
                    version=lambda entry: version_of[entry.version_id],
                )
            )
            DeclaredTool.objects.bulk_create(
                copied(
                    declared,
                    server=lambda row: floor,
                    tool=lambda row: tool_of[row.tool_id],
                    ticket=lambda row: ticket_of[row.ticket_id],
                )
            )

    return insert


def definitions(count: int, words: str) -> list[dict[str, Any]]:
    """The stand-in's generated tools, their descriptions ending in ``words``."""
    return [
        {
            "name": f"tool_{index}",
            "description": f"Look up record {index} {words}.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
        for index in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="medians of this many rounds")
    parser.add_argument("--memory", action="store_true", help="trace Python allocations")
    parser.add_argument("--database", default="registry_bench_mcp")
    parser.add_argument("--redis-db", type=int, help="the broker's; the cache: +1")
    args = parser.parse_args()

    from benchmarks import database

    redis = (
        {} if args.redis_db is None else {"REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}"}
    )
    # Every tool in the first sync, as an operator raising the cap on new tools would.
    database.django_on_fresh_database(
        args.database,
        MCP_MAX_TOOLS=str(args.tools),
        MCP_MAX_NEW_TOOLS_PER_SYNC=str(args.tools),
        **redis,
    )
    from reviews.models import ReviewTicket
    from sources.services import mcp_server_add, mcp_server_sync

    runs = ("first sync", "unchanged resync", "bulk floor", "changed resync")
    figures: dict[str, list[tuple[float, int, float]]] = {run: [] for run in runs}
    with tempfile.TemporaryDirectory() as tmp:
        standin = ROOT / "sources/tests/standin_server.py"
        # Each round a server of its own (its tools all new), then the floor of its rows, back
        # to back, so both meet the same load on a shared machine; then every tool changed.
        for round_ in range(args.rounds):
            spec = Path(tmp) / f"tools{round_}.json"
            spec.write_text(json.dumps(definitions(args.tools, "by its id")))
            server = mcp_server_add(
                name=f"bench{round_}", command=[sys.executable, str(standin), str(spec)]
            )
            for run in runs[:3]:
                if run == "bulk floor":
                    measure = floor_rows(server, f"floor{round_}")
                else:
                    measure = functools.partial(mcp_server_sync, server=server)
                figures[run].append(checked(measure, memory=args.memory))
            # The same tools approved on another server (trust on first use, not measured),
            # then each changed: every tool a change proposal.
            spec = Path(tmp) / f"approved{round_}.json"
            spec.write_text(json.dumps(definitions(args.tools, "by its id")))
            approved = mcp_server_add(
                name=f"approved{round_}", command=[sys.executable, str(standin), str(spec)]
            )
            mcp_server_sync(server=approved, approve=True)
            spec.write_text(json.dumps(definitions(args.tools, "by its id, newest first")))
            measure = functools.partial(mcp_server_sync, server=approved)
            figures["changed resync"].append(checked(measure, memory=args.memory))
        tickets = ReviewTicket.objects.count()
    print(
        f"MCP server with {args.tools:,} tools over stdio (PostgreSQL), "
        f"medians of {args.rounds} rounds; {tickets:,} tickets in the end"
    )
    print(f"{'run':<18} {'seconds':>8} {'queries':>8} {'peak MB':>8}")
    median = {run: statistics.median(row[0] for row in figures[run]) for run in runs}
    for run in runs:
        queries = max(row[1] for row in figures[run])
        peak = max(row[2] for row in figures[run])
        print(f"{run:<18} {median[run]:>8.2f} {queries:>8,} {peak:>8.1f}")
    first, resync, floor, _changed = (median[run] for run in runs)
    print(f"first sync / bulk floor: {first / floor:.1f}x (target: within 5x)")
    # The resync is the listing and the server's record: what the first sync spends on
    # judging and writing is the difference.
    print(f"(first sync - unchanged resync) / bulk floor: {(first - resync) / floor:.1f}x")


if __name__ == "__main__":
    main()
