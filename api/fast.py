"""The fast read path: the runtime API's hot reads answered in front of Django.

``FastReads`` wraps the WSGI application (``config/wsgi.py``). For a ``GET`` of
``revision/``, ``tools/{name}/``, a ``tools/`` page or an export with a bearer token, it makes
one Redis round trip, a Lua script that reads the registry revision and the token's record,
counts the request in the token's throttle window and fetches the body from the application's
bundle for that revision (``api/bundles.py``), then answers with the very status, headers, ETag
and body the normal path would. Whatever it cannot answer with certainty goes to Django
unchanged: no bearer token, a token it has no fresh record of (unknown, revoked, expired, of an
older revision, lacking the scope: the normal path says which, in the same words as before), an
unknown query parameter, a bundle not rendered yet (it queues the render), a host Django would
refuse, plain HTTP under ``SECURE_SSL_REDIRECT``, or Redis failing (its circuit breaker makes
that immediate). So the normal path stays the definition, and this one a shortcut to it.

What the shortcut must reproduce of the layers it skips is small and checked at start-up: the
middleware list must be the one it was written against (``MIDDLEWARE``), whose only effects on
these answers are the security headers and ``Content-Length``; DRF adds ``Allow``; the ETag,
``Cache-Control`` and 304s come from ``api/caching.py``'s rules; errors (404, 429) have the API's
one shape. ``tests/test_fast_reads.py`` compares both paths response by response.
"""

import functools
import json
import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.handlers.wsgi import WSGIRequest
from django.http import QueryDict
from django.http.request import split_domain_port, validate_host
from django.urls import reverse
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from redis.commands.core import Script
from redis.exceptions import RedisError
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.utils.urls import remove_query_param, replace_query_param

from registry.revision import CACHE_KEY as REVISION_CACHE_KEY

from . import views
from .bundles import bundle_field, bundle_key_prefix
from .caching import etag_of, known_parameters
from .errors import error_body
from .models import FAST_TOKEN_PREFIX, RuntimeToken
from .tasks import bundle_render
from .throttling import COUNTED_ENVIRON_KEY, RuntimeThrottle

logger = logging.getLogger(__name__)

# The middleware this path was written against: what they add to a read's answer is added here.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",  # leaves /api/ out (CONTENT_SECURITY_POLICY): adds nothing
    "axes.middleware.AxesMiddleware",  # acts on locked-out logins only: adds nothing here
]

# DRF splits the header on whitespace and compares the keyword without case; a token is "trk_"
# and URL-safe base64. Anything else is left to DRF, which says what is wrong with it.
BEARER = re.compile(r"\A[ \t]*bearer[ \t]+([A-Za-z0-9_\-]{1,200})[ \t]*\Z", re.IGNORECASE)
TOOL_NAME = re.compile(r"\A[A-Za-z0-9_.\-]{1,200}\Z")
# How long one (application, revision) waits before a missing bundle is queued again.
REQUEUE_SECONDS = 30

# One round trip. KEYS: the revision, the token's record. ARGV: now (epoch seconds), the scope
# needed, the throttle key's prefix, its window (ms) and limit (-1: none), the bundle key's
# prefix, the bundle field ('' for none), then the If-None-Match tags. The throttle and bundle
# keys are built here from the record: this needs one Redis server, not a Redis Cluster, which
# is what the cache is. Replies, by their first element:
#   0: no revision cached, 1: no usable record (nothing counted: Django authenticates);
#   2: throttled; 3: counted, no field asked; 4: the bundle's tag is among If-None-Match;
#   5: the body; 6: the field is not in the bundle (then whether the bundle is complete).
SCRIPT = """
local revision = redis.call('GET', KEYS[1])
if not revision then return {0} end
local record = redis.call('GET', KEYS[2])
if not record then return {1} end
local token, app, seen, expires, scopes =
    string.match(record, '^(%d+) (%d+) (%d+) ([%d%.]+) (.*)$')
if not token or seen ~= revision then return {1} end
local ends = tonumber(expires)
if ends ~= 0 and ends <= tonumber(ARGV[1]) then return {1} end
if not string.find(',' .. scopes .. ',', ',' .. ARGV[2] .. ',', 1, true) then return {1} end
local count, left = 0, 0
if tonumber(ARGV[5]) >= 0 then
    local key = ARGV[3] .. token
    count = redis.call('INCR', key)
    left = redis.call('PTTL', key)
    if left < 0 then
        redis.call('PEXPIRE', key, ARGV[4])
        left = tonumber(ARGV[4])
    end
    if count > tonumber(ARGV[5]) then return {2, revision, app, token, count, left} end
end
if ARGV[7] == '' then return {3, revision, app, token, count, left} end
local bundle = ARGV[6] .. app .. ':' .. revision
local tag = redis.call('HGET', bundle, '#' .. ARGV[7])
if tag then
    for i = 8, #ARGV do
        if ARGV[i] == tag then return {4, revision, app, token, count, left, tag} end
    end
    return {5, revision, app, token, count, left, tag, redis.call('HGET', bundle, ARGV[7])}
end
return {6, revision, app, token, count, left, redis.call('HEXISTS', bundle, '!')}
"""

