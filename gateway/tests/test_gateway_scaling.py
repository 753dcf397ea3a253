"""Two gateway processes serve one MCP session: each request of the session goes to the other
process (in turn from the client, then through deploy/nginx.conf's round robin), and the
session's steps, traces and state come out as if one process served it all. The processes
share a throwaway Redis as their cache, as they share one in production."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from api.services import runtime_token_create
from gateway.models import ApplicationSetting
from learning.models import Trace
from registry.models import Application
from sources.services import mcp_server_add, mcp_server_sync
from tests.helpers import database_url
from tests.mcp import STANDIN
from tests.redis_server import free_port, needs_redis_server, redis_server

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
GREET = {
    "name": "greet",
    "description": "Say hello to someone by name.",
    "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
}

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    needs_redis_server,
]


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next of the gateways, in turn, as a proxy's round robin."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.turn = 0
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[self.turn % len(self.ports)]
        self.turn += 1
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def two_gateways():
    with redis_server() as redis:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "CACHE_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "MCP_GATEWAY_TRACE_FLUSH_SECONDS": "0.2",
            "PYTHONUNBUFFERED": "1",
        }
        processes = [
            subprocess.Popen(
                [sys.executable, "manage.py", "mcp_gateway", "--bind", "127.0.0.1:0"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for _ in range(2)
        ]
        try:
            ports = []
            for process in processes:
                line = process.stdout.readline()
                assert "MCP gateway at " in line, line
                ports.append(int(line.split("MCP gateway at ")[1].split("/")[2].split(":")[1]))
            yield ports
        finally:
            for process in processes:
                process.send_signal(signal.SIGINT)
            for process in processes:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()


@pytest.fixture
def nginx_in_front_of(tmp_path):
    """deploy/nginx.conf on a free port, its gateway upstream the given ports; its base URL."""
    started = []

    def start(ports: list[int]) -> str:
        port = free_port()
        servers = "".join(f"server 127.0.0.1:{p};\n        " for p in ports)
        text = (
            (ROOT / "deploy/nginx.conf")
            .read_text()
            .replace("listen 80;", f"listen 127.0.0.1:{port};")
            .replace("server 127.0.0.1:8001;", servers)
            .replace("pid /run/nginx-registry.pid;", f"pid {tmp_path}/nginx.pid;")
            .replace("worker_processes auto;", "worker_processes 1;")
        )
        config = tmp_path / "nginx.conf"
        config.write_text(text)
        process = subprocess.Popen(
            [NGINX, "-c", str(config), "-p", str(tmp_path), "-e", str(tmp_path / "error.log"),
             "-g", "daemon off;"],
        )  # fmt: skip
        started.append(process)
        deadline = time.monotonic() + 10
        while True:
            try:
                httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource")
                return f"http://127.0.0.1:{port}"
            except httpx2.ConnectError:
                assert process.poll() is None and time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.1)

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


def session_through(url: str, token: str, transport: httpx2.AsyncBaseTransport | None = None):
    async def main():
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"}, transport=transport, timeout=30
            ) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            names = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool("acme.greet", {"who": w}) for w in "abcd"]
            return names, results

    return anyio.run(main)


def served(ports: list[int]) -> list[int]:
    return [
        httpx2.get(f"http://127.0.0.1:{port}/healthz").json()["calls"].get("success", 0)
        for port in ports
    ]


def approved_greet(tmp_path) -> str:
    """The stand-in's greet approved for a new application; a tools:call token of it."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([GREET]))
    server = mcp_server_add(name="acme", command=[sys.executable, STANDIN, str(tools)])
    mcp_server_sync(server=server, approve=True)
    Application.objects.create(name="assistant", all_tools=True, all_permissions=True)
    _, token = runtime_token_create(
        application_name="assistant", scopes=["tools:call"], name="", expires_at=None
    )
    return token


def assert_one_session_on_both(names, results, ports) -> list[dict]:
    """The four calls of ``session_through`` were one session, numbered in order, and both
    gateway processes served some of them; their ``_meta``."""
    assert names == ["acme.greet"]
    assert [result.structured_content for result in results] == [
        {"echo": {"who": w}} for w in "abcd"
    ]
    metas = [result.meta["tool-contract-registry/gateway"] for result in results]
    assert [meta["step"] for meta in metas] == [0, 1, 2, 3]
    assert len({meta["traceId"] for meta in metas}) == 1
    counts = served(ports)
    assert sum(counts) == 4 and min(counts) >= 1, counts
    return metas


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed")
def test_two_gateway_processes_behind_nginx_serve_one_session(
    two_gateways, nginx_in_front_of, tmp_path
):
    token = approved_greet(tmp_path)
    base = nginx_in_front_of(two_gateways)
    names, results = session_through(f"{base}/mcp/", token)
    assert_one_session_on_both(names, results, two_gateways)
    unauthorized = httpx2.post(f"{base}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert unauthorized.status_code == 401
    assert f'resource_metadata="{base}/.well-known/' in unauthorized.headers["www-authenticate"]


def test_two_gateway_processes_serve_one_session(two_gateways, tmp_path):
    token = approved_greet(tmp_path)
    url = f"http://127.0.0.1:{two_gateways[0]}/mcp/"
    names, results = session_through(url, token, transport=Alternating(two_gateways))
    metas = assert_one_session_on_both(names, results, two_gateways)
    deadline = time.monotonic() + 20
    while Trace.objects.count() < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    traces = Trace.objects.order_by("step")
    assert [(t.trace_id, t.step, t.args["who"]) for t in traces] == [
        (metas[0]["traceId"], step, w) for step, w in enumerate("abcd")
    ]


def test_a_cancellation_sent_to_the_other_process_cancels_the_call(two_gateways, tmp_path):
    token = approved_greet(tmp_path)
    first, second = (f"http://127.0.0.1:{port}/mcp/" for port in two_gateways)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
        "Mcp-Session-Id": "one-session",
    }
    slow = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "acme.greet", "arguments": {"who": "Ada", "sleep_ms": 30000}},
    }
    calls = tools_calls(tmp_path)

    async def main():
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            answers = []

            async def call() -> None:
                answers.append(await http.post(first, json=slow))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                with anyio.fail_after(30):
                    while not calls():  # the stand-in has the call
                        await anyio.sleep(0.05)
                cancel = {"requestId": 3, "reason": "stop"}
                await http.post(
                    second,
                    json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel},
                )
                started = time.monotonic()
            return answers[0], time.monotonic() - started

    answer, waited = anyio.run(main)
    text = answer.json()["result"]["content"][0]["text"]
    assert text.startswith("Refused (cancelled): the client cancelled this call of acme.greet")
    assert waited < 20  # not the 30 s the stand-in would have slept


def test_an_applications_calls_per_minute_are_counted_across_processes(two_gateways, tmp_path):
    token = approved_greet(tmp_path)
    ApplicationSetting.objects.create(
        application=Application.objects.get(name="assistant"), calls_per_minute=3
    )
    url = f"http://127.0.0.1:{two_gateways[0]}/mcp/"
    _, results = session_through(url, token, transport=Alternating(two_gateways))
    assert [result.is_error for result in results] == [False, False, False, True]
    assert "Refused (rate_limit)" in results[3].content[0].text
    assert len(tools_calls(tmp_path)()) == 3


def tools_calls(tmp_path):
    """The calls the stand-in of ``approved_greet`` took, read when called."""
    log = tmp_path / "tools.calls"
    return lambda: log.read_text().splitlines() if log.exists() else []
