"""The fast read path: the runtime API's hot reads answered from Redis, inside Django.

``FastReadsMiddleware`` sits in ``MIDDLEWARE`` after the middleware that shape every answer
(security, common, clickjacking: they check the host, redirect plain HTTP and add their headers
to its answers as to any other) and before the ones a bearer-token read does not use (sessions,
CSRF, the admin's authentication, messages). For a ``GET`` of ``revision/``, ``tools/{name}/``,
a ``tools/`` page or an export with a bearer token it makes one Redis round trip, a Lua script
that reads the registry revision and the token's record, counts the request in the token's
throttle window (``api/throttling.py``'s own script and key) and fetches the body from the
application's bundle for that revision (``api/bundles.py``), then answers with the status,
headers, ETag and body the view would. Whatever it cannot answer with certainty goes on to the
view: a token it has no fresh record of (unknown, revoked, expired, of an older revision,
lacking the scope: the view says which, and failed authentication is only ever decided there,
by ``api/auth.py``), an unknown query parameter, a bundle not rendered yet (it queues the
render), Redis failing (its circuit breaker makes that immediate), or the database failing when
the revision's expired copy is put back. So the view stays the definition, and this a shortcut
to it through the same code: the token is read from the header by ``api.auth.bearer_token``,
the throttle decides with ``RuntimeThrottle``, errors come from the API's exception handler,
links from DRF's paginator, ETag and ``Cache-Control`` from ``api/caching.py``.
``api/tests/test_fast_reads.py`` compares both paths response by response.
"""

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import MiddlewareNotUsed
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.urls import reverse
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from redis import Redis as RedisClient
from redis.commands.core import Script
from redis.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework.exceptions import APIException, AuthenticationFailed, NotFound, Throttled
from rest_framework.renderers import JSONRenderer

from registry.revision import CACHE_KEY as REVISION_CACHE_KEY
from registry.revision import revision_shared

from . import views
from .auth import bearer_token
from .bundles import bundle_field, bundle_files_root, bundle_key_prefix
from .caching import conditional_headers, etag_of, known_parameters, known_values
from .errors import exception_handler
from .models import FAST_TOKEN_PREFIX, RuntimeToken
from .tasks import bundle_render_queue
from .throttling import COUNTED_ENVIRON_KEY, WINDOW_HIT_FUNCTION, RuntimeThrottle

logger = logging.getLogger(__name__)

# Set in the request's META when this path answered (tests and logs tell the paths apart).
ANSWERED_KEY = "registry.fast_read"
# How the fast path's connections name themselves to Redis (CLIENT LIST shows them).
CLIENT_NAME = "registry-fast-reads"
# nginx sets this header on what it proxies (deploy/nginx.conf): only then may an export be
# answered with X-Accel-Redirect; straight to gunicorn, the file's body is sent.
ACCEL_HEADER = "HTTP_X_SENDFILE_TYPE"
ACCEL_VALUE = "X-Accel-Redirect"

