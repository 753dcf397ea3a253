"""Hostile request bodies, paths and query strings: a clear 4xx (or a per-item rejection) at a
cost linear in their size, and a 503 only when the database is really unreachable."""

import json
import tracemalloc

import pytest

from learning.aggregates import aggregate_add, new_aggregate
from learning.traces import trace_parse
from registry.validation import unstorable_text

from .test_traces import trace

BODY = 100_000


def _nested(depth: int, key: str) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {key: value}
    return value


# Each about 100 KB of JSON, shaped to punish a walk that spells a path per value or keeps a
# set per leaf.
SHAPES = {
    "a long key over a long list": {"k" * 50_000: [1] * 25_000},
    "long keys nested deep": _nested(450, "k" * 100),
    "many long keys over lists": {f"{i:03}" + "k" * 500: [1] * 250 for i in range(100)},
    "many keys": {f"k{i}": 1 for i in range(10_000)},
    "many distinctive leaves": {"a": list(range(1000, 17_000))},
    "many arguments": {f"a{i}": 1000 + i for i in range(8_000)},
}


def _item(args) -> dict:
    return trace(1, args=args, state_before={"v": list(range(1000, 2000)), **args})


def _peak(function, *args, **kwargs) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        function(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _size(value) -> int:
    return len(json.dumps(value))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_checking_text_costs_at_most_ten_times_the_body(shape):
    item = _item(shape)
    assert _size(item) >= BODY
    assert _peak(unstorable_text, item) <= 10 * _size(item)
    assert _peak(trace_parse, item, aliases={}) <= 10 * _size(item)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_folding_a_trace_costs_at_most_ten_times_the_body(shape):
    item = _item(shape)
    assert _peak(aggregate_add, new_aggregate(), item) <= 10 * _size(item)


def test_a_flow_through_many_arguments_is_still_found():
    aggregate = new_aggregate()
    args = {f"a{i}": "evt_9" for i in range(50)}
    aggregate_add(aggregate, trace(1, args=args, state_before={"event_id": "evt_9"}))
    assert aggregate["variables"]["event_id"]["flows"] == 1
    assert all(entry["from"] == {"event_id": 1} for entry in aggregate["args"].values())


def test_a_problem_is_named_by_its_path_with_long_keys_shortened():
    assert unstorable_text({"args": {"q": [1, -float("inf")]}}) == (
        "args.q[1]: is a number out of range"
    )
    assert unstorable_text({"args": {"k" * 1000: ["ok", "a\x00"]}}) == (
        "args." + "k" * 61 + "...[1]: contains a NUL character (\\u0000)"
    )
    assert unstorable_text({"args": {"\ud800": 1}}) == (
        "args: contains an unpaired surrogate (invalid Unicode)"
    )
