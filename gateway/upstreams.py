"""The gateway's sessions with upstream MCP servers: pooled, restarted, bounded.

No Django here: the caller passes an ``UpstreamSpec`` (transport, command or URL, the header
values read from the server record's environment variables) and the bounds of each call.

Each upstream keeps up to ``size`` sessions, used in turn; each session runs in a task of its
own (the SDK's transports are context managers that must close in the task that opened them),
so a stdio server is one process per session, kept between calls. A session whose server died
or closed the connection is dropped when a call sees it, and the next call starts a new one:
a dead server costs the call in flight, never the gateway.

A call to a streamable-HTTP upstream without progress to pass on is posted directly
(``_Posted``): one JSON-RPC ``tools/call`` on the upstream's own pooled HTTP clients, in an MCP
session they initialized once, the answer read whether it comes as JSON or as an event stream. The
SDK's client (a session, its dispatcher, memory streams and a task per request) costs about as
much CPU per call as the upstream's whole answer; what a posted call does not handle (progress,
a redirect) goes through the SDK's session, and every failure is told as that path tells it.

The live definitions (``tools/list``) are read again when the server says its list changed
(``notifications/tools/list_changed``) and whenever they are older than ``verify_seconds``; the
gateway compares their pins (``registry/pins.py``) with the approved ones before every call.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types
import pydantic_core
from mcp.client.session import DEFAULT_CLIENT_INFO, ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE, streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from registry.pins import definition_hash
from sources.client import LAUNCHER, RawTools

logger = logging.getLogger(__name__)

STDIO = "stdio"
HTTP = "http"
START_TIMEOUT_SECONDS = 30.0
MAX_LIST_PAGES = 100
KEEPALIVE_SECONDS = 2.0
# The HTTP clients posting one upstream's calls, used in turn: a client's connection pool
# looks over every connection it holds at each request, so many calls in flight are spread
# over a few small pools rather than one large one.
POSTED_CLIENTS = 4
# How long a cancelled call waits to tell its upstream (the SDK's client waits as long).
CANCEL_NOTICE_SECONDS = 5.0
# A result's fields of MCP 2026-07-28 that the SDK's client drops on a 2025 session, as posted
# calls do: outside the negotiated version, they are not the result's.
LATER_RESULT_FIELDS = frozenset({"resultType", "inputRequests", "requestState"})
# How the SDK's client answers an upstream's request it has no handler for; a posted call
# answers the same.
UNSUPPORTED = {
    "sampling/createMessage": "Sampling not supported",
    "elicitation/create": "Elicitation not supported",
    "roots/list": "List roots not supported",
}
JSON_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


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
    expired: bool = False  # the upstream answered 404 to this session's id

    async def run(self) -> None:
        try:
            async with (
                _transport(self.spec, self._response) as (read, write),
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

    async def _response(self, response: httpx2.Response) -> None:
        """Heard on each HTTP response: a 404 to a POST in this session says the upstream
        forgot the session (it restarted or dropped it) and ran none of its requests; the SDK's
        client tells the call only "Session terminated" or the upstream's own error."""
        request = response.request
        if (
            response.status_code == 404
            and request.method == "POST"
            and "mcp-session-id" in request.headers
        ):
            self.expired = True

    def close(self) -> None:
        self.dead = True
        self.closing.set()


def _http_client(spec: UpstreamSpec, **options: Any) -> httpx2.AsyncClient:
    """An HTTP client to an upstream, with the server record's headers: the SDK's sessions'
    (``_transport``) and the posted calls' (``_Posted``) alike."""
    return httpx2.AsyncClient(
        headers=dict(spec.headers),
        timeout=httpx2.Timeout(30.0),
        # An idle connection is dropped before the 5 s after which common servers (uvicorn's
        # default) close it: one reused as the server closes it fails with a read error that
        # ends the whole session, every call in flight on it too.
        limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_SECONDS),
        **options,
    )


def _session_terminated() -> MCPError:
    """What the SDK's client raises for a session the upstream no longer knows; a call that
    found it so twice is told this on either path."""
    return MCPError(mcp_types.INVALID_REQUEST, "Session terminated")


@asynccontextmanager
async def _transport(spec: UpstreamSpec, on_response: Any) -> AsyncIterator[Any]:
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
            _http_client(spec, event_hooks={"response": [on_response]}) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            yield streams
    else:
        raise UpstreamFailed(f"the gateway does not forward over the {spec.transport} transport")


class _Redirected(Exception):
    """The upstream answered a posted call with a redirect: it did not run it."""


