"""A Redis cache that degrades to a miss when Redis is down.

Everything the API caches (the registry revision, visibility, throttle counters) can be
recomputed from the database, so a broker or cache outage must slow answers, never fail them.
"""

import logging

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class ReusedClient(RedisCacheClient):
    """One redis.Redis per connection pool: Django builds a new one for every operation, which
    costs more than the round trip itself on a hot read path. A Redis client is thread-safe."""

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        clients = self.__dict__.setdefault("_clients", {})
        if id(pool) not in clients:
            clients[id(pool)] = self._client(connection_pool=pool)
        return clients[id(pool)]


class ResilientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedClient

    def _quietly(self, method: str, default, *args, **kwargs):
        try:
            return getattr(super(), method)(*args, **kwargs)
        except RedisError as exc:
            logger.warning("cache %s failed, carrying on without it: %s", method, exc)
            return default

    def get(self, key, default=None, version=None):
        return self._quietly("get", default, key, default, version)

    def get_many(self, keys, version=None):
        return self._quietly("get_many", {}, keys, version)

    def set(self, key, value, timeout=None, version=None):
        return self._quietly("set", None, key, value, timeout, version)

    def add(self, key, value, timeout=None, version=None):
        return self._quietly("add", False, key, value, timeout, version)

    def delete(self, key, version=None):
        return self._quietly("delete", False, key, version)

    def incr(self, key, delta=1, version=None):
        return self._quietly("incr", None, key, delta, version)

    def touch(self, key, timeout=None, version=None):
        return self._quietly("touch", False, key, timeout, version)

    def clear(self):
        return self._quietly("clear", False)
