"""The MCP gateway: an ASGI application serving the approved tools at ``/mcp/``.

Built on the official SDK's low-level ``Server`` with the streamable HTTP transport in
stateless mode: no request depends on what one process remembers, so any number of gateway
processes behind one address serve the same clients. What a session carries from call to call
(its step counter, its earlier calls, what they produced) lives in the cache (Redis when
``REDIS_URL`` is set), keyed by the ``Mcp-Session-Id`` this application gives out on the first
response of a client that has none.

Every request carries a runtime token with the ``tools:call`` scope; it selects the application.
A missing or bad token is answered 401 with ``WWW-Authenticate: Bearer`` and the address of the
protected-resource metadata, as the MCP authorization specification asks; a token without the
scope 403 ``insufficient_scope``.

``tools/call`` checks, in this order, and refuses with a tool error naming the rule, the argument
and what to do: the tool is approved and visible; its arguments meet the approved input schema
and invariants (``gateway/checks.py``); the server still declares the approved definition (its
pin); then the call is forwarded within the contract's limits and its output checked. Every call
is recorded off its path (``gateway/recording.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    StreamableHTTPSessionManager,
)
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    methods,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from api.planning import SchemaTooCostly, schema_problems
from registry.jsonschema_re2 import WorkBudgetExceeded
from registry.revision import revision_current

from . import selectors, services
from .checks import Checked, call_check
from .limits import rate_retry_after, rate_window
from .recording import Recorder
from .services import REFUSED, CallRecord
from .sessions import Begun, RedisSessions, SessionState, SessionStoreDown
from .upstreams import Upstream, UpstreamFailed, UpstreamPool

logger = logging.getLogger(__name__)

META_KEY = "tool-contract-registry/gateway"
SESSION_HEADER = "mcp-session-id"
SESSION_ID = re.compile(r"^[\x21-\x7e]{1,100}$")
SCOPE_KEY = "tool_contract_registry.gateway"
METADATA_PATH = "/.well-known/oauth-protected-resource"
SMALL_ARGUMENTS = 256
CONFIRM_STATE = "confirm"
SMALL_STRING = 4096
# The protocol versions whose plain calls the gateway answers itself (``_plain_call``): the
# 2025 ones, and 2026-07-28 (``MODERN_PROTOCOL_VERSIONS``), whose requests each carry the
# ``PLAIN_MODERN_META_KEYS`` every request of that version must or should carry.
PLAIN_VERSIONS = frozenset({"2025-06-18", "2025-11-25", *MODERN_PROTOCOL_VERSIONS})
PLAIN_MESSAGE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
PLAIN_PARAM_KEYS = frozenset({"name", "arguments"})
PLAIN_MODERN_META_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY}
)


@dataclass
class Gateway:
    """One process's gateway: its upstream sessions and its recorder."""

    recorder: Recorder
    sessions: RedisSessions | CacheSessions
    pool: UpstreamPool | None = None
    calls: dict[str, int] = field(default_factory=dict)
    in_flight: dict[int, int] = field(default_factory=dict)  # forwarded calls per application
    # The calls this process is forwarding, by ``running_key``: what a cancellation stops.
    running: dict[str, anyio.CancelScope] = field(default_factory=dict)
    revision: int = 0
    revision_until: float = 0.0

    def count(self, outcome: str) -> None:
        self.calls[outcome] = self.calls.get(outcome, 0) + 1

    def cancel_here(self, call: str) -> bool:
        """Cancel a call this process is forwarding; whether it was one."""
        scope = self.running.get(call)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def current_revision(self) -> int:
        """The registry revision, read again (in a thread: it may wait for the cache) once this
        process's copy is ``REVISION_LOCAL_SECONDS`` old, as every reader of it does."""
        now = time.monotonic()
        if now >= self.revision_until:
            self.revision = await sync_to_async(revision_current, thread_sensitive=False)()
            self.revision_until = now + settings.REVISION_LOCAL_SECONDS
        return self.revision

    async def catalog(self, application_id: int) -> selectors.Catalog:
        """The application's catalog at the current revision: built once per revision, then a
        dict read on the event loop."""
        revision = await self.current_revision()
        catalog = selectors.catalog_cached(application_id, revision)
        if catalog is None:
            catalog = await sync_to_async(selectors.catalog_for, thread_sensitive=False)(
                application_id, revision
            )
        return catalog


