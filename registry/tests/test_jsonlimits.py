from collections.abc import Mapping

import pytest

from registry.jsonlimits import deeper_than, more_nodes_than


def nested(depth: int) -> dict:
    """An object ``depth`` levels deep: {"a": {"a": ... {}}}."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("scalar", [None, 1, "text", 1.5, True])
def test_a_scalar_is_never_too_deep(scalar):
    assert deeper_than(scalar, 0) is None


def test_it_counts_the_outermost_container_as_level_one():
    assert deeper_than(nested(3), 3) is None
    assert deeper_than(nested(4), 3) == ("a", "a", "a")
    assert deeper_than({}, 0) == ()


def test_it_names_where_through_objects_lists_and_tuples():
    value = {"ok": [1, 2], "deep": [{"x": ({"y": []},)}]}
    assert deeper_than(value, 6) is None
    assert deeper_than(value, 5) == ("deep", 0, "x", 0, "y")


def test_it_walks_any_depth_without_recursing():
    assert deeper_than(nested(100_000), 64) == ("a",) * 64
    assert deeper_than(nested(100_000), 100_000) is None


def test_it_counts_every_node_at_any_depth_and_stops_past_the_limit():
    value = {"a": [1, 2, {"b": None}], "c": "text"}  # itself, a, its 3 items, b, c: 7 nodes
    assert not more_nodes_than(value, 7)
    assert more_nodes_than(value, 6)
    assert not more_nodes_than("scalar", 1) and more_nodes_than("scalar", 0)
    assert more_nodes_than(list(range(10**6)), 256)
    assert not more_nodes_than(nested(100_000), 100_000)


class Record(dict):
    pass


class Items(list):
    pass


class Frozen(Mapping):
    """A read-only mapping: no dict, yet walked as an object."""

    def __init__(self, **items):
        self._items = items

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


class Text(str):
    pass


def test_containers_of_other_types_are_walked_as_dicts_and_lists_are():
    # JSON's own types take a quicker path; subclasses, other mappings and tuples the general
    # one, with the same answer.
    value = Record(a=Items([Frozen(b=(Record(c=[]),)), Text("x")]))
    assert deeper_than(value, 6) is None
    assert deeper_than(value, 5) == ("a", 0, "b", 0, "c")
    assert deeper_than([Items([Items([])])], 2) == (0, 0)
    assert deeper_than(Frozen(x=Text("y")), 1) is None
    assert deeper_than(Frozen(x=Frozen(y=1)), 1) == ("x",)