Answer = tuple[str, list[tuple[str, str]], bytes]
StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class Route:
    kind: str  # "revision", "detail", "list" or "export"
    known: frozenset[str]
    cache_seconds: int


@dataclass(frozen=True)
class Redis:
    """One cache's client and key names (Django's caches are per thread)."""

    script: Script
    client: Any
    revision_key: str
    token_prefix: str
    throttle_prefix: str
    bundle_prefix: str
    queued_prefix: str


class FastReads:
    """A WSGI application: answers the hot reads it can, hands everything else to ``app``."""

    def __init__(self, app: Callable[[dict, StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self._routes: dict[str, Route] | None = None
        self._detail: tuple[str, str, Route] | None = None
        self._enabled: bool | None = None
        self._clients: weakref.WeakKeyDictionary[RedisCache, Redis] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        answer = self.answer(environ)
        if answer is None:
            return self.app(environ, start_response)
        status, headers, body = answer
        start_response(status, headers)
        return [body]

    # -- what it answers ----------------------------------------------------------------------

    def answer(self, environ: dict) -> Answer | None:
        """The response to this request, or None to leave it to Django."""
        if environ.get("REQUEST_METHOD") != "GET" or not self.enabled():
            return None
        path = environ.get("PATH_INFO", "")
        route = self.route(path)
        if route is None:
            return None
        match = BEARER.match(environ.get("HTTP_AUTHORIZATION", ""))
        if match is None:
            return None
        secure = _is_secure(environ)
        if settings.SECURE_SSL_REDIRECT and not secure:
            return None  # Django redirects to HTTPS
        host = _raw_host(environ, secure)
        if host is None or not _host_allowed(host, tuple(settings.ALLOWED_HOSTS), settings.DEBUG):
            return None  # Django answers 400
        params = _known_params(environ.get("QUERY_STRING", ""), route.known)
        if params is None:
            return None  # an unknown parameter: Django says which, 400
        redis = self.redis()
        if redis is None:
            return None
        field = "" if route.kind == "revision" else bundle_field(path, params)
        sent = [tag.strip() for tag in environ.get("HTTP_IF_NONE_MATCH", "").split(",")]
        limit, window = _rate(RuntimeThrottle.THROTTLE_RATES.get(RuntimeThrottle.scope))
        digest = RuntimeToken.hash(match.group(1))
        try:
            reply = redis.script(
                keys=[redis.revision_key, redis.token_prefix + digest],
                args=[
                    f"{time.time():.3f}",
                    RuntimeToken.Scope.CONTRACTS_READ.value,
                    redis.throttle_prefix,
                    window * 1000,
                    limit,
                    redis.bundle_prefix,
                    field,
                    *sent,
                ],
            )
        except RedisError:
            return None  # the normal path treats Redis as a miss (and the breaker is now open)
        code = int(reply[0])
        if code < 2:
            return None
        revision, application, token, count, left_ms = (int(value) for value in reply[1:6])
        seconds_left = left_ms / 1000
        if code == 2:
            return _throttled(max(seconds_left, 1.0), secure)
        # Counted: if Django answers after all, it must not count the request twice.
        environ[COUNTED_ENVIRON_KEY] = (f"throttle:runtime:token-{token}", count, seconds_left)
        headers = _Headers(secure=secure, cache_seconds=route.cache_seconds)
        if code == 4:
            return headers.not_modified(reply[6].decode())
        tag = etag_of(revision=revision, caller=f"app-{application}", path=path, params=params)
        if code == 3:  # revision/
            if tag in sent:
                return headers.not_modified(tag)
            return headers.ok(tag, b'{"revision":%d}' % revision)
        if code == 5:
            value = reply[7]
            kind, payload = value[:1], value[1:]
            if kind == b"B":
                return headers.ok(tag, payload)
            if kind == b"P":
                return headers.ok(tag, _page(environ, payload))
            if kind == b"F":
                return headers.accel(tag, settings.API_BUNDLE_URL + payload.decode())
            return None
        # 6: not in the bundle. The normal path answers a matching tag before it reads anything.
        if tag in sent:
            return headers.not_modified(tag)
        complete = bool(int(reply[6]))
        if complete and route.kind == "detail":
            return _error(404, str(NotFound.default_detail), secure)
        if not complete:
            self._queue(redis, application, revision)
        return None

    # -- set-up, once ---------------------------------------------------------------------------

    def enabled(self) -> bool:
        if self._enabled is None:
            self._enabled = self._check()
        return self._enabled

    def _check(self) -> bool:
        if not getattr(settings, "API_FAST_READS", True):
            return False
        if list(settings.MIDDLEWARE) != MIDDLEWARE:
            logger.warning("the fast read path is off: MIDDLEWARE differs from api.fast's list")
            return False
        if getattr(settings, "FORCE_SCRIPT_NAME", None):
            logger.warning("the fast read path is off: FORCE_SCRIPT_NAME is set")
            return False
        return True

    def route(self, path: str) -> Route | None:
        if self._routes is None:
            self._build_routes()
        assert self._routes is not None and self._detail is not None
        route = self._routes.get(path)
        if route is not None:
            return route
        prefix, suffix, detail = self._detail
        if path.startswith(prefix) and path.endswith(suffix):
            name = path[len(prefix) : len(path) - len(suffix)]
            if TOOL_NAME.match(name):
                return detail
        return None

    def _build_routes(self) -> None:
        def route(kind: str, view: type, cache_seconds: int = 5) -> Route:
            return Route(kind, known_parameters(view), cache_seconds)

        routes = {
            reverse("revision"): route("revision", views.RevisionView, 1),
            reverse("tool-list"): route("list", views.ToolListView),
            reverse("export-openai"): route("export", views.OpenAIExportView),
            reverse("export-anthropic"): route("export", views.AnthropicExportView),
            reverse("export-mcp"): route("export", views.MCPExportView),
        }
        prefix, suffix = reverse("tool-detail", kwargs={"name": "NAME"}).split("NAME")
        self._detail = (prefix, suffix, route("detail", views.ToolDetailView))
        self._routes = routes

    def redis(self) -> Redis | None:
        cache = caches["default"]
        if not isinstance(cache, RedisCache):
            return None
        redis = self._clients.get(cache)
        if redis is None:
            with self._lock:
                client = get_redis_connection("default")

                def key(name: str) -> str:
                    return str(cache.make_key(name))

                if key("x1") != key("") + "x1":  # a custom KEY_FUNCTION: the script cannot join
                    return None
                redis = Redis(
                    script=client.register_script(SCRIPT),
                    client=client,
                    revision_key=key(REVISION_CACHE_KEY),
                    token_prefix=key(FAST_TOKEN_PREFIX),
                    throttle_prefix=key("throttle:runtime:token-"),
                    bundle_prefix=bundle_key_prefix(),
                    queued_prefix=key("registry:bundle-queued:"),
                )
                self._clients[cache] = redis
        return redis

    def _queue(self, redis: Redis, application: int, revision: int) -> None:
        """Ask for the missing bundle, once per (application, revision) and REQUEUE_SECONDS."""
        try:
            first = redis.client.set(
                f"{redis.queued_prefix}{application}:{revision}", 1, nx=True, ex=REQUEUE_SECONDS
            )
            if first:
                bundle_render.apply_async(args=[application], retry=False)
        except Exception as exc:  # Redis or the broker: the normal path answers regardless
            logger.warning("bundle of application %s not queued: %s", application, exc)


# -- the parts of Django's answer this path must make itself ------------------------------------


class _Headers:
    """Headers as the normal path sends them: DRF's ``Allow``, ``api/caching.py``'s ETag and
    ``Cache-Control``, and what the middleware in MIDDLEWARE add."""

    def __init__(self, *, secure: bool, cache_seconds: int) -> None:
        self.secure = secure
        self.cache_control = f"private, max-age={cache_seconds}, must-revalidate"

    def ok(self, tag: str, body: bytes) -> Answer:
        headers = [("Content-Type", "application/json"), *self._conditional(tag)]
        return "200 OK", _finish(headers, body, self.secure), body

    def not_modified(self, tag: str) -> Answer:
        return "304 Not Modified", _finish(self._conditional(tag), b"", self.secure), b""

    def accel(self, tag: str, location: str) -> Answer:
        """nginx sends the file at ``location`` (an internal location) with these headers."""
        headers = [
            ("Content-Type", "application/json"),
            *self._conditional(tag),
            ("X-Accel-Redirect", location),
        ]
        return "200 OK", _finish(headers, b"", self.secure), b""

    def _conditional(self, tag: str) -> list[tuple[str, str]]:
        return [
            ("Allow", "GET, HEAD, OPTIONS"),
            ("ETag", tag),
            ("Cache-Control", self.cache_control),
        ]


def _finish(headers: list[tuple[str, str]], body: bytes, secure: bool) -> list[tuple[str, str]]:
    """What XFrameOptions, Common and Security middleware add, read from the same settings."""
    headers.append(("X-Frame-Options", getattr(settings, "X_FRAME_OPTIONS", "DENY").upper()))
    headers.append(("Content-Length", str(len(body))))
    if settings.SECURE_HSTS_SECONDS and secure:
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            value += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            value += "; preload"
        headers.append(("Strict-Transport-Security", value))
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    policy = settings.SECURE_REFERRER_POLICY
    if policy:
        values = [v.strip() for v in policy.split(",")] if isinstance(policy, str) else policy
        headers.append(("Referrer-Policy", ",".join(values)))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    return headers


def _json(data: dict) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _error(status: int, message: str, secure: bool, extra: tuple = ()) -> Answer:
    body = _json(error_body(status, message))
    headers = [("Content-Type", "application/json"), *extra, ("Allow", "GET, HEAD, OPTIONS")]
    reason = {404: "Not Found", 429: "Too Many Requests"}[status]
    return f"{status} {reason}", _finish(headers, body, secure), body


def _throttled(wait: float, secure: bool) -> Answer:
    seconds = math.ceil(wait)  # DRF's rounding, its words and its header
    message = str(Throttled(seconds).detail)
    return _error(429, message, secure, extra=(("Retry-After", str(seconds)),))


def _page(environ: dict, payload: bytes) -> bytes:
    """A ``tools/`` page as DRF's PageNumberPagination renders it, its links made from this
    request's absolute URL exactly as DRF makes them."""
    head, results = payload.split(b"\n", 1)
    count, page, pages = (int(value) for value in head.split())
    following = previous = None
    if page > 1 or page < pages:
        url = WSGIRequest(environ).build_absolute_uri()
        if page < pages:
            following = replace_query_param(url, "page", page + 1)
        if page == 2:
            previous = remove_query_param(url, "page")
        elif page > 2:
            previous = replace_query_param(url, "page", page - 1)
    links = _json({"next": following, "previous": previous})[1:-1]
    return b'{"count":%d,%s,"results":%s}' % (count, links, results)


def _is_secure(environ: dict) -> bool:
    """``request.is_secure()``: the proxy's header when configured, else the WSGI scheme."""
    if settings.SECURE_PROXY_SSL_HEADER:
        name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        value = environ.get(name)
        if value is not None:
            return value.split(",", 1)[0].strip() == secure_value
    return environ.get("wsgi.url_scheme") == "https"


def _raw_host(environ: dict, secure: bool) -> str | None:
    """``request._get_raw_host()``."""
    if settings.USE_X_FORWARDED_HOST and "HTTP_X_FORWARDED_HOST" in environ:
        return environ["HTTP_X_FORWARDED_HOST"]
    if "HTTP_HOST" in environ:
        return environ["HTTP_HOST"]
    if "SERVER_NAME" not in environ:
        return None
    host, port = environ["SERVER_NAME"], str(environ.get("SERVER_PORT", ""))
    if settings.USE_X_FORWARDED_PORT and "HTTP_X_FORWARDED_PORT" in environ:
        port = environ["HTTP_X_FORWARDED_PORT"]
    return host if port == ("443" if secure else "80") else f"{host}:{port}"


@functools.lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...], debug: bool) -> bool:
    """``request.get_host()``'s check; a few hosts repeat, so the answer is remembered."""
    if debug and not allowed:
        allowed = (".localhost", "127.0.0.1", "[::1]")
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def _known_params(query: str, known: frozenset[str]) -> list[tuple[str, str]] | None:
    """The known parameters with their last values in the ETag's order; None if any is unknown.
    Parsed by Django's own QueryDict, from the bytes Django would parse."""
    if not query:
        return []
    values = QueryDict(query.encode("iso-8859-1"))
    if not set(values) <= known:
        return None
    return sorted((name, values.get(name, "")) for name in values)


@functools.lru_cache(maxsize=8)
def _rate(rate: str | None) -> tuple[int, int]:
    """(limit, window seconds) of a DRF rate such as "6000/min"; (-1, 0) for no throttling."""
    if rate is None:
        return -1, 0
    throttle = RuntimeThrottle.__new__(RuntimeThrottle)
    limit, window = throttle.parse_rate(rate)
    if limit is None or window is None:
        return -1, 0
    return int(limit), int(window)
