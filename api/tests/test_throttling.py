"""The runtime throttle counts atomically: concurrent clients get exactly the limit, no more."""

import logging
import threading
import time
from collections import Counter

import pytest
from django.core.cache import caches
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from api.throttling import RuntimeThrottle
from config.cache import redis_cache
from tests.redis_server import REDIS_SERVER, needs_redis_server, redis_server


class Hello(APIView):
    """No authentication: callers are told apart by address, which the requests set."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [RuntimeThrottle]

    def get(self, request):
        return Response({"hello": "world"})


def call(address: str = "10.0.0.1"):
    return Hello.as_view()(APIRequestFactory().get("/hello/", REMOTE_ADDR=address))


@pytest.fixture(params=["redis", "files"])
def counter(request, settings, monkeypatch, tmp_path):
    """The throttle on its own Redis server, and on the embedded default's shared files."""
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "25/min"})
    if request.param == "files":
        settings.CACHES = {
            "default": {"BACKEND": "config.cache.SharedFileCache", "LOCATION": str(tmp_path)}
        }
        yield None
        return
    if REDIS_SERVER is None:
        pytest.skip("redis-server not installed")
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url())}
        yield server


def test_it_lets_exactly_the_limit_through_to_concurrent_clients(counter):
    threads, calls_each = 8, 10
    barrier = threading.Barrier(threads)
    statuses = Counter()
    lock = threading.Lock()

    def client():
        barrier.wait()
        for _ in range(calls_each):
            status = call().status_code
            with lock:
                statuses[status] += 1

    workers = [threading.Thread(target=client) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert statuses == {200: 25, 429: threads * calls_each - 25}


def test_it_answers_429_with_the_seconds_left_in_the_window(counter):
    assert [call().status_code for _ in range(25)] == [200] * 25
    refused = call()
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert call("10.0.0.2").status_code == 200  # another caller has its own window


def test_a_new_window_lets_the_caller_through_again(counter, monkeypatch):
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "2/sec"})
    assert [call().status_code for _ in range(3)] == [200, 200, 429]
    time.sleep(1.1)
    assert call().status_code == 200


@needs_redis_server
def test_it_lets_requests_through_when_redis_is_down_and_says_so_once(
    settings, monkeypatch, caplog
):
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "1/min"})
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url())}
        assert [call().status_code for _ in range(2)] == [200, 429]
        server.kill()
        with caplog.at_level(logging.WARNING, logger="api.throttling"):
            assert [call().status_code for _ in range(10)] == [200] * 10
    warnings = [r for r in caplog.records if r.name == "api.throttling"]
    assert len(warnings) == 1 and "throttling is off" in warnings[0].getMessage()


def test_a_spoofed_forwarded_for_is_ignored_unless_a_trusted_proxy_sent_it(settings, monkeypatch):
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "3/min"})
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "xff"}
    }
    caches["default"].clear()
    settings.TRUSTED_PROXIES = ["10.0.0.0/24"]

    def status(peer: str, forwarded: str) -> int:
        request = APIRequestFactory().get(
            "/hello/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded
        )
        return Hello.as_view()(request).status_code

    # Straight to the server: a new address in the header each time changes nothing.
    assert [status("203.0.113.7", f"192.0.2.{n}") for n in range(4)] == [200, 200, 200, 429]
    # Through the proxy: the address it appended counts, not one the client wrote before it.
    via = [status("10.0.0.1", f"192.0.2.{n}, 198.51.100.5") for n in range(4)]
    assert via == [200, 200, 200, 429]
    assert status("10.0.0.1", "198.51.100.6") == 200  # another client behind the same proxy
    # Two trusted proxies in a row: the first untrusted hop from the right.
    assert status("10.0.0.2", "198.51.100.5, 10.0.0.9") == 429
    caches["default"].clear()
