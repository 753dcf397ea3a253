"""The gateway's sessions with upstream MCP servers: pooled, restarted, bounded.

No Django here: the caller passes an ``UpstreamSpec`` (transport, command or URL, the header
values read from the server record's environment variables) and the bounds of each call.

Each upstream keeps up to ``size`` sessions, used in turn; each session runs in a task of its
own (the SDK's transports are context managers that must close in the task that opened them),
so a stdio server is one process per session, kept between calls. A session whose server died
or closed the connection is dropped when a call sees it, and the next call starts a new one:
a dead server costs the call in flight, never the gateway.

The live definitions (``tools/list``) are read again when the server says its list changed
(``notifications/tools/list_changed``) and whenever they are older than ``verify_seconds``; the
gateway compares their pins (``registry/pins.py``) with the approved ones before every call.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from registry.pins import definition_hash
from sources.client import LAUNCHER, RawTools

logger = logging.getLogger(__name__)

STDIO = "stdio"
HTTP = "http"
START_TIMEOUT_SECONDS = 30.0
MAX_LIST_PAGES = 100
KEEPALIVE_SECONDS = 2.0


@dataclass(frozen=True)
class UpstreamSpec:
    """How to reach one upstream; equal specs share sessions."""

    name: str
    transport: str
    command: tuple[str, ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # a stdio server's variables beyond the default ones


class UpstreamFailed(Exception):
    """The upstream could not answer this call; the message is for the caller."""


class _UpstreamSession(ClientSession):
    """The SDK's client session without its own check of results against the live output
    schema: the gateway checks them against the approved one and reports what it finds, where
    the SDK would raise and cost the call its result."""

    async def validate_tool_result(self, name: str, result: mcp_types.CallToolResult) -> None:
        return None


@dataclass
class _Connection:
    spec: UpstreamSpec
    on_list_changed: Any
    session: ClientSession | None = None
    error: str = ""
    ready: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)
    dead: bool = False

    async def run(self) -> None:
        try:
            async with (
                _transport(self.spec) as (read, write),
                _UpstreamSession(read, write, message_handler=self._message) as session,
            ):
                await session.initialize()
                self.session = session
                self.ready.set()
                await self.closing.wait()
        except Exception as exc:  # noqa: BLE001 - any failure of a server ends its session
            self.error = _reason(exc)
            logger.info("upstream %s: session ended: %s", self.spec.name, self.error)
        finally:
            self.dead = True
            self.session = None
            self.ready.set()

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.on_list_changed()
        elif isinstance(message, Exception):
            logger.info("upstream %s: transport error: %s", self.spec.name, message)

    def close(self) -> None:
        self.dead = True
        self.closing.set()


@asynccontextmanager
async def _transport(spec: UpstreamSpec) -> AsyncIterator[Any]:
    if spec.transport == STDIO:
        if not spec.command:
            raise UpstreamFailed("no command to start the server with")
        program = shutil.which(spec.command[0], path=get_default_environment().get("PATH"))
        if program is None:
            raise UpstreamFailed(f"no executable program {spec.command[0][:200]!r}")
        # Through the launcher syncs use: its environment holds no secret of the gateway's, and
        # as a subreaper it stops whatever the server started when the session ends.
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-I", LAUNCHER, program, *spec.command[1:]],
            env=dict(spec.env),
        )
        with open("/dev/null", "w") as errlog:  # noqa: PTH123 - the server's stderr, discarded
            async with stdio_client(parameters, errlog=errlog) as streams:
                yield streams
    elif spec.transport == HTTP:
        async with (
            httpx2.AsyncClient(
                headers=dict(spec.headers),
                timeout=httpx2.Timeout(30.0),
                # An idle connection is dropped before the 5 s after which common servers
                # (uvicorn's default) close it: one reused as the server closes it fails with
                # a read error that ends the whole session, every call in flight on it too.
                limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_SECONDS),
            ) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            yield streams
    else:
        raise UpstreamFailed(f"the gateway does not forward over the {spec.transport} transport")


class Upstream:
    """One upstream's sessions and its live definitions."""

    def __init__(
        self, spec: UpstreamSpec, tasks: anyio.abc.TaskGroup, *, size: int, verify_seconds: float
    ) -> None:
        self.spec = spec
        self.tasks = tasks
        self.size = max(1, size)
        self.verify_seconds = verify_seconds
        self.connections: list[_Connection | None] = [None] * self.size
        self.turn = 0
        self.starting = anyio.Lock()
        self.pins: dict[str, str] = {}
        self.listed_at: float | None = None
        self.listing = anyio.Lock()
        self.restarts = 0

    def list_changed(self) -> None:
        self.listed_at = None

    async def _session(self) -> ClientSession:
        slot = self.turn % self.size
        self.turn += 1
        connection = self.connections[slot]
        if connection is not None and not connection.dead and connection.session is not None:
            return connection.session
        async with self.starting:
            connection = self.connections[slot]
            if connection is None or connection.dead:
                if connection is not None:
                    self.restarts += 1
                connection = _Connection(self.spec, self.list_changed)
                self.connections[slot] = connection
                self.tasks.start_soon(connection.run)
            with anyio.move_on_after(START_TIMEOUT_SECONDS):
                await connection.ready.wait()
            if connection.session is None:
                connection.close()
                raise UpstreamFailed(
                    f"cannot start a session with {self.spec.name}: "
                    f"{connection.error or 'no answer in time'}"
                )
            return connection.session

    def _drop(self, session: ClientSession) -> None:
        for connection in self.connections:
            if connection is not None and connection.session is session:
                connection.close()

    async def live_pins(self) -> dict[str, str]:
        """The pin of each tool the server declares now, listed again when stale."""
        fresh = self.listed_at is not None and (
            time.monotonic() - self.listed_at < self.verify_seconds
        )
        if fresh:
            return self.pins
        async with self.listing:
            if self.listed_at is not None and (
                time.monotonic() - self.listed_at < self.verify_seconds
            ):
                return self.pins
            started = time.monotonic()
            # Listing is a read: a session found dead is replaced and the listing tried once
            # more, so a server that died between calls costs no call at all.
            for attempt in (1, 2):
                session = await self._session()
                try:
                    pins = await _pins(session)
                except Exception as exc:  # noqa: BLE001 - any failure ends this session
                    self._drop(session)
                    if attempt == 2:
                        raise UpstreamFailed(
                            f"cannot list the tools of {self.spec.name}: {_reason(exc)}"
                        ) from None
                else:
                    self.pins = pins
                    self.listed_at = started
                    break
            return self.pins

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int,
        max_output_bytes: int,
        progress: ProgressFnT | None = None,
    ) -> tuple[mcp_types.CallToolResult, int]:
        """The upstream's result and its size in bytes, or ``UpstreamFailed`` saying why; the
        upstream's progress notifications go to ``progress``. Cancelled, the SDK's client tells
        the upstream (``notifications/cancelled``, or on HTTP of 2026-07-28 the request's POST
        closed)."""
        session = await self._session()
        try:
            with anyio.fail_after(timeout_ms / 1000):
                result = await session.call_tool(name, arguments, progress_callback=progress)
        except TimeoutError:
            raise UpstreamFailed(
                f"{self.spec.name} did not answer within {timeout_ms} ms (the contract's "
                "timeout_ms); the call was cancelled"
            ) from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._drop(session)
                raise UpstreamFailed(
                    f"{self.spec.name} closed the connection before it answered (it may have "
                    "exited); the next call starts it again"
                ) from None
            raise UpstreamFailed(f"{self.spec.name} answered with an error: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a broken session costs this call only
            self._drop(session)
            raise UpstreamFailed(f"{self.spec.name} failed: {_reason(exc)}") from None
        # pydantic's serializer (compiled), not model_dump and json.dumps: this runs per call.
        size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
        if size > max_output_bytes:
            raise UpstreamFailed(
                f"{self.spec.name} answered with {size:,} bytes, more than the "
                f"{max_output_bytes:,} the contract allows (max_output_bytes); the output is "
                "withheld"
            )
        return result, size

    def close(self) -> None:
        for connection in self.connections:
            if connection is not None:
                connection.close()


class UpstreamPool:
    """Every upstream this process forwards to, by spec."""

    def __init__(self, tasks: anyio.abc.TaskGroup, *, size: int, verify_seconds: float) -> None:
        self.tasks = tasks
        self.size = size
        self.verify_seconds = verify_seconds
        self.upstreams: dict[UpstreamSpec, Upstream] = {}

    def get(self, spec: UpstreamSpec) -> Upstream:
        upstream = self.upstreams.get(spec)
        if upstream is None:
            for other in [s for s in self.upstreams if s.name == spec.name]:
                # The server record changed (a new command or URL): its old sessions go.
                self.upstreams.pop(other).close()
            upstream = Upstream(
                spec, self.tasks, size=self.size, verify_seconds=self.verify_seconds
            )
            self.upstreams[spec] = upstream
        return upstream

    def close(self) -> None:
        for upstream in self.upstreams.values():
            upstream.close()


async def _pins(session: ClientSession) -> dict[str, str]:
    pins: dict[str, str] = {}
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        # As sources' syncs read it: each tool the JSON object the server sent, so the pin is
        # the one the registry approved, unknown keys included.
        result = await session.send_request(mcp_types.ListToolsRequest(params=params), RawTools)
        for tool in result.tools:
            if isinstance(tool.get("name"), str):
                pins[tool["name"]] = definition_hash(tool)
        cursor = result.next_cursor
        if not cursor:
            break
    return pins


def _reason(exc: BaseException) -> str:
    leaves = _leaves(exc)
    leaf = leaves[0]
    for candidate in leaves:
        if isinstance(candidate, UpstreamFailed | MCPError):
            leaf = candidate
            break
    return f"{type(leaf).__name__}: {str(leaf)[:300]}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
