"""A hung or dead Redis costs one short timeout, then nothing, and is used again once it answers.

Each test starts its own redis-server, so it can stop it (SIGSTOP: the kernel still accepts
connections, nothing answers) or kill it without touching the Redis the suite is configured with.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache.backends.base import BaseCache
from django.utils.module_loading import import_string
from redis.exceptions import TimeoutError as RedisTimeoutError

from config.cache import CircuitBreaker, redis_cache
from tests.redis_server import needs_redis_server, redis_server

ROOT = Path(__file__).resolve().parent.parent
COOLDOWN = 1.0  # shorter than the default, to keep the test quick


def cache_at(url: str) -> BaseCache:
    entry = redis_cache(url, cooldown=COOLDOWN)
    return import_string(entry["BACKEND"])(entry["LOCATION"], entry)


@pytest.fixture
def socket_failures(monkeypatch) -> list[Exception]:
    """Every command that reached a Redis socket and failed (a timeout, a refused connection):
    what a caller waits for. A command the circuit breaker skips never gets there."""
    failures: list[Exception] = []
    failed = CircuitBreaker.failed

    def counted(breaker, exc):
        # A timeout while connecting is seen by both the connect and the read inside it.
        if not any(exc is seen for seen in failures):
            failures.append(exc)
        failed(breaker, exc)

    monkeypatch.setattr(CircuitBreaker, "failed", counted)
    return failures


@needs_redis_server
def test_it_skips_a_hung_redis_after_the_first_failure_and_uses_it_again_after_the_cool_down(
    socket_failures,
):
    with redis_server() as server:
        cache = cache_at(server.url())
        cache.set("greeting", "hello", 60)
        assert cache.get("greeting") == "hello"

        server.pause()
        assert cache.get("greeting", "missed") == "missed"
        assert [type(exc) for exc in socket_failures] == [RedisTimeoutError]  # one timeout
        for _ in range(20):
            assert cache.get("greeting", "missed") == "missed"
            cache.set("other", 1, 60)
        assert len(socket_failures) == 1  # all skipped

        time.sleep(COOLDOWN)  # still hung: one probe pays the timeout, the rest are skipped
        assert cache.get("greeting", "missed") == "missed"
        assert cache.get("greeting", "missed") == "missed"
        assert len(socket_failures) == 2

        server.resume()
        time.sleep(COOLDOWN)
        assert cache.get("greeting", "missed") == "hello"
        cache.set("after", "back", 60)
        assert cache.get("after") == "back"
        assert len(socket_failures) == 2


@needs_redis_server
def test_a_dead_redis_costs_nothing_per_read(socket_failures):
    with redis_server() as server:
        cache = cache_at(server.url())
        cache.set("greeting", "hello", 60)
        server.kill()
        for _ in range(20):
            assert cache.get("greeting", "missed") == "missed"
            cache.delete("greeting")
        assert len(socket_failures) == 1  # the first command found it dead; the rest skipped


@needs_redis_server
@pytest.mark.django_db
def test_api_requests_stay_fast_while_the_cache_hangs(
    runtime_client_factory, settings, socket_failures
):
    client = runtime_client_factory("assistant")
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url(), cooldown=COOLDOWN)}
        assert client.get("/api/v1/revision/").status_code == 200
        server.pause()
        assert client.get("/api/v1/tools/").status_code == 200
        assert len(socket_failures) == 1
        for _ in range(5):
            assert client.get("/api/v1/tools/").status_code == 200
        # Several cache calls per request: without the breaker each would wait a timeout.
        assert len(socket_failures) == 1
        server.resume()


def settings_in_a_process(**env_vars: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if "REDIS_URL" not in key}
    return subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; "
         "print(settings.CELERY_BROKER_URL, settings.CACHES['default'].get('LOCATION'))"],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.test", **env_vars},
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("env_vars", "broker", "cache"),
    [
        ({"REDIS_URL": "redis://r:6379/0"}, "redis://r:6379/0", "redis://r:6379/1"),
        ({"REDIS_URL": "redis://r:6379"}, "redis://r:6379", "redis://r:6379/1"),
        (
            {"REDIS_URL": "redis://r:6379/0", "CACHE_REDIS_URL": "redis://c:6379/0"},
            "redis://r:6379/0",
            "redis://c:6379/0",
        ),
        ({}, "filesystem://", "var/test-cache"),
    ],
)
def test_the_cache_never_shares_the_brokers_database(env_vars, broker, cache):
    if not cache.startswith("redis://"):  # the files every process shares, under VAR_DIR
        cache = str(settings.VAR_DIR / cache.removeprefix("var/"))
    result = settings_in_a_process(**env_vars)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [broker, cache]


@pytest.mark.parametrize(
    ("env_vars", "named"),
    [
        ({"REDIS_URL": "redis://r:port/0"}, "REDIS_URL"),
        ({"REDIS_URL": "redis://r:6379/zero"}, "REDIS_URL"),
        ({"REDIS_URL": "redis://r:6379/15"}, "REDIS_URL"),
        ({"CACHE_REDIS_URL": "http://c/0"}, "CACHE_REDIS_URL"),
        ({"REDIS_URL": "redis://r/0", "CACHE_REDIS_URL": "redis://r:6379/0"}, "CACHE_REDIS_URL"),
    ],
)
def test_a_malformed_redis_setting_stops_the_process_naming_it(env_vars, named):
    result = settings_in_a_process(**env_vars)
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {named}:" in result.stderr