class _Expired(Exception):
    """The upstream no longer knows the posted calls' session (404 to its session id)."""


class _Posted:
    """Calls to a streamable-HTTP upstream posted as JSON-RPC messages, on ``POSTED_CLIENTS``
    HTTP clients (their connections pooled) in one MCP session of the 2025 protocol,
    initialized at the first call and again when the upstream forgets it (404) or a connection
    fails. The SDK's client answers the same messages; this one does it without a dispatcher,
    streams or tasks."""

    def __init__(self, spec: UpstreamSpec, on_list_changed: Any) -> None:
        self.spec = spec
        self.on_list_changed = on_list_changed
        self.url = httpx2.URL(spec.url)  # parsed once, not at every call
        self.clients = [_http_client(spec) for _ in range(POSTED_CLIENTS)]
        self.turns = itertools.count()
        self.ids = itertools.count(1)
        self.starting = anyio.Lock()
        self.closing = anyio.Event()
        self.session_id: str | None = None
        self.version: str | None = None

    async def run(self) -> None:
        """Hold the client until the upstream is closed; then end the session, as the SDK's
        client does."""
        async with AsyncExitStack() as clients:
            for client in self.clients:
                await clients.enter_async_context(client)
            try:
                await self.closing.wait()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(KEEPALIVE_SECONDS):
                    await self._terminate()

    async def _terminate(self) -> None:
        if self.session_id is None:
            return
        try:
            await self.client.delete(self.url, headers=self._headers())
        except httpx2.HTTPError as exc:
            logger.info("upstream %s: session not ended: %s", self.spec.name, exc)

    def close(self) -> None:
        self.closing.set()

    @property
    def client(self) -> httpx2.AsyncClient:
        """The next of the clients, in turn."""
        return self.clients[next(self.turns) % POSTED_CLIENTS]

    def _headers(self) -> dict[str, str]:
        headers = dict(JSON_HEADERS)
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.version is not None:
            headers["mcp-protocol-version"] = self.version
        return headers

    def forget(self, session_id: str | None) -> None:
        """The next call initializes a new session (unless another call did already)."""
        if self.session_id == session_id:
            self.session_id, self.version = None, None

    async def _session(self) -> None:
        if self.version is not None:
            return
        async with self.starting:
            if self.version is not None:
                return
            try:
                await self._initialize()
            except Exception as exc:  # noqa: BLE001 - told as the SDK's path tells it
                self.session_id, self.version = None, None
                raise UpstreamFailed(
                    f"cannot start a session with {self.spec.name}: {_reason(exc)}"
                ) from None

    async def _initialize(self) -> None:
        params = mcp_types.InitializeRequestParams(
            protocol_version=LATEST_HANDSHAKE_VERSION,
            capabilities=mcp_types.ClientCapabilities(),
            client_info=DEFAULT_CLIENT_INFO,
        ).model_dump(by_alias=True, mode="json", exclude_none=True)
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        async with self.client.stream(
            "POST", self.url, content=pydantic_core.to_json(message), headers=JSON_HEADERS
        ) as response:
            session_id = response.headers.get("mcp-session-id")
            raw = await self._answer(response, 0)
        result = mcp_types.InitializeResult.model_validate(raw, by_name=False)
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise RuntimeError(
                f"Unsupported protocol version from the server: {result.protocol_version}"
            )
        self.session_id, self.version = session_id, result.protocol_version
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        response = await self.client.post(
            self.url, content=pydantic_core.to_json(initialized), headers=self._headers()
        )
        response.raise_for_status()

    async def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """The upstream's result, or the ``MCPError`` or HTTP error the SDK's client would
        raise; ``_Redirected`` when the SDK's client must take the call. Cancelled, the
        upstream is told (``notifications/cancelled``, as the SDK's client tells it)."""
        try:
            raw, version = await self._post(name, arguments)
        except _Expired:
            # The upstream restarted or dropped the session: it did not run the call, which
            # goes again in a new session, once.
            try:
                raw, version = await self._post(name, arguments)
            except _Expired:
                raise _session_terminated() from None
        methods.validate_server_result("tools/call", version, raw)
        return mcp_types.CallToolResult.model_validate(
            {key: value for key, value in raw.items() if key not in LATER_RESULT_FIELDS},
            by_name=False,
        )

    async def _post(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The raw result and the session's protocol version."""
        await self._session()
        request_id = next(self.ids)
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        # Read with no wait since ``_session``: another call may forget the session meanwhile.
        session_id, version = self.session_id, self.version or LATEST_HANDSHAKE_VERSION
        headers = self._headers()
        try:
            async with self.client.stream(
                "POST", self.url, content=pydantic_core.to_json(message), headers=headers
            ) as response:
                if response.status_code == 404 and session_id is not None:
                    self.forget(session_id)
                    raise _Expired
                return await self._answer(response, request_id), version
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_NOTICE_SECONDS):
                await self._cancelled(request_id, headers)
            raise
        except httpx2.TransportError:
            self.forget(session_id)
            raise

    async def _cancelled(self, request_id: int, headers: dict[str, str]) -> None:
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "caller cancelled"},
        }
        try:
            await self.client.post(self.url, content=pydantic_core.to_json(notice), headers=headers)
        except httpx2.HTTPError as exc:
            logger.info("upstream %s: a cancellation not passed on: %s", self.spec.name, exc)

    async def _answer(self, response: httpx2.Response, request_id: int) -> dict[str, Any]:
        """The result of the request ``response`` answers, read as the SDK's client reads it
        (``StreamableHTTPTransport._handle_post_request``); an error answer raised as the
        ``MCPError`` it raises."""
        status = response.status_code
        content_type = response.headers.get("content-type", "").lower()
        if 300 <= status < 400:
            raise _Redirected
        if status == 202:
            raise MCPError(mcp_types.INVALID_REQUEST, "server answered a request with 202 Accepted")
        if status >= 400:
            if content_type.startswith("application/json"):
                try:
                    parsed = mcp_types.jsonrpc_message_adapter.validate_json(
                        await response.aread(), by_name=False
                    )
                except (httpx2.StreamError, ValidationError):
                    parsed = None
                if isinstance(parsed, mcp_types.JSONRPCError):
                    raise MCPError.from_error_data(parsed.error)
            if status == 404:
                raise MCPError(mcp_types.METHOD_NOT_FOUND, "Not Found")
            raise MCPError(mcp_types.INTERNAL_ERROR, "Server returned an error response")
        if content_type.startswith("application/json"):
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(
                    await response.aread(), by_name=False
                )
            except (httpx2.StreamError, ValidationError) as exc:
                raise MCPError(
                    mcp_types.PARSE_ERROR, f"Failed to parse JSON response: {exc}"
                ) from None
            return _outcome(message)
        if content_type.startswith("text/event-stream"):
            return await self._streamed(response, request_id)
        raise MCPError(mcp_types.INVALID_REQUEST, f"Unexpected content type: {content_type}")

    async def _streamed(self, response: httpx2.Response, request_id: int) -> dict[str, Any]:
        """The answer on an event stream: the response to ``request_id``; on the way, a
        request of the upstream's answered as the SDK's client answers it by default, and its
        ``list_changed`` heard."""
        try:
            events = httpx2.EventSource(response, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE)
            async for event in events:
                if event.event != "message" or not event.data:
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(
                        event.data, by_name=False
                    )
                except ValidationError as exc:
                    raise MCPError(
                        mcp_types.PARSE_ERROR, f"Failed to parse SSE message: {exc}"
                    ) from None
                if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                    return _outcome(message)
                if isinstance(message, mcp_types.JSONRPCRequest):
                    await self._reply(message)
                elif message.method == "notifications/tools/list_changed":
                    self.on_list_changed()
        except httpx2.SSEError as exc:
            raise MCPError(mcp_types.CONNECTION_CLOSED, f"SSE stream failed: {exc}") from None
        raise MCPError(mcp_types.CONNECTION_CLOSED, "SSE stream ended without a response")

    async def _reply(self, request: mcp_types.JSONRPCRequest) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
        if request.method == "ping":
            reply["result"] = {}
        elif request.method in UNSUPPORTED:
            reply["error"] = {
                "code": mcp_types.INVALID_REQUEST,
                "message": UNSUPPORTED[request.method],
            }
        else:
            reply["error"] = {
                "code": mcp_types.METHOD_NOT_FOUND,
                "message": "Method not found",
                "data": request.method,
            }
        response = await self.client.post(
            self.url, content=pydantic_core.to_json(reply), headers=self._headers()
        )
        await response.aclose()