# One round trip. KEYS: the revision, the token's record. ARGV: now (epoch seconds), the bundle
# field ('' for none), then the If-None-Match tags. What is the same for every request (the
# scope, the throttle's key prefix, window and limit, the bundles' key prefix) is written into
# the script where it is made, once per process and setting (``Redis``): every argument and
# every element of the reply costs packing and parsing on each request. The throttle and
# bundle keys are built here from the record: this needs one Redis server, not a Redis
# Cluster, which is what the cache is. Replies: {code, "revision application token count
# left", ...}, by code:
#   0: no revision cached, 1: no usable record (nothing counted: the view authenticates);
#   2: over the limit (the body is not fetched); 3: counted, no field asked; 4: the bundle's
#   tag is among If-None-Match, then the tag; 5: then the tag and the body; 6: the field is
#   not in the bundle, then whether the bundle is complete (1 or 0).
SCRIPT = (
    WINDOW_HIT_FUNCTION
    + """
local SCOPE, THROTTLE, WINDOW, LIMIT, BUNDLES = %(scope)s, %(throttle)s, %(window)d, %(limit)d,
    %(bundles)s
local revision = redis.call('GET', KEYS[1])
if not revision then return {0} end
local record = redis.call('GET', KEYS[2])
if not record then return {1} end
local token, app, seen, expires, scopes =
    string.match(record, '^(%%d+) (%%d+) (%%d+) ([%%d%%.]+) (.*)$')
if not token or seen ~= revision then return {1} end
local ends = tonumber(expires)
if ends ~= 0 and ends <= tonumber(ARGV[1]) then return {1} end
if not string.find(',' .. scopes .. ',', ',' .. SCOPE .. ',', 1, true) then return {1} end
local count, left = 0, 0
if THROTTLE ~= '' then
    count, left = window_hit(THROTTLE .. token, WINDOW)
end
local head = revision .. ' ' .. app .. ' ' .. token .. ' ' .. count .. ' ' .. left
if THROTTLE ~= '' and count > LIMIT then return {2, head} end
if ARGV[2] == '' then return {3, head} end
local bundle = BUNDLES .. app .. ':' .. revision
local tag = redis.call('HGET', bundle, '#' .. ARGV[2])
if tag then
    for i = 3, #ARGV do
        if ARGV[i] == tag then return {4, head, tag} end
    end
    return {5, head, tag, redis.call('HGET', bundle, ARGV[2])}
end
return {6, head, redis.call('HEXISTS', bundle, '!')}
"""
)


def _evalsha(connection: Connection, script: Script, keys: list[str], args: list[str]) -> Any:
    """What ``script(keys, args)`` does, on ``connection``: a server that lost its scripts (a
    restart, a failover) gets it loaded again by ``Script`` itself; a connection that failed is
    closed, and opens again (through the circuit breaker) on its next use."""
    try:
        connection.connect()  # as the pool does on each hand-out: the circuit breaker decides
        connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return connection.read_response()
    except NoScriptError:
        return script(keys=keys, args=args)
    except (RedisConnectionError, RedisTimeoutError):
        connection.disconnect()
        raise


def lua_string(value: str) -> str:
    """A Lua long-bracket literal of ``value``, whatever it holds."""
    level = 0
    while f"]{'=' * level}]" in value:
        level += 1
    return f"[{'=' * level}[{value}]{'=' * level}]"


@dataclass(frozen=True)
class Route:
    kind: str  # "revision", "detail", "list" or "export"
    known: frozenset[str]
    cache_seconds: int
    allow: str  # DRF's Allow header for the view


@dataclass(frozen=True)
class Redis:
    """One cache's client, key names and script (Django's caches are per thread)."""

    client: RedisClient
    script: Script
    revision_key: str
    token_prefix: str
    # The throttle the script was written for: (scope, limit, window), None for no throttling.
    throttle: tuple[str, int, int] | None