class CacheSessions:
    """The session store without Redis (the embedded default): the Django cache, in a thread."""

    async def begin(self, session: str, *, counter: str = "", window: int = 0) -> Begun:
        return await sync_to_async(services.session_begin, thread_sensitive=False)(
            session, counter=counter, window=window
        )

    async def add(
        self, session: str, *, tool: str, args: dict[str, Any], produces: Sequence[str]
    ) -> None:
        await sync_to_async(services.session_call_add, thread_sensitive=False)(
            session, tool=tool, args=args, produces=produces
        )

    async def cancel_publish(self, call: str) -> None:
        return None  # without Redis one process serves the sessions: it has looked already

    async def cancel_listen(self, on_cancel: Callable[[str], object]) -> None:
        await anyio.sleep_forever()

    async def close(self) -> None:
        return None


def running_key(session_key: str, request_id: Any) -> str:
    """A call in flight: its session (application included) and its JSON-RPC request id."""
    return json.dumps([session_key, request_id])


@dataclass(frozen=True)
class Caller:
    application_id: int
    session_id: str

    @property
    def trace_id(self) -> str:
        return f"mcp-{self.application_id}-{self.session_id}"

    @property
    def session_key(self) -> str:
        return f"{self.application_id}:{self.session_id}"


def build_app() -> Starlette:
    """The gateway's ASGI application (``manage.py mcp_gateway`` serves it with uvicorn)."""
    gateway = Gateway(
        recorder=Recorder(
            capacity=settings.MCP_GATEWAY_TRACE_QUEUE,
            batch=settings.MCP_GATEWAY_TRACE_BATCH,
            flush_seconds=settings.MCP_GATEWAY_TRACE_FLUSH_SECONDS,
        ),
        sessions=(
            RedisSessions(settings.CACHE_REDIS_URL) if settings.CACHE_REDIS_URL else CacheSessions()
        ),
    )
    # Clients of MCP 2026-07-28 listen (subscriptions/listen) for notifications/tools/list_changed:
    # each process watches the registry revision every process shares and tells its listeners
    # when it moves, so a listener on any process hears of a change made anywhere.
    events = InMemorySubscriptionBus()
    server = _mcp_server(gateway, events)
    # Two doors onto the same server: answers as single JSON documents (the fast path), and as
    # event streams for the calls whose client asked for progress, which can only reach it on
    # a stream. Neither holds anything of its own between requests.
    answers = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    streams = StreamableHTTPSessionManager(app=server, stateless=True, json_response=False)
    endpoint = _Endpoint(_McpDoor(gateway, answers=answers, streams=streams))

    @asynccontextmanager
    async def app_lifespan(app: Starlette) -> AsyncIterator[None]:
        async with _running(gateway, events), answers.run(), streams.run():
            yield

    app = Starlette(
        routes=[
            Route("/mcp/", endpoint=endpoint),
            Route("/mcp", endpoint=endpoint),
            Route(METADATA_PATH, endpoint=_metadata),
            Route(METADATA_PATH + "/mcp/", endpoint=_metadata),
            Route(METADATA_PATH + "/mcp", endpoint=_metadata),
            Route("/healthz", endpoint=_healthz),
        ],
        lifespan=app_lifespan,
    )
    app.state.gateway = gateway
    return app


async def _watch_revision(gateway: Gateway, events: InMemorySubscriptionBus) -> None:
    """Tell this process's listeners when the registry revision moves."""
    seen = await gateway.current_revision()
    while True:
        await anyio.sleep(max(settings.REVISION_LOCAL_SECONDS, 1.0))
        try:
            revision = await gateway.current_revision()
        except Exception:  # noqa: BLE001 - a database outage must not end the watch
            logger.exception("gateway: cannot read the registry revision")
            continue
        if revision != seen:
            seen = revision
            await events.publish(ToolsListChanged())


@asynccontextmanager
async def _running(gateway: Gateway, events: InMemorySubscriptionBus) -> AsyncIterator[None]:
    """The process's upstream sessions, recorder and watchers, around both transports."""
    gateway.recorder.start()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_watch_revision, gateway, events)
        tasks.start_soon(gateway.sessions.cancel_listen, gateway.cancel_here)
        gateway.pool = UpstreamPool(
            tasks,
            size=settings.MCP_GATEWAY_POOL_SIZE,
            verify_seconds=settings.MCP_GATEWAY_VERIFY_SECONDS,
        )
        try:
            yield
        finally:
            gateway.pool.close()
            tasks.cancel_scope.cancel()
            await gateway.sessions.close()
    await anyio.to_thread.run_sync(gateway.recorder.stop)


