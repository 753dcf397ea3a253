"""Listing an MCP server's tools with the official SDK, within bounds.

No Django here: the caller passes the server's transport and the limits. ``server_listing``
initializes a session and pages through ``tools/list`` under one deadline, and stops with
``SyncFailed`` (a sentence for the server's record) when the server cannot be reached, answers
with an error, takes too long, declares more tools than the cap or sends more bytes than the
cap. The bytes are counted where they arrive: the SDK's HTTP client gets a transport that
counts the response bodies, and stdio servers are read by the small transport below (the
SDK's own buffers a line of any length before it parses it). The tools come back as the JSON
objects the server sent, not as the SDK's models, which drop keys they do not know. A stdio
server is started by ``sources/launcher.py``, in a session of its own: the launcher's
environment holds no secret, and as a subreaper it stops everything the server started when the
listing ends.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import httpx2
import mcp_types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, Field

STDIO = "stdio"
HTTP = "http"
SSE = "sse"  # the legacy HTTP+SSE transport (MCP 2024-11-05)
STOP_GRACE_SECONDS = 1.0
DEFAULT_PORTS = {"http": 80, "https": 443}
LAUNCHER = str(Path(__file__).with_name("launcher.py"))
PR_SET_DUMPABLE = 4


def url_allowed(url: str, allowlist: Sequence[str]) -> bool:
    """Whether ``url`` lies under one of the allowlist's entries: scheme, host and port equal
    (a missing port is the scheme's), path under the entry's path. Compared parsed, never as
    text prefixes; a path a server could read as another one is refused outright: dot
    segments, plain or percent-encoded (``/mcp/../private``, ``/mcp/%2e%2e/private``),
    encoded or back slashes, and percent signs left after decoding (double encoding)."""
    try:
        target = urlsplit(url)
        target_port = target.port or DEFAULT_PORTS.get(target.scheme)
    except ValueError:
        return False
    if target.scheme not in DEFAULT_PORTS or not target.hostname:
        return False
    if target.username is not None or target.password is not None:
        return False
    decoded = unquote(target.path)
    if (
        "\\" in decoded
        or "%" in decoded
        or decoded.count("/") != target.path.count("/")
        or any(segment in (".", "..") for segment in decoded.split("/"))
    ):
        return False
    for entry in allowlist:
        try:
            allowed = urlsplit(entry)
            allowed_port = allowed.port or DEFAULT_PORTS.get(allowed.scheme)
        except ValueError:
            continue
        if (target.scheme, target.hostname, target_port) != (
            allowed.scheme,
            allowed.hostname,
            allowed_port,
        ):
            continue
        path = allowed.path.rstrip("/")
        if not path or decoded == path or decoded.startswith(path + "/"):
            return True
    return False


STDERR_KEPT_BYTES = 4096  # of a stdio server's stderr, the end: enough for a traceback's last lines
STDERR_LINES = 8
STDERR_LINE_CHARS = 300


class RawTools(BaseModel):
    """A ``tools/list`` result whose tools stay the JSON objects the server sent: the pin is
    computed over each exactly as it was sent (the SDK's ``Tool`` drops keys it does not know)."""

    tools: list[dict[str, Any]]
    next_cursor: str | None = Field(default=None, alias="nextCursor")


@dataclass(frozen=True)
class Limits:
    timeout: float  # seconds for the whole listing, connection included
    max_tools: int
    max_bytes: int  # bytes read from the server in all


class SyncFailed(Exception):
    """The server could not be listed; the message says why, for the server's record."""


class _Budget:
    """The bytes a listing may still read, and the addresses it may send to; past either the
    listing fails, and says so (recorded here too: the SDK may wrap the exception)."""

    def __init__(self, limit: int, allowlist: Sequence[str]) -> None:
        self.limit = limit
        self.read = 0
        self.exceeded = False
        self.allowlist = list(allowlist)
        self.refused = ""

    def refuse(self, reason: str) -> None:
        self.refused = self.refused or reason
        raise SyncFailed(reason)

    def spend(self, size: int) -> None:
        self.read += size
        if self.read > self.limit:
            self.exceeded = True
            raise SyncFailed(f"the server sent more than {self.limit:,} bytes")


class _StderrTail:
    """The last bytes a stdio server wrote to stderr: why it failed to start, as it says."""

    def __init__(self, limit: int = STDERR_KEPT_BYTES) -> None:
        self.limit = limit
        self.kept = bytearray()

    def add(self, chunk: bytes) -> None:
        self.kept += chunk
        del self.kept[: max(0, len(self.kept) - self.limit)]

    def lines(self) -> list[str]:
        text = self.kept.decode("utf-8", "replace")
        lines = [line.rstrip()[:STDERR_LINE_CHARS] for line in text.splitlines() if line.strip()]
        return lines[-STDERR_LINES:]


@dataclass(frozen=True)
class Listing:
    """What one listing read: the server's ``serverInfo`` (``name``, ``version``, as sent) and
    its tools, each as sent."""

    server_info: dict[str, Any]
    tools: list[dict[str, Any]]


def server_listing(
    *,
    transport: str,
    command: Sequence[str] = (),
    url: str = "",
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits,
    allowlist: Sequence[str] | None = None,
) -> Listing:
    """Every tool the server declares, each the JSON object exactly as ``tools/list`` sent it
    (every key kept, also those no SDK model knows: the pin covers them). ``env`` adds
    variables to a stdio server's environment. When a stdio server fails, the reason ends with
    the last lines it wrote to stderr.

    Over HTTP every request must go to an address under ``allowlist`` (by default the URL's
    origin), and no redirect is followed: a 3xx answer fails the listing, so the headers
    never travel on to the address it names, whatever that is.
    """
    if allowlist is None:
        origin = urlsplit(url)
        allowlist = [f"{origin.scheme}://{origin.netloc}"]
    budget = _Budget(limits.max_bytes, allowlist)
    tail = _StderrTail()
    try:
        return anyio.run(
            _list, transport, list(command), url, dict(headers or {}), dict(env or {}), limits,
            budget, tail,
        )  # fmt: skip
    except SyncFailed as exc:
        raise SyncFailed(_with_stderr(str(exc), tail)) from None
    except BaseException as exc:  # noqa: BLE001 - any failure of the server is a failed sync
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise SyncFailed(_with_stderr(_reason(exc, budget, limits), tail)) from None


def _with_stderr(reason: str, tail: _StderrTail) -> str:
    lines = tail.lines()
    if not lines:
        return reason
    return reason + "\nThe server's stderr ended with:\n" + "\n".join(lines)


async def _list(
    transport: str,
    command: list[str],
    url: str,
    headers: dict[str, str],
    env: dict[str, str],
    limits: Limits,
    budget: _Budget,
    tail: _StderrTail,
) -> Listing:
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(limits.timeout):
        async with (
            _connect(transport, command, url, headers, env, limits, budget, tail) as (read, write),
            ClientSession(read, write) as session,
        ):
            initialized = await session.initialize()
            info = initialized.server_info
            server_info = {"name": str(info.name)[:200], "version": str(info.version)[:100]}
            cursor: str | None = None
            for _ in range(limits.max_tools + 1):  # a cursor that never ends is bounded too
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                # The result as the server sent it: the SDK still checks it against the
                # negotiated protocol's schema, but no model drops a key it does not know.
                result = await session.send_request(
                    mcp_types.ListToolsRequest(params=params), RawTools
                )
                tools += result.tools
                if len(tools) > limits.max_tools:
                    raise SyncFailed(f"the server declares more than {limits.max_tools:,} tools")
                cursor = result.next_cursor
                if not cursor:
                    return Listing(server_info=server_info, tools=tools)
    raise SyncFailed(f"the server's tool list did not end after {limits.max_tools:,} pages")


def _reason(exc: BaseException, budget: _Budget, limits: Limits) -> str:
    if budget.refused:
        return budget.refused
    if budget.exceeded:
        return f"the server sent more than {limits.max_bytes:,} bytes"
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, SyncFailed):
            return str(leaf)
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return f"no complete answer within {limits.timeout:g} s"
    for leaf in leaves:
        if isinstance(leaf, MCPError) and leaf.code == mcp_types.CONNECTION_CLOSED:
            return "the server closed the connection before it answered (it may have exited)"
        if isinstance(leaf, MCPError):
            return f"the server answered with an error: {leaf.error.message[:300]}"
    leaf = leaves[0]
    if isinstance(leaf, FileNotFoundError | PermissionError):
        return f"cannot start the server: {leaf}"
    if isinstance(leaf, httpx2.HTTPError):
        return f"cannot reach the server: {type(leaf).__name__}: {str(leaf)[:300]}"
    return f"{type(leaf).__name__}: {str(leaf)[:300]}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@asynccontextmanager
async def _connect(
    transport: str,
    command: list[str],
    url: str,
    headers: dict[str, str],
    env: dict[str, str],
    limits: Limits,
    budget: _Budget,
    tail: _StderrTail,
) -> AsyncIterator[Any]:
    if transport == STDIO:
        async with _stdio(command, env, budget, tail) as streams:
            yield streams
    elif transport == HTTP:
        client = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(limits.timeout),
            follow_redirects=False,
            transport=_CountingTransport(httpx2.AsyncHTTPTransport(), budget),
        )
        async with (
            client,
            streamable_http_client(
                url, http_client=client, max_sse_event_size=limits.max_bytes
            ) as streams,
        ):
            yield streams
    elif transport == SSE:

        def counted_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return httpx2.AsyncClient(
                headers=headers,
                timeout=timeout,
                auth=auth,
                follow_redirects=False,
                transport=_CountingTransport(httpx2.AsyncHTTPTransport(), budget),
            )

        async with sse_client(
            url,
            headers=headers,
            timeout=limits.timeout,
            sse_read_timeout=limits.timeout,
            httpx_client_factory=counted_client,
        ) as streams:
            yield streams
    else:
        raise SyncFailed(f"unknown transport {transport!r}")