class FastReadsMiddleware:
    """Answers the hot reads it can from the bundles; hands everything else on."""

    def __init__(self, get_response: Any) -> None:
        if not settings.API_FAST_READS:
            raise MiddlewareNotUsed("API_FAST_READS is off")
        self.get_response = get_response
        self._routes: dict[str, Route] | None = None
        self._detail: tuple[str, str, Route] | None = None
        self._clients: weakref.WeakKeyDictionary[RedisCache, Redis] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._own = threading.local()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.answer(request)
        if response is None:
            return self.get_response(request)
        request.META[ANSWERED_KEY] = True
        return response

    def answer(self, request: HttpRequest) -> HttpResponse | None:
        """The response to this request, or None to leave it to the view."""
        if request.method != "GET":
            return None
        route = self.route(request.path)
        if route is None:
            return None
        try:
            raw = bearer_token(request)
        except AuthenticationFailed:
            return None  # the view says what is wrong with the header
        if raw is None:
            return None
        params: list[tuple[str, str]] = []
        if request.META.get("QUERY_STRING"):
            if not set(request.GET) <= route.known:
                return None  # an unknown parameter: the view says which, 400
            params = known_values(request.GET, route.known)
        throttle = RuntimeThrottle()
        limited = throttle.rate is not None
        redis = self.redis(
            (throttle.scope, throttle.num_requests, throttle.duration) if limited else None
        )
        if redis is None:
            return None
        field = "" if route.kind == "revision" else bundle_field(request.path, params)
        sent = [tag.strip() for tag in request.META.get("HTTP_IF_NONE_MATCH", "").split(",")]
        connection = self.connection(redis.client)
        keys = [redis.revision_key, redis.token_prefix + RuntimeToken.hash(raw)]
        args = [f"{time.time():.3f}", field, *sent]
        try:
            reply = _evalsha(connection, redis.script, keys, args)
            if reply[0] == 0:
                # The cache's copy of the revision expired: put back, not left to the view, which
                # reads its process's copy and would let every read through until that expires.
                revision_shared()
                reply = _evalsha(connection, redis.script, keys, args)
        except RedisError:
            return None  # the view treats Redis as a miss (and the breaker is now open)
        except DatabaseError:
            return None  # the view answers it as the API answers any database failure
        code = int(reply[0])
        if code < 2:
            return None
        revision, application, token, count, left_ms = (int(value) for value in reply[1].split())
        if limited:
            # Counted: if the view answers after all, it must not count the request twice.
            hit = (count, left_ms / 1000)
            request.META[COUNTED_ENVIRON_KEY] = (RuntimeThrottle.token_key(token), *hit)
            if not throttle.allow_hit(hit):
                return _error(Throttled(throttle.wait()), route)
        if code == 4:
            return _not_modified(reply[2].decode(), route)
        if code == 5:  # the bundle's own tag, made by etag_of when it was rendered
            tag, value = reply[2].decode(), reply[3]
            kind, payload = value[:1], value[1:]
            if kind == b"B":
                return _ok(payload, tag, route)
            if kind == b"P":
                return _ok(_page(request, payload), tag, route)
            if kind == b"F":
                return _file(request, payload.decode(), tag, route)
            return None
        tag = etag_of(
            revision=revision, caller=f"app-{application}", path=request.path, params=params
        )
        if code == 3:  # revision/
            if tag in sent:
                return _not_modified(tag, route)
            return _ok(b'{"revision":%d}' % revision, tag, route)
        # 6: not in the bundle. The view answers a matching tag before it reads anything.
        if tag in sent:
            return _not_modified(tag, route)
        complete = bool(int(reply[2]))
        if complete and route.kind == "detail":
            return _error(NotFound(), route)
        if not complete:
            bundle_render_queue(application_id=application)
        return None

    # -- set-up, once ---------------------------------------------------------------------------

    def route(self, path: str) -> Route | None:
        if self._routes is None:
            self._build_routes()
        assert self._routes is not None and self._detail is not None
        route = self._routes.get(path)
        if route is not None:
            return route
        prefix, suffix, detail = self._detail
        if path.startswith(prefix) and path.endswith(suffix) and len(path) > len(prefix + suffix):
            name = path[len(prefix) : len(path) - len(suffix)]
            if "/" not in name:
                return detail
        return None

    def _build_routes(self) -> None:
        def route(kind: str, view: type[views.RuntimeView]) -> Route:
            instance = view()
            instance.setup(HttpRequest())  # as for a request: GET brings HEAD along
            allow = ", ".join(instance.allowed_methods)
            return Route(kind, known_parameters(view), instance.cache_seconds, allow)  # type: ignore[attr-defined]

        routes = {
            reverse("revision"): route("revision", views.RevisionView),
            reverse("tool-list"): route("list", views.ToolListView),
            reverse("export-openai"): route("export", views.OpenAIExportView),
            reverse("export-anthropic"): route("export", views.AnthropicExportView),
            reverse("export-mcp"): route("export", views.MCPExportView),
        }
        prefix, suffix = reverse("tool-detail", kwargs={"name": "NAME"}).split("NAME")
        self._detail = (prefix, suffix, route("detail", views.ToolDetailView))
        self._routes = routes

    def connection(self, client: RedisClient) -> Connection:
        """This thread's own connection to the cache's server, made like the pool's. A pooled
        one costs more CPU than the script's round trip itself (the pool's lock, its metrics,
        a liveness check on every hand-out), and a thread answers one request at a time."""
        pool = client.connection_pool
        own = self._own
        if getattr(own, "pool", None) is not pool:
            if getattr(own, "connection", None) is not None:
                own.connection.disconnect()
            own.connection = pool.connection_class(
                **{**pool.connection_kwargs, "client_name": CLIENT_NAME}
            )
            own.pool = pool
        return own.connection

    def redis(self, throttle: tuple[str, int, int] | None) -> Redis | None:
        """The default cache's client and the script written for this throttle, made once."""
        cache = caches["default"]
        if not isinstance(cache, RedisCache):
            return None
        redis = self._clients.get(cache)
        if redis is None or redis.throttle != throttle:
            with self._lock:

                def key(name: str) -> str:
                    return str(cache.make_key(name))

                if key("x1") != key("") + "x1":  # a custom KEY_FUNCTION: the script cannot join
                    return None
                source = SCRIPT % {
                    "scope": lua_string(RuntimeToken.Scope.CONTRACTS_READ.value),
                    "throttle": lua_string(key(RuntimeThrottle.token_key("")) if throttle else ""),
                    "limit": throttle[1] if throttle else 0,
                    "window": throttle[2] * 1000 if throttle else 0,
                    "bundles": lua_string(bundle_key_prefix()),
                }
                client = get_redis_connection("default")
                redis = Redis(
                    client=client,
                    script=client.register_script(source),
                    revision_key=key(REVISION_CACHE_KEY),
                    token_prefix=key(FAST_TOKEN_PREFIX),
                    throttle=throttle,
                )
                self._clients[cache] = redis
        return redis