def _mcp_server(gateway: Gateway, events: InMemorySubscriptionBus) -> Server[Any]:
    """The MCP server both doors serve: ``tools/list``, ``tools/call`` and listening."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = await gateway.catalog(_caller(ctx).application_id)
        return types.ListToolsResult(
            tools=[types.Tool.model_validate(tool.listed) for tool in catalog.tools.values()]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        report = None
        if (params.meta or {}).get("progress_token") is not None:
            # The client asked for progress: the upstream's is passed on as this call's.
            report = ctx.session.report_progress
        return await _call(
            gateway,
            _caller(ctx),
            params,
            asker=_Asker(ctx, params),
            request_id=ctx.request_id,
            report=report,
        )

    server: Server[Any] = Server(
        "tool-contract-registry",
        instructions="The tools reviewers approved for this application; every call is checked "
        "against its contract and recorded.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(events),
        # Mcp-Param headers are the client's copy of some arguments, for proxies to route by;
        # the gateway routes by none, and listing the tools per call to find their schemas
        # would cost every call.
        get_tool_input_schema=lambda name: None,
    )
    # A confirmation's round trip carries its state through the client, sealed under a key
    # every gateway process derives from SECRET_KEY and bound to the call (tool, arguments)
    # and the application: any process takes the answer, no client can forge or move it.
    server.middleware.append(
        RequestStateBoundary(
            RequestStateSecurity(
                keys=[hashlib.sha256(f"mcp-gateway:{settings.SECRET_KEY}".encode()).digest()],
                bind_principal=lambda ctx: str(_caller(ctx).application_id),
            ),
            default_audience="tool-contract-registry/gateway",
        )
    )
    return server


class _McpDoor:
    """``/mcp/``: the caller authenticated by its token, its session named, a 2025 client's
    cancellation passed on, then the request handed to the door that answers it."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        answers: StreamableHTTPSessionManager,
        streams: StreamableHTTPSessionManager,
    ) -> None:
        self.gateway, self.answers, self.streams = gateway, answers, streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        check = await self.authenticated(request)
        if check is not None and check.problem == "throttled":
            await JSONResponse(
                {"error": "throttled", "detail": "Too many failed authentications."},
                429,
                headers={"Retry-After": str(check.retry_after)},
            )(scope, receive, send)
            return
        if check is None or check.application_id is None:
            problem = check.problem if check is not None else ""
            await _unauthorized(request, problem)(scope, receive, send)
            return
        session_id = request.headers.get(SESSION_HEADER)
        minted = session_id is None
        if session_id is None:
            session_id = uuid.uuid4().hex
        elif not SESSION_ID.match(session_id):
            await JSONResponse({"error": "malformed Mcp-Session-Id"}, 400)(scope, receive, send)
            return
        caller = Caller(application_id=check.application_id, session_id=session_id)
        scope[SCOPE_KEY] = caller

        async def send_with_session(message: Message) -> None:
            if minted and message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"mcp-session-id", session_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        body = await _body(receive)
        if body is None:
            await Response("Request body too large", 413)(scope, receive, send)
            return
        if b"notifications/cancelled" in body:
            await self.cancel_elsewhere(body, caller)
        await self.dispatch(scope, _Replayed(body, receive, send_with_session), body, caller)

    async def authenticated(self, request: Request) -> selectors.TokenCheck | None:
        """The bearer token's check, or None without one."""
        raw = _bearer(request)
        if not raw:
            return None
        # A token this process read lately is answered on the event loop; any other is looked
        # up (and a bad one counted against its address) in a thread.
        check = selectors.token_cached(raw, revision=await self.gateway.current_revision())
        if check is None:
            address = request.client.host if request.client else ""
            check = await sync_to_async(selectors.token_check, thread_sensitive=False)(
                raw, address=address
            )
        return check

    async def cancel_elsewhere(self, body: bytes, caller: Caller) -> None:
        """A client of the 2025 protocol cancels with a notification of its own, which may
        reach another process than the call did: each process hears of it."""
        call = _cancelled_call(body, caller.session_key)
        if call is not None and not self.gateway.cancel_here(call):
            try:
                await self.gateway.sessions.cancel_publish(call)
            except SessionStoreDown as exc:
                logger.warning("gateway: a cancellation not passed on: %s", exc)

    async def dispatch(
        self, scope: Scope, replayed: _Replayed, body: bytes, caller: Caller
    ) -> None:
        if b'"tools/call"' not in body:
            await self.answers.handle_request(scope, replayed.receive, replayed.send)
            return
        # A call: a client that goes away before the answer (MCP 2026-07-28's way to cancel,
        # and any client's dropped request) cancels it, on its way to the upstream too.
        manager = self.streams if b"progressToken" in body else self.answers
        plain = _plain_call(Request(scope), body) if manager is self.answers else None
        replayed.watched = True  # from now on the watcher alone reads the connection
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                replayed.watch, functools.partial(_cancel_dropped, self.gateway, caller)
            )
            if plain is None:
                await manager.handle_request(scope, replayed.receive, replayed.send)
            else:
                await self.answer_plain(scope, replayed, caller, *plain)
            tasks.cancel_scope.cancel()

    async def answer_plain(
        self,
        scope: Scope,
        replayed: _Replayed,
        caller: Caller,
        request_id: int | str,
        version: str,
        params: types.CallToolRequestParams,
    ) -> None:
        """A plain call answered without the SDK's transport and dispatcher (for a 2025 client
        a transport, a dispatcher and their tasks per request, for a 2026-07-28 one a kernel,
        a context and the middleware per request: most of the gateway's CPU per call): the
        same checks and forwarding as the SDK's path, the answer shaped by the SDK's own rules
        for the client's version, as one JSON document."""
        modern = version in MODERN_PROTOCOL_VERSIONS
        message: types.JSONRPCResponse | types.JSONRPCError
        try:
            answer = await _call(
                self.gateway, caller, params, asker=_CannotAsk(), request_id=request_id
            )
            result = _wire_result(version, answer, self.answers.app if modern else None)
        except Exception as exc:  # noqa: BLE001 - answered as the SDK's dispatcher answers it
            known = handler_exception_to_error_data(exc)
            if known is not None:
                error = known
            elif modern:  # logged, and answered as a generic internal error
                error = modern_error_data(exc)
            else:
                logger.exception("gateway: a plain call raised")
                error = types.ErrorData(code=0, message=str(exc))
            message = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        else:
            message = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        if not modern:
            await Response(
                message.model_dump_json(by_alias=True, exclude_unset=True),
                headers={"Content-Type": "application/json"},
            )(scope, replayed.receive, replayed.send)
            return
        # As the SDK's single-exchange entry writes a 2026-07-28 answer: its status mapped from
        # the error code, compact JSON.
        status = 200
        if isinstance(message, types.JSONRPCError):
            status = ERROR_CODE_HTTP_STATUS.get(message.error.code, 200)
        body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        await Response(
            json.dumps(body, separators=(",", ":")),
            status_code=status,
            media_type="application/json",
        )(scope, replayed.receive, replayed.send)