def _outcome(message: Any) -> dict[str, Any]:
    if isinstance(message, mcp_types.JSONRPCError):
        raise MCPError.from_error_data(message.error)
    if not isinstance(message, mcp_types.JSONRPCResponse):
        raise MCPError(mcp_types.INVALID_REQUEST, "the server answered with no response")
    return message.result


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
        self.posted: _Posted | None = None
        if spec.transport == HTTP:
            self.posted = _Posted(spec, self.list_changed)
            tasks.start_soon(self.posted.run)

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

    def _expired(self, session: ClientSession) -> bool:
        return any(
            connection is not None and connection.session is session and connection.expired
            for connection in self.connections
        )

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
        upstream's progress notifications go to ``progress``. Cancelled, the upstream is told
        (``notifications/cancelled``, or on HTTP of 2026-07-28 the request's POST closed). A
        call to an HTTP upstream with no progress to pass on is posted directly
        (``call_posted``), any other goes through the SDK's session (``call_in_session``)."""
        if self.posted is not None and progress is None:
            try:
                return await self.call_posted(
                    name, arguments, timeout_ms=timeout_ms, max_output_bytes=max_output_bytes
                )
            except _Redirected:
                pass  # the SDK's client follows a redirect within the upstream's origin
        return await self.call_in_session(
            name,
            arguments,
            timeout_ms=timeout_ms,
            max_output_bytes=max_output_bytes,
            progress=progress,
        )

    async def call_posted(
        self, name: str, arguments: dict[str, Any], *, timeout_ms: int, max_output_bytes: int
    ) -> tuple[mcp_types.CallToolResult, int]:
        """``call`` posted on the upstream's HTTP client (``_Posted``); ``_Redirected`` when
        the upstream redirects it."""
        assert self.posted is not None
        try:
            with anyio.fail_after(timeout_ms / 1000):
                result = await self.posted.call(name, arguments)
        except (UpstreamFailed, _Redirected):
            raise
        except httpx2.TransportError:
            # The SDK's session ends on a failed connection and tells the call so.
            raise self._closed() from None
        except Exception as exc:  # noqa: BLE001 - told as ``call_in_session`` tells it
            raise self._failed(exc, timeout_ms) from None
        return result, self._size(result, max_output_bytes)

    async def call_in_session(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int,
        max_output_bytes: int,
        progress: ProgressFnT | None = None,
    ) -> tuple[mcp_types.CallToolResult, int]:
        """``call`` through one of the upstream's SDK sessions. Timed out or cancelled, the
        SDK's session tells the upstream (``notifications/cancelled``); a session the upstream
        forgot is dropped and the call, which it did not run, goes again in a new one, once, as
        a posted call does."""
        for attempt in (1, 2):
            session = await self._session()
            try:
                with anyio.fail_after(timeout_ms / 1000):
                    result = await session.call_tool(name, arguments, progress_callback=progress)
            except TimeoutError:
                raise self._failed(TimeoutError(), timeout_ms) from None
            except MCPError as exc:
                if not self._expired(session):
                    if exc.code == mcp_types.CONNECTION_CLOSED:
                        self._drop(session)
                    raise self._failed(exc, timeout_ms) from None
                self._drop(session)
                if attempt == 2:
                    raise self._failed(_session_terminated(), timeout_ms) from None
                continue  # the upstream did not run it: once more, in a new session
            except Exception as exc:  # noqa: BLE001 - a broken session costs this call only
                self._drop(session)
                raise self._failed(exc, timeout_ms) from None
            return result, self._size(result, max_output_bytes)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _failed(self, exc: Exception, timeout_ms: int) -> UpstreamFailed:
        """What the caller is told of a call that failed with ``exc``."""
        if isinstance(exc, TimeoutError):
            return UpstreamFailed(
                f"{self.spec.name} did not answer within {timeout_ms} ms (the contract's "
                "timeout_ms); the call was cancelled"
            )
        if isinstance(exc, MCPError):
            if exc.code == mcp_types.CONNECTION_CLOSED:
                return self._closed()
            return UpstreamFailed(f"{self.spec.name} answered with an error: {exc}")
        return UpstreamFailed(f"{self.spec.name} failed: {_reason(exc)}")

    def _closed(self) -> UpstreamFailed:
        return UpstreamFailed(
            f"{self.spec.name} closed the connection before it answered (it may have "
            "exited); the next call starts it again"
        )

    def _size(self, result: mcp_types.CallToolResult, max_output_bytes: int) -> int:
        # pydantic's serializer (compiled), not model_dump and json.dumps: this runs per call.
        size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
        if size > max_output_bytes:
            raise UpstreamFailed(
                f"{self.spec.name} answered with {size:,} bytes, more than the "
                f"{max_output_bytes:,} the contract allows (max_output_bytes); the output is "
                "withheld"
            )
        return size

    def close(self) -> None:
        for connection in self.connections:
            if connection is not None:
                connection.close()
        if self.posted is not None:
            self.posted.close()


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
