"""Runtime authentication: ``Authorization: Bearer <token>``, tokens owned by an Application."""

import functools
import ipaddress
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache, caches
from django.utils import timezone
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from redis.exceptions import RedisError
from rest_framework import HTTP_HEADER_ENCODING, authentication, exceptions, permissions

from registry.models import Application
from registry.revision import revision_current

from .models import RuntimeToken

TOKEN_CACHE_SECONDS = 60
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LAST_USED_EVERY_SECONDS = 60

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    """The request's user when a runtime token authenticated it."""

    application: Application
    token: RuntimeToken

    is_authenticated = True
    is_staff = False

    @property
    def scopes(self) -> set[str]:
        return set(self.token.scopes)


BEARER = "Bearer"


def bearer_token(request) -> str | None:
    """The token of ``Authorization: Bearer <token>``; None without one. A malformed header
    raises ``AuthenticationFailed``. The fast read path (``api/fast.py``) reads it here too."""
    # META rather than DRF's get_authorization_header: the same value, without building
    # request.headers, which a hot read would otherwise pay for this alone.
    value = request.META.get("HTTP_AUTHORIZATION", b"")
    header = (value.encode(HTTP_HEADER_ENCODING) if isinstance(value, str) else value).split()
    if not header or header[0].lower() != BEARER.lower().encode():
        return None
    if len(header) != 2:
        raise exceptions.AuthenticationFailed("Send 'Authorization: Bearer <token>'.")
    try:
        return header[1].decode()
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("The token is not valid.") from None


