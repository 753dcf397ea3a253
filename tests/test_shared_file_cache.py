"""The embedded default's cache (``config.cache.SharedFileCache``): one cache for every process,
whose ``add`` is a lock and whose ``incr`` loses no count across processes, as on Redis."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import caches

from config.cache import SharedFileCache

ROOT = Path(__file__).resolve().parent.parent

# Each process waits for the start file, then takes as many marks as it can and counts every
# attempt, in the add-else-incr shape of the throttles and the failed-bearer counter.
RACER = """
import json, os, sys, time
from config.cache import SharedFileCache
cache = SharedFileCache(sys.argv[1], {"OPTIONS": {"MAX_ENTRIES": 100000}})
while not os.path.exists(sys.argv[3]):
    time.sleep(0.005)
won = []
for n in range(int(sys.argv[2])):
    if cache.add(f"mark-{n}", os.getpid(), 600):
        won.append(n)
    if not cache.add("attempts", 1, 600):
        cache.incr("attempts")
print(json.dumps(won))
"""


def test_it_is_the_default_cache_when_no_redis_is_configured():
    if settings.CACHES["default"]["BACKEND"] != "config.cache.SharedFileCache":
        pytest.skip("REDIS_URL is set: the cache is Redis")
    assert isinstance(caches["default"], SharedFileCache)


def test_it_gives_each_mark_to_one_process_and_loses_no_count(tmp_path):
    processes, marks = 4, 150
    start = tmp_path / "start"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path / "cache"), str(marks), str(start)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(processes)
    ]
    start.touch()
    won = [json.loads(racer.communicate(timeout=120)[0]) for racer in racers]
    assert [racer.returncode for racer in racers] == [0] * processes
    assert sorted(n for taken in won for n in taken) == list(range(marks))
    cache = SharedFileCache(str(tmp_path / "cache"), {})
    assert cache.get("attempts") == processes * marks


@pytest.fixture
def clock(monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    return now


def test_it_keeps_an_entrys_expiry_when_it_counts(tmp_path, clock):
    cache = SharedFileCache(str(tmp_path), {})
    assert cache.add("window", 1, 60)
    clock[0] += 30
    assert cache.incr("window") == 2
    assert cache.incr("window", 3) == 5
    clock[0] += 29
    assert cache.get("window") == 5
    clock[0] += 2
    assert cache.get("window") is None  # the window ended when it was opened to, not later
    with pytest.raises(ValueError, match="not found"):
        cache.incr("window")
    assert cache.add("window", 1, 60)


def test_it_culls_expired_entries_before_live_ones(tmp_path, clock):
    cache = SharedFileCache(str(tmp_path), {"OPTIONS": {"MAX_ENTRIES": 10}})
    for n in range(5):
        cache.set(f"old-{n}", n, 10)
    for n in range(5):
        cache.set(f"live-{n}", n, 600)
    clock[0] += 20
    cache.set("new", "value", 600)
    assert len(cache._list_cache_files()) == 6
    assert [cache.get(f"live-{n}") for n in range(5)] == list(range(5))
    assert cache.get("new") == "value"


def test_a_reader_leaves_an_expired_entry_for_a_writer_to_replace(tmp_path, clock):
    cache = SharedFileCache(str(tmp_path), {})
    cache.set("mark", 1, 10)
    clock[0] += 20
    assert cache.get("mark") is None and not cache.has_key("mark")
    # No delete outside the lock: a fresh entry another process wrote meanwhile would go too.
    assert len(cache._list_cache_files()) == 1
    assert cache.add("mark", 2, 10)
    assert cache.get("mark") == 2


def test_add_many_adds_only_the_absent_keys_under_one_lock(tmp_path, monkeypatch):
    from config.cache import cache_add_many

    cache = SharedFileCache(str(tmp_path / "cache"), {})
    cache.add("b", "held", 600)
    locks = []
    exclusive = cache._exclusive
    monkeypatch.setattr(cache, "_exclusive", lambda: locks.append(1) or exclusive())

    assert cache_add_many(cache, ["a", "b", "c"], 1, 600) == ["a", "c"]

    assert len(locks) == 1  # one hold of the lock for the whole batch
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, "held", 1)
    assert cache_add_many(cache, ["a", "d"], 1, 600) == ["d"]


def test_add_many_on_redis_is_one_pipeline_and_adds_only_the_absent_keys():
    from django_redis.cache import RedisCache

    from config.cache import cache_add_many

    cache = caches["default"]
    if not isinstance(cache, RedisCache):
        pytest.skip("the cache is not Redis (REDIS_URL unset)")
    cache.add("held", "x", 600)
    client = cache.client.get_client(write=True)
    commands = []
    real = client.execute_command
    client.execute_command = lambda *args, **kwargs: commands.append(args) or real(*args, **kwargs)
    try:
        assert cache_add_many(cache, ["fresh-1", "held", "fresh-2"], 1, 600) == [
            "fresh-1",
            "fresh-2",
        ]
    finally:
        del client.execute_command
    assert commands == []  # no command one at a time: the pipeline sent them together
    assert (cache.get("fresh-1"), cache.get("held"), cache.get("fresh-2")) == (1, "x", 1)
