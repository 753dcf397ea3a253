"""A hung or dead Redis costs one short timeout, then nothing, and is used again once it answers.

Each test starts its own redis-server, so it can stop it (SIGSTOP: the kernel still accepts
connections, nothing answers) or kill it without touching the Redis the suite is configured with.
"""

import time

import pytest
from django.core.cache.backends.base import BaseCache
from django.utils.module_loading import import_string

from config.cache import SOCKET_TIMEOUT_SECONDS, redis_cache
from tests.redis_server import needs_redis_server, redis_server

pytestmark = needs_redis_server

COOLDOWN = 1.0  # shorter than the default, to keep the test quick
FAST = 0.05


def cache_at(url: str) -> BaseCache:
    entry = redis_cache(url, cooldown=COOLDOWN)
    return import_string(entry["BACKEND"])(entry["LOCATION"], entry)


def timed(call) -> tuple[object, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_it_skips_a_hung_redis_after_the_first_failure_and_uses_it_again_after_the_cool_down():
    with redis_server() as server:
        cache = cache_at(server.url())
        cache.set("greeting", "hello", 60)
        assert cache.get("greeting") == "hello"

        server.pause()
        value, first = timed(lambda: cache.get("greeting", "missed"))
        assert value == "missed"
        assert first < SOCKET_TIMEOUT_SECONDS + 0.5  # one socket timeout, no retries
        for _ in range(20):
            value, elapsed = timed(lambda: cache.get("greeting", "missed"))
            assert value == "missed" and elapsed < FAST
            _, elapsed = timed(lambda: cache.set("other", 1, 60))
            assert elapsed < FAST

        time.sleep(COOLDOWN)  # still hung: one probe pays the timeout, the rest are skipped
        value, probe = timed(lambda: cache.get("greeting", "missed"))
        assert value == "missed" and probe < SOCKET_TIMEOUT_SECONDS + 0.5
        _, elapsed = timed(lambda: cache.get("greeting", "missed"))
        assert elapsed < FAST

        server.resume()
        time.sleep(COOLDOWN)
        assert cache.get("greeting", "missed") == "hello"
        cache.set("after", "back", 60)
        assert cache.get("after") == "back"


def test_a_dead_redis_costs_nothing_per_read():
    with redis_server() as server:
        cache = cache_at(server.url())
        cache.set("greeting", "hello", 60)
        server.kill()
        for _ in range(20):
            value, elapsed = timed(lambda: cache.get("greeting", "missed"))
            assert value == "missed" and elapsed < FAST
            _, elapsed = timed(lambda: cache.delete("greeting"))
            assert elapsed < FAST


@pytest.mark.django_db
def test_api_requests_stay_fast_while_the_cache_hangs(runtime_client_factory, settings):
    client = runtime_client_factory("assistant")
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url(), cooldown=COOLDOWN)}
        assert client.get("/api/v1/revision/").status_code == 200
        server.pause()
        response, first = timed(lambda: client.get("/api/v1/tools/"))
        assert response.status_code == 200 and first < SOCKET_TIMEOUT_SECONDS + 0.5
        for _ in range(5):
            response, elapsed = timed(lambda: client.get("/api/v1/tools/"))
            assert response.status_code == 200
            # Several cache calls per request: without the breaker each would wait a timeout.
            assert elapsed < SOCKET_TIMEOUT_SECONDS
        server.resume()