async def _metadata(request: Request) -> Response:
    """The protected resource metadata of the MCP authorization spec."""
    return JSONResponse(
        {
            "resource": _resource(request),
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["tools:call"],
            "resource_name": "Tool-contract registry MCP gateway",
        }
    )


async def _healthz(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    upstreams = {}
    if gateway.pool is not None:
        upstreams = {
            spec.name: {"restarts": upstream.restarts}
            for spec, upstream in gateway.pool.upstreams.items()
        }
    return JSONResponse(
        {"calls": gateway.calls, "recorder": gateway.recorder.stats(), "upstreams": upstreams}
    )


class _Endpoint:
    """A raw ASGI endpoint for Starlette's router (a class, so it is not taken for a view)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


async def _body(receive: Receive) -> bytes | None:
    """The request's body, read whole (None past the SDK's limit on one)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class _Replayed:
    """A request whose body was read: the transport reads it again, then hears of the client's
    leaving from ``watch``, the one reader of the connection once it runs."""

    def __init__(self, body: bytes, receive: Receive, send: Send) -> None:
        self.body = body
        self.raw = receive
        self.raw_send = send
        self.replayed = False
        self.watched = False
        self.answered = False
        self.gone = anyio.Event()

    async def receive(self) -> Message:
        if not self.replayed:
            self.replayed = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if not self.watched:
            return await self.raw()
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        await self.raw_send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.answered = True

    async def watch(self, on_gone: Any) -> None:
        """Wait for the client to leave; if it leaves before its answer, ``on_gone(request
        id)``. (Once answered, the server reports a disconnect at once: not a leaving.)"""
        while (await self.raw())["type"] != "http.disconnect":
            pass
        self.gone.set()
        if not self.answered:
            on_gone(_request_id(self.body))