class _CountingTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # Here, below the SDK and httpx's redirect handling, every request passes: one that
        # leaves the allowlist (a redirect, an SSE endpoint elsewhere) is never sent.
        if not url_allowed(str(request.url), self.budget.allowlist):
            self.budget.refuse(
                f"the server sent the client to {str(request.url)[:200]}, which is not under "
                "MCP_URL_ALLOWLIST; nothing was sent there"
            )
        response = await self.inner.handle_async_request(request)
        if 300 <= response.status_code < 400:
            await response.aclose()
            location = response.headers.get("location", "")[:200]
            self.budget.refuse(
                f"the server answered {response.status_code}, a redirect to {location or '?'}; "
                "no redirect is followed (the headers would go with it): give the server "
                "the address it redirects to"
            )
        response.stream = _CountedStream(response.stream, self.budget)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CountedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.budget.spend(len(chunk))
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def _not_readable() -> None:
    """Make this process's /proc files (its environment among them) unreadable to other
    processes of the same user that are not root: a server could otherwise read the secrets of
    the process that started it through its grandparent's pid. Process-wide and lasting; it
    also turns off core dumps and debuggers attaching as the same user."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


@asynccontextmanager
async def _stdio(
    command: list[str], env: dict[str, str], budget: _Budget, tail: _StderrTail
) -> AsyncIterator[Any]:
    if not command:
        raise SyncFailed("no command to start the server with")
    environment = get_default_environment()
    # Found here, with the server's PATH, so that a missing program is said as such rather
    # than as a launcher that exited.
    program = shutil.which(command[0], path=environment.get("PATH"))
    if program is None:
        raise SyncFailed(f"cannot start the server: no executable program {command[0][:200]!r}")
    _not_readable()
    # The launcher, not this process, is the server's parent: its environment is the small
    # one the server gets, and as a subreaper it stops whatever the server started.
    process = await anyio.open_process(
        [sys.executable, "-I", LAUNCHER, program, *command[1:]],
        env={**environment, **env},
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with incoming_writer:
            async for chunk in process.stdout:
                budget.spend(len(chunk))
                searched = len(buffer)
                buffer += chunk
                while (end := buffer.find(b"\n", searched)) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    searched = 0
                    if line.strip():
                        await incoming_writer.send(_message(line))

    def _message(line: bytes) -> SessionMessage:
        try:
            parsed = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            # The SDK would log it and wait for an answer that never comes: say it now.
            raise SyncFailed(
                f"the server sent a message that is not JSON-RPC: {exc}"[:500]
            ) from None
        return SessionMessage(parsed)

    async def drain_stderr() -> None:
        # Read all along, so a chatty server never blocks on a full pipe; only the tail is kept.
        assert process.stderr is not None
        async for chunk in process.stderr:
            tail.add(chunk)

    async def write() -> None:
        assert process.stdin is not None
        async with outgoing_reader:
            async for message in outgoing_reader:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(text.encode() + b"\n")

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            tasks.start_soon(drain_stderr)
            try:
                yield incoming, outgoing
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, tail)


async def _stop(process: anyio.abc.Process, tail: _StderrTail) -> None:
    """Close stdin and give the server a moment (keeping what it still writes to stderr); then
    ask the launcher to stop (it kills every process the server started, wherever they went),
    and only if it does not, kill the whole process group."""
    if process.stdin is not None:
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_GRACE_SECONDS):
        if process.stderr is not None:
            async for chunk in process.stderr:
                tail.add(chunk)
        await process.wait()
    if process.returncode is None:
        try:
            os.kill(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        with anyio.move_on_after(STOP_GRACE_SECONDS * 5):
            await process.wait()
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    with anyio.move_on_after(STOP_GRACE_SECONDS):
        await process.wait()
    await process.aclose()
