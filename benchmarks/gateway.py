"""Calls through the MCP gateway against direct calls to the same upstream, in one run.

    .venv/bin/python benchmarks/gateway.py [--sessions 20] [--calls 50] [--many 100]
        [--many-calls 10] [--rounds 2] [--redis-db 14] [--modern] [--profile FILE]

Uses its own database (``registry_bench_gateway``, recreated) on the PostgreSQL of
DATABASE_URL's host and the cache on ``redis://127.0.0.1:6379/<--redis-db>``, as production
runs. The upstream is an MCP server over streamable HTTP started here (one ``echo`` tool,
the SDK's low-level server in stateless mode under uvicorn); the gateway is one
``manage.py mcp_gateway`` process. Three loads, each run directly against the upstream and
through the gateway, the two doors alternating ``--rounds`` times so that a change in the
machine's load during the run falls on both: one session making ``--calls`` calls one after
another (what the gateway adds to one call), ``--sessions`` concurrent sessions of ``--calls``
calls, and ``--many`` concurrent sessions of ``--many-calls`` calls. Each session is the SDK's
``ClientSession`` (the 2025 protocol's handshake), or with ``--modern`` its ``Client`` (MCP
2026-07-28, one exchange per request), all on one asyncio loop. Printed per load and door:
calls/s, p50 and p99 latency per call, and the CPU time per call of the upstream process, the
gateway process (its recorder, which stores each call as a trace, included) and the client;
then the gateway's rate over the direct rate and the latency it adds at p50, and the gateway's
resident memory before and after the many sessions (divided by them: what one session costs
it). The client shares the machine with the servers: the figures are for comparison within one
run. ``--profile FILE`` runs the gateway under cProfile, timed by its event loop's CPU, and
prints the top of it.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# The gateway's command under cProfile, timed by the CPU time of its event loop's thread (not
# the wall clock, which on a busy machine counts the waits for a core as the code's).
PROFILE = """
import cProfile, runpy, sys, time
out, sys.argv = sys.argv[1], sys.argv[2:]
profiler = cProfile.Profile(time.thread_time)
profiler.enable()
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""


def serve_upstream(port: int) -> None:
    import mcp_types as types
    import uvicorn
    from mcp.server.lowlevel import Server

    echo = types.Tool(
        name="echo",
        description="Echo the message back.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "maxLength": 200}},
            "required": ["message"],
        },
    )

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[echo])

    async def call_tool(ctx, params):
        message = (params.arguments or {}).get("message", "")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=message)],
            structured_content={"message": message},
        )

    server = Server("bench-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def quiet_clients() -> None:
    """The clients' SDK and HTTP library log each request at INFO under Django's logging: a
    line per call written by the client on the cores the servers share, which the gateway
    process turns off for itself (``QUIET_LOGGERS``) and neither door is about."""
    from gateway.management.commands.mcp_gateway import QUIET_LOGGERS

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb(pid: int) -> float:
    return rss_mb(pid, "VmHWM")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) of a process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_sessions(
    url: str, token: str, tool: str, sessions: int, calls: int, modern: bool = False
) -> list[float]:
    import anyio
    import httpx2
    from mcp.client.client import Client
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []

    @asynccontextmanager
    async def connected(http: httpx2.AsyncClient) -> AsyncIterator[Any]:
        if modern:  # the SDK's Client: MCP 2026-07-28, one exchange per request
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client
            return
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session

    async def one(index: int) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            connected(http) as client,
        ):
            for call in range(calls):
                started = time.perf_counter()
                result = await client.call_tool(tool, {"message": f"s{index} c{call}"})
                latencies.append(time.perf_counter() - started)
                assert not result.is_error, result.content

    async with anyio.create_task_group() as tasks:
        for index in range(sessions):
            tasks.start_soon(one, index)
    return latencies