# -- the answers, as the views make them ------------------------------------------------------


def _ok(body: bytes, tag: str, route: Route) -> HttpResponse:
    response = HttpResponse(body, content_type="application/json")
    return _finish(response, tag, route)


def _not_modified(tag: str, route: Route) -> HttpResponse:
    return _finish(HttpResponseNotModified(), tag, route)


def _finish(response: HttpResponse, tag: str, route: Route) -> HttpResponse:
    conditional_headers(response, etag=tag, cache_seconds=route.cache_seconds)
    response["Allow"] = route.allow
    return response


def _error(exc: APIException, route: Route) -> HttpResponse:
    """The API's error answer, from its own exception handler and renderer."""
    response = exception_handler(exc, {})
    response.accepted_renderer = JSONRenderer()
    response.accepted_media_type = "application/json"
    response.renderer_context = {}
    response["Allow"] = route.allow
    return response.render()


def _file(request: HttpRequest, relative: str, tag: str, route: Route) -> HttpResponse | None:
    """An export written as a file: nginx sends it when nginx is in front (it says so in a
    header, deploy/nginx.conf), else its body goes out from here."""
    if request.META.get(ACCEL_HEADER) == ACCEL_VALUE:
        response = _ok(b"", tag, route)
        response["X-Accel-Redirect"] = settings.API_BUNDLE_URL + relative
        return response
    root = bundle_files_root()
    try:
        body = (Path(root) / relative).read_bytes() if root else None
    except OSError:
        body = None  # dropped since (a newer revision): the view answers
    return None if body is None else _ok(body, tag, route)


def _page(request: HttpRequest, payload: bytes) -> bytes:
    """A ``tools/`` page with the links DRF's paginator makes for this request."""
    head, results = payload.split(b"\n", 1)
    count, number, _pages = (int(value) for value in head.split())
    paginator = views.Pagination()
    paginator.request = request  # type: ignore[assignment]  # it reads build_absolute_uri only
    paginator.page = Paginator(range(count), paginator.page_size).page(number)
    links = JSONRenderer().render(
        {"next": paginator.get_next_link(), "previous": paginator.get_previous_link()}
    )
    return b'{"count":%d,%s,"results":%s}' % (count, links[1:-1], results)