class RuntimeTokenAuthentication(authentication.BaseAuthentication):
    keyword = BEARER

    def authenticate(self, request):
        raw = bearer_token(request)
        if raw is None:
            return None
        address = client_address(request)
        digest = RuntimeToken.hash(raw)
        # Keyed by the token alone: saving, revoking or deleting it drops this entry when the
        # change commits (RuntimeToken's save and queryset), so the next request anywhere reads
        # it again. The entry also carries the revision it was read at, because the token brings
        # its application along and an application's changes move the revision.
        key = RuntimeToken.cache_key(digest)
        cached = cache.get(key)
        if cached is None:
            # Unknown here: an address that keeps sending bad tokens stops before the database
            # (and before the revision, which may need it). Known tokens pass, as on the fast path.
            bearer_failures_check(address)
        revision = revision_current()
        if cached is not None and cached[0] == revision:
            token = cached[1]
        else:
            if cached is not None:
                bearer_failures_check(address)
            token = (
                RuntimeToken.objects.select_related("application__max_risk", "application__policy")
                .filter(token_hash=digest)
                .first()
            )
            if token is not None:
                cache.set(key, (revision, token), TOKEN_CACHE_SECONDS)
        if token is None or not token.is_usable:
            bearer_failure_record(address)
            raise exceptions.AuthenticationFailed("The token is not valid, expired or revoked.")
        now = timezone.now()
        last_used = token.last_used_at
        if last_used is None or (now - last_used).total_seconds() > LAST_USED_EVERY_SECONDS:
            # At most one write a minute per token: reads stay reads.
            RuntimeToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
            cache.set(key, (revision, token), TOKEN_CACHE_SECONDS)
        fast_record_write(digest=digest, token=token, revision=revision)
        return Runtime(application=token.application, token=token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


class IsRuntimeOrStaff(permissions.BasePermission):
    """A runtime token, or a staff member's admin session (to browse the API)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if isinstance(user, Runtime):
            return True
        if user is None or not getattr(user, "is_authenticated", False):
            raise exceptions.NotAuthenticated()
        return bool(user.is_staff)


class HasScope(permissions.BasePermission):
    """The view's ``required_scope`` must be among the token's scopes (staff sessions read only)."""

    message = "The token lacks the scope this endpoint needs."

    def has_permission(self, request, view) -> bool:
        scope = getattr(view, "required_scope", None)
        user = request.user
        if isinstance(user, Runtime):
            if scope and scope not in user.scopes:
                self.message = f"The token lacks the '{scope}' scope."
                return False
            return True
        return scope != RuntimeToken.Scope.TRACES_WRITE or bool(user and user.is_superuser)


def client_address(request) -> str:
    """The caller's address, the one function that reads it (the API's throttles, failed
    bearer tokens, django-axes' lockout and the login slowdown): ``REMOTE_ADDR``, unless the
    connection comes from one of ``TRUSTED_PROXIES``; then the address the nearest untrusted
    hop had, read from the right of ``X-Forwarded-For``, where each trusted proxy appended its
    peer. What a client wrote to the left of that is never read (docs/operations.md)."""
    peer = request.META.get("REMOTE_ADDR", "")
    proxies = trusted_proxies(tuple(settings.TRUSTED_PROXIES))
    if not proxies or not _within(peer, proxies):
        return peer
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    address = peer
    for hop in reversed([hop for hop in hops if hop]):
        if not _valid(hop):
            break  # a trusted proxy appends addresses only: nothing further left is its
        address = hop
        if not _within(hop, proxies):
            break
    return address


@functools.lru_cache(maxsize=8)
def trusted_proxies(values: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """TRUSTED_PROXIES parsed (the settings checked each value)."""
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def _valid(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _within(text: str, networks: tuple[IPNetwork, ...]) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return any(address.version == net.version and address in net for net in networks)


def _bearer_failures_window(address: str) -> tuple[str, float]:
    """The cache key counting ``address``'s failures in the current window, and the seconds
    until that window ends. Windows are aligned to the clock, so counting is one ``add`` and one
    ``incr``, each atomic in Redis and in the embedded default's file cache; a burst across a
    boundary can reach twice the limit, which still bounds the work to a few lookups a second."""
    seconds = settings.API_FAILED_BEARER_WINDOW_SECONDS
    now = time.time()
    window = int(now // seconds)
    return f"auth:bearer-failures:{address}:{window}", (window + 1) * seconds - now


def bearer_failures_check(address: str) -> None:
    """Refuse (429 with Retry-After) an address that sent too many bad bearer tokens in this
    window: one cache read, before any database query or token lookup. The failed-bearer
    throttle for every path that authenticates tokens (``RuntimeTokenAuthentication``; the fast
    read path answers only tokens it holds a fresh record of, and hands the rest to it).

    With the cache unreachable (its circuit breaker open) the read answers nothing and the
    request goes on: throttling protects the service, it is not a permission."""
    key, left = _bearer_failures_window(address)
    failures = cache.get(key)
    if failures is not None and failures >= settings.API_FAILED_BEARER_LIMIT:
        raise exceptions.Throttled(
            wait=max(left, 1.0), detail="Too many failed authentications from this address."
        )


def bearer_failure_record(address: str) -> None:
    """Count one failed bearer authentication from ``address``."""
    key, left = _bearer_failures_window(address)
    if not cache.add(key, 1, int(left) + 1):
        try:
            cache.incr(key)
        except ValueError:  # the window's key expired between add and incr: count it anew
            cache.add(key, 1, int(left) + 1)


def fast_record_write(*, digest: str, token: RuntimeToken, revision: int) -> None:
    """The token as the fast read path (``api/fast.py``) reads it, in plain text for its Lua
    script: ``<token id> <application id> <revision> <expiry, epoch seconds or 0> <scopes>``.

    It carries the revision it was read at, so any change to the application (which moves the
    revision) sends the next request back here; saving, revoking or deleting the token drops it
    on commit (``RuntimeToken.fast_cache_key``). It lives until ``last_used_at`` is due again,
    so that write keeps happening here, at most once a minute.
    """
    default = caches["default"]
    if not isinstance(default, RedisCache) or token.last_used_at is None:
        return
    expires = token.expires_at.timestamp() if token.expires_at else 0
    record = f"{token.pk} {token.application_id} {revision} {expires:.3f} {','.join(token.scopes)}"
    used = (timezone.now() - token.last_used_at).total_seconds()
    seconds = max(1, int(LAST_USED_EVERY_SECONDS - used))
    try:
        get_redis_connection("default").set(
            default.make_key(RuntimeToken.fast_cache_key(digest)), record, ex=seconds
        )
    except RedisError as exc:  # the normal path keeps answering; the fast one waits for Redis
        logger.debug("fast token record not written: %s", exc)
