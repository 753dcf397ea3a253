"""The Redis cache: django-redis with short timeouts and a circuit breaker per Redis server.

Everything the API caches (the registry revision, visibility, tokens, rendered bodies, throttle
counters) can be recomputed from the database, so a cache outage must slow answers a little,
never fail them. django-redis turns connection errors into misses (``IGNORE_EXCEPTIONS``); the
breaker below makes them cheap. A dead Redis refuses connections at once, but a hung one (stopped,
swapping, partitioned) accepts them and then never answers, so every command would wait out its
socket timeout, several times per request. After one such failure the breaker fails every command
to that server at once for ``cooldown`` seconds, then lets a single command probe it: an answer
closes the breaker, another failure opens it for another cool-down.

This module imports no Django settings: ``config.settings.base`` builds ``CACHES`` with
``redis_cache()``, and tests build caches against their own Redis servers with it.
"""

import logging
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from redis.backoff import NoBackoff
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

if TYPE_CHECKING:
    _Connection = Connection  # the mixin goes in front of a redis-py connection class
else:
    _Connection = object

logger = logging.getLogger(__name__)

# A healthy Redis answers in well under a millisecond; a quarter of a second is generous for a
# busy one and is what the first request pays when Redis hangs.
SOCKET_TIMEOUT_SECONDS = 0.25
# How long a failed Redis is skipped before one command probes it again.
COOLDOWN_SECONDS = 5.0

UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


class CircuitOpen(RedisConnectionError):
    """Raised instead of talking to a Redis server that failed less than a cool-down ago."""


class CircuitBreaker:
    """Closed: commands go through. Open: they fail at once until the cool-down ends. Then the
    first caller probes while the others keep failing fast, so a hung server costs one socket
    timeout per cool-down and process, not one per command."""

    def __init__(self, server: str, cooldown: float) -> None:
        self.server = server
        self.cooldown = cooldown
        self._open_until = 0.0  # 0.0: closed
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._open_until > time.monotonic()

    def allow(self) -> bool:
        if not self._open_until:
            return True
        with self._lock:
            now = time.monotonic()
            if now < self._open_until:
                return False
            # This caller probes; everyone else is turned away until it answers or times out.
            self._open_until = now + self.cooldown
            return True

    def failed(self, exc: Exception) -> None:
        with self._lock:
            was_closed = not self._open_until
            self._open_until = time.monotonic() + self.cooldown
        if was_closed:
            logger.warning(
                "Redis at %s failed (%s); skipping it for %.1f s at a time until it answers",
                self.server,
                exc,
                self.cooldown,
            )

    def succeeded(self) -> None:
        if not self._open_until:
            return
        with self._lock:
            self._open_until = 0.0
        logger.warning("Redis at %s answers again", self.server)


_breakers: dict[str, CircuitBreaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(server: str, cooldown: float = COOLDOWN_SECONDS) -> CircuitBreaker:
    """One breaker per server and process, shared by every pool and database on it."""
    with _breakers_lock:
        if server not in _breakers:
            _breakers[server] = CircuitBreaker(server, cooldown)
        return _breakers[server]


class BreakerMixin(_Connection):
    """Routes a redis-py connection through its server's breaker.

    The pool calls ``connect()`` every time it hands a connection out (a no-op when connected),
    so refusing there stops every command and pipeline; failures are recorded wherever the socket
    is used, and any answer (an error reply included) proves the server alive.
    """

    def __init__(self, *args, circuit_cooldown: float = COOLDOWN_SECONDS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        server = getattr(self, "path", None) or f"{self.host}:{self.port}"
        self.breaker = breaker_for(server, circuit_cooldown)

    def connect(self):
        if not self.breaker.allow():
            raise CircuitOpen(f"Redis at {self.breaker.server} is skipped after a failure")
        return self._recorded(super().connect)

    def send_packed_command(self, *args, **kwargs):
        return self._recorded(super().send_packed_command, *args, **kwargs)

    def read_response(self, *args, **kwargs):
        response = self._recorded(super().read_response, *args, **kwargs)
        self.breaker.succeeded()
        return response

    def _recorded(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except UNREACHABLE as exc:
            self.breaker.failed(exc)
            raise


class BreakerConnection(BreakerMixin, Connection):
    pass


class BreakerSSLConnection(BreakerMixin, SSLConnection):
    pass


class BreakerUnixConnection(BreakerMixin, UnixDomainSocketConnection):
    pass


CONNECTION_CLASSES = {
    "redis": BreakerConnection,
    "rediss": BreakerSSLConnection,
    "unix": BreakerUnixConnection,
}


def redis_cache(
    location: str,
    *,
    timeout: float = SOCKET_TIMEOUT_SECONDS,
    cooldown: float = COOLDOWN_SECONDS,
) -> dict:
    """The ``CACHES`` entry of a Redis cache at ``location`` (a redis://, rediss:// or unix://
    URL), configured through django-redis's public options only."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": location,
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            # A Redis error is a miss (or a no-op write): the database answers instead.
            "IGNORE_EXCEPTIONS": True,
            "SOCKET_CONNECT_TIMEOUT": timeout,
            "SOCKET_TIMEOUT": timeout,
            "CONNECTION_POOL_KWARGS": {
                # The URL's scheme picks redis-py's class; ours adds the breaker to the same one.
                "connection_class": CONNECTION_CLASSES[urlsplit(location).scheme],
                "circuit_cooldown": cooldown,
                # No retries (redis-py's defaults have changed between versions): a retry
                # against a hung server doubles the wait, and the probe after the cool-down is
                # the retry.
                "retry": Retry(NoBackoff(), 0),
            },
        },
    }