@dataclass
class Door:
    """One door's figures over the rounds of one load."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000

    def cpu_ms(self, process: str) -> float:
        return self.cpu.get(process, 0.0) / len(self.latencies) * 1000


def measure(
    doors: dict[str, tuple[str, str, str]],
    pids: dict[str, int],
    sessions: int,
    calls: int,
    rounds: int,
    modern: bool = False,
) -> dict[str, Door]:
    import anyio

    figures = {label: Door() for label in doors}
    for _ in range(rounds):
        for label, (url, token, tool) in doors.items():
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            client_before = own_cpu_seconds()
            started = time.perf_counter()
            latencies = anyio.run(run_sessions, url, token, tool, sessions, calls, modern)
            door = figures[label]
            door.elapsed += time.perf_counter() - started
            door.latencies += latencies
            for name, pid in pids.items():
                door.cpu[name] = door.cpu.get(name, 0.0) + cpu_seconds(pid) - before[name]
            door.cpu["client"] = door.cpu.get("client", 0.0) + own_cpu_seconds() - client_before
    return figures


def report(title: str, figures: dict[str, Door]) -> None:
    print(f"\n{title}")
    print(
        f"{'':<9} {'calls':>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}   CPU ms/call: "
        f"{'upstream':>8} {'gateway':>8} {'client':>8}"
    )
    for label, door in figures.items():
        print(
            f"{label:<9} {len(door.latencies):>7,} {door.rate:>8,.0f} {door.p50:>8.2f} "
            f"{door.p99:>8.2f}                {door.cpu_ms('upstream'):>8.2f} "
            f"{door.cpu_ms('gateway'):>8.2f} {door.cpu_ms('client'):>8.2f}"
        )
    direct, through = figures["direct"], figures["gateway"]
    print(
        f"gateway rate / direct rate: {through.rate / direct.rate:.2f}; "
        f"added at p50: {through.p50 - direct.p50:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--many", type=int, default=100)
    parser.add_argument("--many-calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument(
        "--modern",
        action="store_true",
        help="clients speak MCP 2026-07-28 (the SDK's Client) rather than the 2025 protocol's "
        "ClientSession, on both doors",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="run the gateway under cProfile (the CPU time of its event loop's thread), write "
        "the profile to FILE and print where that time went",
    )
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return

    import anyio

    upstream_port = free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream", str(upstream_port)], cwd=ROOT
    )
    gateway = None
    try:
        wait_listening(upstream_port)
        from benchmarks import database

        database.django_on_fresh_database(
            "registry_bench_gateway",
            CACHE_REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
            MCP_URL_ALLOWLIST=upstream_url,
        )
        quiet_clients()
        from api.services import runtime_token_create
        from registry.models import Application
        from sources.services import mcp_server_add, mcp_server_sync

        server = mcp_server_add(name="bench", url=upstream_url)
        sync = mcp_server_sync(server=server, approve=True)
        assert sync.published == ["bench.echo"], sync
        Application.objects.create(name="bench", all_tools=True, all_permissions=True)
        _, token = runtime_token_create(
            application_name="bench", scopes=["tools:call"], name="", expires_at=None
        )
        profiler = ["-c", PROFILE, args.profile] if args.profile else []
        gateway = subprocess.Popen(
            [sys.executable, *profiler, "manage.py", "mcp_gateway", "--bind", "127.0.0.1:0"],
            cwd=ROOT,
            # The many sessions' calls at once: past the default concurrency of one application;
            # and past the default calls per minute, counted all the same.
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "MCP_GATEWAY_APPLICATION_CONCURRENCY": str(max(args.many, args.sessions) * 2),
                "MCP_GATEWAY_CALLS_PER_MINUTE": str(10**9),
            },
            stdout=subprocess.PIPE,
            text=True,
        )
        assert gateway.stdout is not None
        line = gateway.stdout.readline()
        gateway_url = line.split("MCP gateway at ")[1].split()[0]
        # One call each way first: processes started, sessions pooled, pins listed.
        anyio.run(run_sessions, upstream_url, "", "echo", 1, 1)
        anyio.run(run_sessions, gateway_url, token, "bench.echo", 1, 1)
        doors = {
            "direct": (upstream_url, "", "echo"),
            "gateway": (gateway_url, token, "bench.echo"),
        }
        pids = {"upstream": upstream.pid, "gateway": gateway.pid}
        total = 1  # the warm-up call through the gateway
        for title, sessions, calls in (
            (f"1 MCP session x {args.calls} calls one after another", 1, args.calls),
            (
                f"{args.sessions} concurrent sessions x {args.calls} calls",
                args.sessions,
                args.calls,
            ),
        ):
            figures = measure(doors, pids, sessions, calls, args.rounds, args.modern)
            report(f"{title}, {args.rounds} rounds", figures)
            total += len(figures["gateway"].latencies)
        before = rss_mb(gateway.pid)
        figures = measure(doors, pids, args.many, args.many_calls, args.rounds, args.modern)
        after = rss_mb(gateway.pid)
        report(
            f"{args.many} concurrent sessions x {args.many_calls} calls, {args.rounds} rounds",
            figures,
        )
        total += len(figures["gateway"].latencies)
        print(
            f"gateway RSS: {before:.1f} MB before the {args.many} sessions, {after:.1f} MB after "
            f"({(after - before) * 1024 / args.many:.0f} KB per session); peak "
            f"{peak_mb(gateway.pid):.1f} MB"
        )
        from learning.models import Trace

        deadline = time.monotonic() + 60  # the recorder's last batches
        while Trace.objects.count() < total and time.monotonic() < deadline:
            time.sleep(1)
        print(f"traces stored: {Trace.objects.count():,} of {total:,} calls through the gateway")
    finally:
        for process in (gateway, upstream):
            if process is not None:
                # SIGINT: the gateway's command returns, so a profiler around it writes its file.
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
    if args.profile and Path(args.profile).exists():
        import pstats

        print(f"\nthe gateway's event loop, by own time (cProfile, {args.profile}):")
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
