"""The caches: Redis (django-redis with short timeouts and a circuit breaker per Redis server),
else, on the embedded default, files every process shares (``SharedFileCache``, at the end).

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

import fcntl
import logging
import os
import pickle
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django_redis.cache import RedisCache
from redis.backoff import NoBackoff
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
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
) -> dict[str, Any]:
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


if TYPE_CHECKING:

    class _FileBasedCache(FileBasedCache):
        """Django's private helpers the subclass below uses, which django-stubs leaves out."""

        _dir: str

        def _createdir(self) -> None: ...
        def _key_to_file(self, key: str, version: int | None = None) -> str: ...
        def _list_cache_files(self) -> list[str]: ...
        def _delete(self, fname: str) -> bool: ...
        def _cull(self) -> None: ...

else:
    _FileBasedCache = FileBasedCache


class SharedFileCache(_FileBasedCache):
    """The embedded default's cache (no Redis): files under ``var/``, which every process on the
    machine sees, the web process, the Celery worker and a shell alike. What one process caches
    for the others (learning's refresh-pending marks, throttle counters, the registry revision,
    tokens) would stay unseen in each process's own memory.

    Django's file cache writes an entry at once (a rename), but ``add`` and ``incr`` read and
    then write, and a read deletes an expired entry it finds, which can take a fresh entry
    another process has just written with it. Here every step that checks and then writes or
    deletes holds one exclusive lock on the directory (``flock``, across processes and
    threads), so ``add`` is a lock as on Redis and ``incr`` loses no count; ``incr`` keeps the
    entry's expiry, as Redis and local memory do. Reads take no lock: an expired entry they find
    is a miss and stays until it is written again or culled.
    """

    LOCK_NAME = "lock"  # not a ``*.djcache`` name: never listed, culled or cleared as an entry

    def __init__(self, dir: str, params: dict[str, Any]) -> None:
        super().__init__(dir, params)
        self._held = threading.local()  # this thread's lock depth: the lock is re-entrant

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        depth = getattr(self._held, "depth", 0)
        if depth:
            self._held.depth = depth + 1
            try:
                yield
            finally:
                self._held.depth = depth
            return
        self._createdir()
        # A description of its own per acquisition: flock excludes other threads too.
        with open(os.path.join(self._dir, self.LOCK_NAME), "ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self._held.depth = 1
            try:
                yield
            finally:
                self._held.depth = 0
                fcntl.flock(handle, fcntl.LOCK_UN)

    def add(
        self,
        key: str,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> bool:
        with self._exclusive():
            return super().add(key, value, timeout, version)

    def add_many(self, keys: list[str], value: Any, timeout: float | None) -> list[str]:
        """``add`` of each key under one hold of the lock: the keys added, in order."""
        added = []
        with self._exclusive():
            for key in keys:  # a loop: super() takes no arguments in a comprehension
                if super().add(key, value, timeout):
                    added.append(key)
        return added

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> int:
        fname = self._key_to_file(key, version)
        with self._exclusive():
            expiry, value = self._read(fname)
            if expiry is _MISSING:
                raise ValueError(f"Key '{key}' not found")
            new_value = value + delta
            timeout = None if expiry is None else max(expiry - time.time(), 0.001)
            self.set(key, new_value, timeout, version)
            return new_value

    def _read(self, fname: str) -> tuple[Any, Any]:
        """The expiry and value stored in ``fname``; ``_MISSING`` for both when it is absent
        or expired."""
        try:
            with open(fname, "rb") as f:
                expiry = pickle.load(f)
                if expiry is not None and expiry < time.time():
                    return _MISSING, _MISSING
                return expiry, pickle.loads(zlib.decompress(f.read()))
        except (FileNotFoundError, EOFError):
            return _MISSING, _MISSING

    def _is_expired(self, f: BinaryIO) -> bool:
        try:
            expiry = pickle.load(f)
        except EOFError:
            return True  # an empty file: being written by an older Django, or cut short
        return expiry is not None and expiry < time.time()

    def _cull(self) -> None:
        if len(self._list_cache_files()) < self._max_entries:
            return
        with self._exclusive():
            # Expired entries first, checked again under the lock; then Django's random third.
            for fname in self._list_cache_files():
                if self._read(fname)[0] is _MISSING:
                    self._delete(fname)
            super()._cull()


_MISSING = object()


def cache_add_many(cache: BaseCache, keys: list[str], value: Any, timeout: int) -> list[str]:
    """``add`` of each key, in one round trip: the keys added (absent before), in order.

    On Redis, one pipeline of ``SET NX EX``; on the embedded default's files, one hold of the
    directory's lock. Elsewhere a loop of ``add``. A Redis that does not answer adds nothing,
    as ``add`` does with ``IGNORE_EXCEPTIONS``.
    """
    if not keys:
        return []
    if isinstance(cache, RedisCache):
        client = cache.client.get_client(write=True)
        encoded = cache.client.encode(value)
        try:
            with client.pipeline(transaction=False) as pipeline:
                for key in keys:
                    pipeline.set(cache.make_and_validate_key(key), encoded, nx=True, ex=timeout)
                answers = pipeline.execute()
        except RedisError as exc:
            logger.warning("Redis did not answer a batch of %d adds: %s", len(keys), exc)
            return []
        return [key for key, added in zip(keys, answers, strict=True) if added]
    if isinstance(cache, SharedFileCache):
        return cache.add_many(keys, value, timeout)
    return [key for key in keys if cache.add(key, value, timeout)]