def _plain_call(
    request: Request, body: bytes
) -> tuple[int | str, str, types.CallToolRequestParams] | None:
    """A plain ``tools/call`` the gateway answers itself, as (request id, protocol version,
    params), or None for the SDK's path. Plain means a POST (its version in
    ``PLAIN_VERSIONS``) that takes a JSON answer, whose body is one well-formed request with a
    name and arguments and nothing else: no progress token, no request state or input
    responses. A 2025 client's has no ``_meta``. A 2026-07-28 client's has the ``_meta`` that
    version puts on every request (``PLAIN_MODERN_META_KEYS``) and nothing more, in agreement
    with its routing headers (the SDK's own ladder, ``classify_inbound_request``), and
    declares no elicitation: a client that may be asked to confirm a call is answered by the
    SDK, whose middleware seals the question's state. Anything else, malformed requests
    included, goes to the SDK, which answers or refuses it as it always has."""
    version = request.headers.get("mcp-protocol-version")
    if (
        request.method != "POST"
        or version not in PLAIN_VERSIONS
        or request.headers.get("content-type", "").split(";")[0].strip() != "application/json"
        or not check_accept_headers(request)[0]
    ):
        return None
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.keys() != PLAIN_MESSAGE_KEYS:
        return None
    request_id, params = message["id"], message["params"]
    modern = version in MODERN_PROTOCOL_VERSIONS
    if (
        message["jsonrpc"] != "2.0"
        or message["method"] != "tools/call"
        or isinstance(request_id, bool)
        or not isinstance(request_id, int | str)
        or not isinstance(params, dict)
        or not params.keys() - {"_meta"} <= PLAIN_PARAM_KEYS
        or ("_meta" in params and not (modern and _plain_modern_meta(params["_meta"])))
        or not isinstance(params.get("name"), str)
        or not isinstance(params.get("arguments", {}), dict)
    ):
        return None
    if modern and (
        find_duplicated_routing_header(request.headers.items()) is not None
        or isinstance(
            classify_inbound_request(message, headers=dict(request.headers)),
            InboundLadderRejection,
        )
    ):
        return None
    try:
        methods.validate_client_request("tools/call", version, params)
        return request_id, version, types.CallToolRequestParams.model_validate(params)
    except ValidationError:
        return None


def _plain_modern_meta(meta: Any) -> bool:
    """Whether a 2026-07-28 call's ``_meta`` carries only what every request of that version
    carries, from a client that cannot be asked to confirm it (no elicitation declared)."""
    if not isinstance(meta, dict) or not meta.keys() <= PLAIN_MODERN_META_KEYS:
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    return isinstance(capabilities, dict) and "elicitation" not in capabilities


