"""Calls through the MCP gateway against direct calls to the same upstream, in one run.

    .venv/bin/python benchmarks/gateway.py [--sessions 20] [--calls 50] [--redis-db 14]

Uses its own database (``registry_bench_gateway``, recreated) on the PostgreSQL of
DATABASE_URL's host and the cache on ``redis://127.0.0.1:6379/<--redis-db>``, as production
runs. The upstream is an MCP server over streamable HTTP started here (one ``echo`` tool,
the SDK's low-level server in stateless mode under uvicorn); the gateway is one
``manage.py mcp_gateway`` process. Each of ``--sessions`` concurrent MCP sessions (the SDK's
client, one asyncio loop) makes ``--calls`` calls one after another, first directly to the
upstream, then through the gateway. Printed: calls/s, p50 and p99 latency per call, and the
gateway process's resident memory before and after (divided by the sessions: what one session
costs it). The client shares the machine with both servers: the figures are for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run_sessions(url: str, token: str, tool: str, sessions: int, calls: int) -> list[float]:
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []

    async def one(index: int) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            for call in range(calls):
                started = time.perf_counter()
                result = await client.call_tool(tool, {"message": f"s{index} c{call}"})
                latencies.append(time.perf_counter() - started)
                assert not result.is_error, result.content

    async with anyio.create_task_group() as tasks:
        for index in range(sessions):
            tasks.start_soon(one, index)
    return latencies


def report(label: str, latencies: list[float], elapsed: float) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    print(f"{label:<10} {len(ordered):>7,} {len(ordered) / elapsed:>9,.0f} {p50:>8.2f} {p99:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--redis-db", type=int, default=14)
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
        gateway = subprocess.Popen(
            [sys.executable, "manage.py", "mcp_gateway", "--bind", "127.0.0.1:0"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert gateway.stdout is not None
        line = gateway.stdout.readline()
        gateway_url = line.split("MCP gateway at ")[1].split()[0]
        # One call each way first: processes started, sessions pooled, pins listed.
        anyio.run(run_sessions, upstream_url, "", "echo", 1, 1)
        anyio.run(run_sessions, gateway_url, token, "bench.echo", 1, 1)
        before = rss_mb(gateway.pid)

        print(
            f"{args.sessions} concurrent MCP sessions x {args.calls} calls, streamable HTTP, "
            "SDK client"
        )
        print(f"{'':<10} {'calls':>7} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
        results = {}
        for label, url, key, tool in (
            ("direct", upstream_url, "", "echo"),
            ("gateway", gateway_url, token, "bench.echo"),
        ):
            started = time.perf_counter()
            latencies = anyio.run(run_sessions, url, key, tool, args.sessions, args.calls)
            elapsed = time.perf_counter() - started
            results[label] = (latencies, elapsed)
            report(label, latencies, elapsed)
        after = rss_mb(gateway.pid)
        direct, through = results["direct"], results["gateway"]
        ratio = (len(through[0]) / through[1]) / (len(direct[0]) / direct[1])
        added = (statistics.median(through[0]) - statistics.median(direct[0])) * 1000
        print(f"gateway rate / direct rate: {ratio:.2f}; added at p50: {added:.2f} ms")
        print(
            f"gateway RSS: {before:.1f} MB before, {after:.1f} MB after "
            f"({(after - before) * 1024 / args.sessions:.0f} KB per session)"
        )
        time.sleep(2)  # the recorder's last batch
        from learning.models import Trace

        print(f"traces stored: {Trace.objects.count():,} of {len(through[0]) + 1:,} calls")
        print(json.dumps({"direct_calls": len(direct[0]), "gateway_calls": len(through[0])}))
    finally:
        for process in (gateway, upstream):
            if process is not None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()


if __name__ == "__main__":
    main()
