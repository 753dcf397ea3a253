"""Request throttling: a fixed-window counter per caller, counted atomically.

DRF's ``SimpleRateThrottle`` reads a history, decides, then writes it back: two requests of one
caller in flight at once both read the same history, so concurrent clients get past the limit.
Here each request is one atomic increment (on Redis, one Lua script: one round trip), and the
count it returns decides. A window starts with a caller's first request and lasts the rate's
period; the requests refused in it count too, which changes nothing (the count is past the limit
either way) and keeps the increment unconditional.

Throttling protects the service, it is not a permission: when Redis is unreachable (its circuit
breaker open, see ``config/cache.py``), requests are let through and this is logged once per
outage.
"""

import functools
import logging
import time

from django.core.cache import caches
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from redis import Redis
from redis.commands.core import Script
from redis.exceptions import RedisError
from rest_framework.throttling import SimpleRateThrottle

from .auth import Runtime, client_address

logger = logging.getLogger(__name__)

# Set in the request's META by the fast read path (``api/fast.py``) when it counted a request
# in its window and then passed it on to the view: (throttle key, count, seconds left). A header
# cannot set it (those arrive as HTTP_*).
COUNTED_ENVIRON_KEY = "registry.throttle_counted"

# Count, start the window's clock if it has none, say how long it has left. Checking PTTL rather
# than "count == 1" also repairs a counter that somehow lost its expiry. A Lua function, so the
# fast read path's script counts with this very code in its own round trip.
WINDOW_HIT_FUNCTION = """
local function window_hit(key, window_ms)
    local count = redis.call('INCR', key)
    local left = redis.call('PTTL', key)
    if left < 0 then
        redis.call('PEXPIRE', key, window_ms)
        left = tonumber(window_ms)
    end
    return count, left
end
"""
# One round trip: KEYS[1] the counter, ARGV[1] the window (ms).
WINDOW_HIT = WINDOW_HIT_FUNCTION + "return {window_hit(KEYS[1], ARGV[1])}\n"


class RuntimeThrottle(SimpleRateThrottle):
    """Per token (or per staff user, else per address); answers 429 with Retry-After."""

    scope = "runtime"
    cache_alias = "default"
    # Set by DRF's __init__ from the rate (when there is one); declared for the type checker.
    num_requests: int
    duration: int

    @classmethod
    def token_key(cls, token_id: int | str) -> str:
        """The counter of a runtime token (the fast read path appends the id in Lua)."""
        return f"throttle:{cls.scope}:token-{token_id}"

    def get_cache_key(self, request, view):
        user = request.user
        if isinstance(user, Runtime):
            return self.token_key(user.token.pk)
        if user is not None and getattr(user, "is_authenticated", False):
            ident = f"user-{user.pk}"
        else:
            ident = self.get_ident(request)
        return f"throttle:{self.scope}:{ident}"

    def get_ident(self, request) -> str:
        # The one reading of the caller's address (TRUSTED_PROXIES), not DRF's NUM_PROXIES.
        return client_address(request)

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        counted = request.META.get(COUNTED_ENVIRON_KEY)
        if counted is not None and counted[0] == self.key:
            # The fast read path counted this request already, then handed it over.
            hit = counted[1:]
        else:
            hit = window_hit(self.cache_alias, self.key, self.duration)
        return self.allow_hit(hit)

    def allow_hit(self, hit: tuple[int, float] | None) -> bool:
        """Whether a request counted as ``hit`` (count, seconds left) may pass."""
        if hit is None:
            return True  # fail open: see the module's docstring
        count, self.seconds_left = hit
        return count <= self.num_requests

    def wait(self) -> float:
        return max(self.seconds_left, 1.0)


def window_hit(alias: str, key: str, duration: int) -> tuple[int, float] | None:
    """Count one request in ``key``'s window of ``duration`` seconds in cache ``alias``: the
    count so far and the seconds until the window ends, or None when Redis is unreachable."""
    cache = caches[alias]
    if not isinstance(cache, RedisCache):
        return cache_window_hit(cache, key, duration)
    try:
        count, left_ms = _window_script(get_redis_connection(alias))(
            keys=[cache.make_key(key)], args=[duration * 1000]
        )
    except RedisError as exc:
        if not _outage["logged"]:
            _outage["logged"] = True
            logger.warning("throttling is off until Redis answers again: %s", exc)
        return None
    if _outage["logged"]:
        _outage["logged"] = False
        logger.warning("throttling is back on")
    return int(count), int(left_ms) / 1000


_outage = {"logged": False}


@functools.cache
def _window_script(client: Redis) -> Script:
    """The script bound to one client, made once: it hashes its source, which every request
    need not do again (django-redis keeps one client per cache and process)."""
    return client.register_script(WINDOW_HIT)


def cache_window_hit(cache, key: str, duration: int) -> tuple[int, float]:
    """Any other cache (the embedded default's files, ``config.cache.SharedFileCache``): ``add``
    and ``incr`` are each atomic there across processes, and the window's end is kept beside
    the counter."""
    now = time.time()
    ends_key = f"{key}:ends"
    while True:
        if cache.add(key, 1, duration):
            cache.set(ends_key, now + duration, duration)
            return 1, float(duration)
        try:
            count = cache.incr(key)
        except ValueError:  # the window ended between add and incr: open the next one
            continue
        ends = cache.get(ends_key, now + duration)
        return count, max(ends - now, 0.0)


class ApplicationScopedThrottle(RuntimeThrottle):
    """A view's own budget per application (DRF's scoped throttle, counted as above): the
    view names it in ``throttle_scope``, and ``DEFAULT_THROTTLE_RATES`` gives its rate. Every
    token of an application shares it; a staff session has its own."""

    def __init__(self) -> None:
        # The scope is the view's, known only once DRF hands it over (allow_request).
        self.rate = None

    def allow_request(self, request, view) -> bool:
        self.scope = getattr(view, "throttle_scope", "")
        if not self.scope:
            return True
        self.rate = self.get_rate()
        num_requests, duration = self.parse_rate(self.rate)
        if num_requests is None or duration is None:
            return True
        self.num_requests, self.duration = num_requests, duration
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        user = request.user
        if isinstance(user, Runtime):
            return f"throttle:{self.scope}:application-{user.application.pk}"
        return super().get_cache_key(request, view)