def _wire_result(version: str, answer: Answer, server: Server[Any] | None) -> dict[str, Any]:
    """A call's answer as the SDK's kernel puts it on the wire for ``version``: sieved by the
    version's surface, and a 2026-07-28 result typed and stamped with ``server``'s identity."""
    try:
        result = methods.serialize_server_result(
            "tools/call", version, answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
    except ValidationError:
        logger.exception("gateway: a plain call's answer is not a valid result")
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
    if server is not None:  # the version's sieve has typed it (``resultType``)
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return result


def _request_id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


def _cancelled_call(body: bytes, session_key: str) -> str | None:
    """The call a ``notifications/cancelled`` names, as ``running_key``; None if it is not
    one."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return running_key(session_key, request_id)


def _cancel_dropped(gateway: Gateway, caller: Caller, request_id: Any) -> None:
    if isinstance(request_id, int | str) and not isinstance(request_id, bool):
        gateway.cancel_here(running_key(caller.session_key, request_id))


def _bearer(request: Request) -> str | None:
    parts = request.headers.get("authorization", "").split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


def _resource(request: Request) -> str:
    base = str(request.base_url).rstrip("/")
    return f"{base}/mcp/"


def _unauthorized(request: Request, problem: str) -> Response:
    metadata = str(request.base_url).rstrip("/") + METADATA_PATH + "/mcp/"
    if problem == "insufficient_scope":
        challenge = (
            f'Bearer error="insufficient_scope", scope="tools:call", '
            f'error_description="The token lacks the tools:call scope.", '
            f'resource_metadata="{metadata}"'
        )
        body = {"error": "insufficient_scope", "detail": "The token lacks the tools:call scope."}
        return JSONResponse(body, 403, headers={"WWW-Authenticate": challenge})
    if problem:
        challenge = (
            f'Bearer error="invalid_token", error_description="The token is not valid, expired '
            f'or revoked.", resource_metadata="{metadata}"'
        )
        detail = "The token is not valid, expired or revoked."
    else:
        challenge = f'Bearer resource_metadata="{metadata}", scope="tools:call"'
        detail = "Send 'Authorization: Bearer <runtime token with the tools:call scope>'."
    body = {"error": problem or "invalid_request", "detail": detail}
    return JSONResponse(body, 401, headers={"WWW-Authenticate": challenge})


def _caller(ctx: ServerRequestContext[Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(SCOPE_KEY) if isinstance(request, Request) else None
    if not isinstance(caller, Caller):  # only reachable through mcp_endpoint, which sets it
        raise RuntimeError("a gateway request without its caller")
    return caller


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _small(value: Any) -> bool:
    """Whether arguments are small enough to check on the event loop: at most
    ``SMALL_ARGUMENTS`` values and keys, no string longer than ``SMALL_STRING``. Larger ones
    are checked in a thread, so arguments built to spend the whole work budget hold that call,
    not the loop every other call of the process shares."""
    stack = [value]
    seen = 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > SMALL_ARGUMENTS:
            return False
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and len(item) > SMALL_STRING:
            return False
    return True


class _Asker:
    """Asking the user to confirm a call: MCP elicitation, in the one form a stateless gateway
    can use (MCP 2026-07-28's input requests: the call is answered "input required" with the
    question and a sealed state, and the client calls again with the user's answer)."""

    def __init__(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> None:
        self.ctx = ctx
        self.params = params

    def can_ask(self) -> bool:
        capabilities = self.ctx.session.client_capabilities
        return (
            self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            and capabilities is not None
            and capabilities.elicitation is not None
        )

    def answer(self) -> str | None:
        """The user's answer to this call's question (accept, decline, cancel), or None when
        there is none the gateway asked for (its sealed state absent)."""
        if self.params.request_state != CONFIRM_STATE:
            return None
        answer = (self.params.input_responses or {}).get(CONFIRM_STATE)
        return answer.action if isinstance(answer, types.ElicitResult) else None

    def question(self, tool: str, risk: str, args: dict[str, Any]) -> types.InputRequiredResult:
        shown = json.dumps(args, ensure_ascii=False)
        if len(shown) > 2000:
            shown = shown[:2000] + "…"
        return types.InputRequiredResult(
            input_requests={
                CONFIRM_STATE: types.ElicitRequest(
                    params=types.ElicitRequestFormParams(
                        message=f"Allow this call of {tool} (risk: {risk})? Arguments: {shown}",
                        requested_schema={"type": "object", "properties": {}},
                    )
                )
            },
            request_state=CONFIRM_STATE,
        )


class _CannotAsk:
    """The asker of a plain call (a 2025 client's, or a 2026-07-28 client's that declared no
    elicitation): it cannot be asked (``_Asker.can_ask``) and brings no answer (it has no
    request state)."""

    def can_ask(self) -> bool:
        return False

    def answer(self) -> str | None:
        return None

    def question(self, tool: str, risk: str, args: dict[str, Any]) -> types.InputRequiredResult:
        raise AssertionError("a client that cannot be asked is never asked")


async def _call(
    gateway: Gateway,
    caller: Caller,
    params: types.CallToolRequestParams,
    *,
    asker: _Asker | _CannotAsk,
    request_id: Any = None,
    report: ProgressFnT | None = None,
) -> types.CallToolResult | types.InputRequiredResult:
    """One ``tools/call``, judged in the order of docs/api.md; its answer."""
    call = _Call(gateway, caller, params, asker=asker, request_id=request_id, report=report)
    return await call.run()


Answer = types.CallToolResult | types.InputRequiredResult


class _Call:
    """A call's phases: its session and rate, the approved tool and its checks, the pin, the
    user's confirmation, forwarding, and the answer. A phase returns the answer that ends the
    call (a refusal, a failure, a question), or None to go on; each refusal is recorded."""

    catalog: selectors.Catalog
    state: SessionState
    tool: selectors.GatewayTool
    upstream: Upstream

    def __init__(
        self,
        gateway: Gateway,
        caller: Caller,
        params: types.CallToolRequestParams,
        *,
        asker: _Asker | _CannotAsk,
        request_id: Any,
        report: ProgressFnT | None,
    ) -> None:
        self.gateway, self.caller, self.asker = gateway, caller, asker
        self.request_id, self.report = request_id, report
        self.name, self.args = params.name, dict(params.arguments or {})
        self.started, self.occurred_at = time.monotonic(), _now()
        self.step = 0
        self.meta: dict[str, Any] = {}

    async def run(self) -> Answer:
        self.catalog = await self.gateway.catalog(self.caller.application_id)
        begun = await self.begin()
        if not isinstance(begun, Begun):
            return begun
        self.step, self.state = begun.step, begun.state
        # The registry revision the call was judged at: a client that sees it move lists the
        # tools again.
        self.meta.update(
            {"traceId": self.caller.trace_id, "step": self.step, "revision": self.catalog.revision}
        )
        refused = self.rate_limited(begun) or self.approved() or await self.checked()
        if refused is not None:
            return refused
        ended = await self.pinned() or self.confirmed()
        if ended is not None:
            return ended
        return await self.forwarded()

    def record(self, status: str, **extra: Any) -> None:
        self.gateway.count(status)
        self.gateway.recorder.record(
            CallRecord(
                application_id=self.caller.application_id,
                trace_id=self.caller.trace_id,
                step=self.step,
                tool=self.name,
                status=status,
                occurred_at=self.occurred_at,
                duration_ms=round((time.monotonic() - self.started) * 1000),
                **extra,
            )
        )

    def refuse(self, rule: str, argument: str, message: str) -> types.CallToolResult:
        self.record(REFUSED, args=self.args, rule=rule, field=argument, error=message)
        where = f", argument {argument}" if argument else ""
        self.meta["refused"] = {"rule": rule, "field": argument}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Refused ({rule}{where}): {message}")],
            is_error=True,
            _meta={META_KEY: self.meta},
        )

    def failed(self, message: str) -> types.CallToolResult:
        self.record("error", args=self.args, error=message)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=message)],
            is_error=True,
            _meta={META_KEY: self.meta},
        )

    async def begin(self) -> Begun | types.CallToolResult:
        """The session's earlier calls and the application's count this minute, in one read."""
        self.window, self.elapsed = rate_window(time.time())
        try:
            return await self.gateway.sessions.begin(
                self.caller.session_key,
                counter=str(self.caller.application_id) if self.catalog.calls_per_minute else "",
                window=self.window,
            )
        except SessionStoreDown as exc:
            self.gateway.count("unavailable")
            logger.warning("gateway: the session store did not answer: %s", exc)
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text",
                        text="The gateway cannot read this session's earlier calls now (its "
                        "store, Redis, did not answer), so it cannot judge the call; call again "
                        "shortly.",
                    )
                ],
                is_error=True,
            )

    def rate_limited(self, begun: Begun) -> types.CallToolResult | None:
        retry_after = rate_retry_after(
            limit=self.catalog.calls_per_minute,
            current=begun.calls_this_minute,
            previous=begun.calls_last_minute,
            elapsed=self.elapsed,
        )
        if retry_after is None:
            return None
        self.meta["retryAfter"] = retry_after
        return self.refuse(
            "rate_limit",
            "",
            f"this application may make {self.catalog.calls_per_minute} calls a minute through "
            "the gateway (its gateway setting calls_per_minute, or MCP_GATEWAY_CALLS_PER_MINUTE), "
            f"and it made more in the last minute; call again in {retry_after} s.",
        )

    def approved(self) -> types.CallToolResult | None:
        tool = self.catalog.tools.get(self.name)
        if tool is not None:
            self.tool = tool
            return None
        return self.refuse(
            "approved",
            "name",
            f"{self.name!r} is not an approved tool this application may call; list the tools "
            "(tools/list) and call one of those.",
        )

    async def checked(self) -> types.CallToolResult | None:
        """The approved schema, the invariants (which may correct the arguments), the plan
        rules and ``requires`` against the session's earlier calls."""
        check = functools.partial(
            call_check,
            name=self.name,
            document=self.tool.document,
            args=self.args,
            earlier=[call for call in self.state.calls if call.get("tool") == self.name],
            produced=self.state.produced,
            requires_mode=self.catalog.requires_mode,
        )
        checked = check() if _small(self.args) else await anyio.to_thread.run_sync(check)
        if not isinstance(checked, Checked):
            return self.refuse(checked.rule, checked.field, checked.message)
        self.args = checked.args
        if checked.corrected:
            self.meta["corrected"] = checked.corrected
            self.meta["arguments"] = checked.args
        if checked.warnings:
            self.meta["warnings"] = checked.warnings
        if self.tool.problem:
            return self.failed(
                f"{self.tool.name} cannot be reached as configured: {self.tool.problem}"
            )
        return None

    async def pinned(self) -> types.CallToolResult | None:
        """The upstream's live definition still hashes to the approved pin."""
        assert self.gateway.pool is not None
        self.upstream = self.gateway.pool.get(self.tool.upstream)
        try:
            pins = await self.upstream.live_pins()
        except UpstreamFailed as exc:
            return self.failed(str(exc))
        live = pins.get(self.tool.local_name)
        if live == self.tool.pin:
            return None
        ticket = await sync_to_async(services.upstream_changed)(
            server_id=self.tool.server_id, tool_name=self.tool.name
        )
        what = "is no longer declared by" if live is None else "changed on"
        review = (
            f"ticket #{ticket}"
            if ticket is not None
            else "a sync is queued to open its change ticket"
        )
        return self.refuse(
            "pin",
            "",
            f"{self.tool.name} {what} its server since review; {review}. It cannot be called "
            "until reviewers approve the new definition.",
        )

    def confirmed(self) -> Answer | None:
        """A risk level that asks for each call to be confirmed: the user's answer, or the
        question to ask it."""
        if not self.tool.confirm:
            return None
        answer = self.asker.answer()
        if answer is None:
            if not self.asker.can_ask():
                return self.refuse(
                    "confirmation",
                    "",
                    f"calls of {self.tool.name} (risk {self.tool.risk}) must be confirmed by the "
                    "user, and this client cannot be asked: the gateway asks through MCP "
                    "elicitation in protocol 2026-07-28 (input requests), and this client did "
                    "not declare elicitation or speaks an earlier version. Make the call from a "
                    "client that can ask its user.",
                )
            return self.asker.question(self.tool.name, self.tool.risk, self.args)
        if answer != "accept":
            return self.refuse(
                "confirmation",
                "",
                f"the user answered {answer} when asked to confirm this call of "
                f"{self.tool.name}; do not make it again unless the user asks for it.",
            )
        self.meta["confirmed"] = True
        return None

    async def forwarded(self) -> types.CallToolResult:
        """The call on its upstream, within the application's share of this process."""
        gateway, application_id = self.gateway, self.caller.application_id
        # Fairness: past its share an application's call is refused at once rather than
        # queued, so one application's slow upstream or flood never holds another's calls.
        limit = settings.MCP_GATEWAY_APPLICATION_CONCURRENCY
        if gateway.in_flight.get(application_id, 0) >= limit:
            return self.refuse(
                "concurrency",
                "",
                f"this application already has {limit} calls in flight in this gateway process "
                "(MCP_GATEWAY_APPLICATION_CONCURRENCY); wait for one to finish and call again.",
            )
        gateway.in_flight[application_id] = gateway.in_flight.get(application_id, 0) + 1
        call = running_key(self.caller.session_key, self.request_id)
        outcome: tuple[types.CallToolResult, int] | UpstreamFailed | None = None
        with anyio.CancelScope() as running:
            gateway.running[call] = running
            try:
                outcome = await self.upstream.call(
                    self.tool.local_name,
                    self.args,
                    timeout_ms=self.tool.timeout_ms,
                    max_output_bytes=self.tool.max_output_bytes,
                    progress=self.report,
                )
            except UpstreamFailed as exc:
                outcome = exc
            finally:
                gateway.in_flight[application_id] -= 1
                if gateway.running.get(call) is running:
                    del gateway.running[call]
        if outcome is None:
            # The client cancelled (or left): the upstream was told to stop by the SDK's
            # client, which sends notifications/cancelled for a request it abandons. Not the
            # tool's behaviour, so not a trace: a refusal, beside them.
            return self.refuse(
                "cancelled",
                "",
                f"the client cancelled this call of {self.name}; {self.tool.upstream.name} was "
                "told to stop.",
            )
        if isinstance(outcome, UpstreamFailed):
            return self.failed(str(outcome))
        return await self.answered(*outcome)

    async def answered(self, result: types.CallToolResult, size: int) -> types.CallToolResult:
        """The upstream's result, checked against the approved output schema, recorded,
        remembered in the session where a later call is judged by it."""
        output_schema = self.tool.document.get("output_schema")
        if output_schema and result.structured_content is not None and not result.is_error:
            try:
                problems = await anyio.to_thread.run_sync(
                    schema_problems, output_schema, result.structured_content
                )
            except (WorkBudgetExceeded, SchemaTooCostly):
                problems = ["output: too costly to check against the approved output schema"]
            if problems:
                self.meta["outputViolations"] = problems
                logger.info("%s: output violates its approved schema: %s", self.name, problems[:3])
        status = "error" if result.is_error else "success"
        error_text = _text(result) if result.is_error else ""
        self.record(
            status, args=self.args, output=_output(result), error=error_text, output_bytes=size
        )
        produces = self.tool.document.get("produces") or []
        if not result.is_error and (self.tool.counted or produces):
            # Only what a later call is judged by: the calls a plan invariant counts, the
            # variables a later call's requires look for.
            try:
                await self.gateway.sessions.add(
                    self.caller.session_key, tool=self.name, args=self.args, produces=produces
                )
            except SessionStoreDown as exc:
                # The call went through; a later one is judged without it.
                logger.warning("gateway: %s not remembered in its session: %s", self.name, exc)
        upstream_meta = dict(result.meta or {})
        upstream_meta[META_KEY] = self.meta
        if self.meta.get("outputViolations"):
            # The trace keeps what the tool answered (ingest's output check records the
            # violation for learning); the client gets no structured content its listed schema
            # refuses, which an MCP server must never send and the SDKs' clients reject.
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text",
                        text=f"The result of {self.name} does not match its approved output "
                        "schema: "
                        + "; ".join(self.meta["outputViolations"][:5])
                        + ". It is reported to the registry's reviewers; do not rely on it.",
                    )
                ],
                is_error=True,
                _meta=upstream_meta,
            )
        return types.CallToolResult(
            content=result.content,
            structured_content=result.structured_content,
            is_error=result.is_error,
            _meta=upstream_meta,
        )


def _output(result: types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    return {
        "content": [item.model_dump(by_alias=True, exclude_none=True) for item in result.content]
    }


def _text(result: types.CallToolResult) -> str:
    texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
    return (" ".join(texts) or json.dumps(_output(result)))[:2000]
