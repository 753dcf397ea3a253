"""How deep a JSON value nests and how many nodes it has, asked without recursion.

Pure Python (no Django). A recursive walk would hit the very limit it guards against, so each
walk keeps its own stack: any depth is safe, and it stops as soon as the limit is passed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

Path = tuple[str | int, ...]
_SCALARS = frozenset({str, int, float, bool, type(None)})
_Link = tuple[str | int, "_Link"] | None  # a key and its parent's link


def more_nodes_than(value: Any, limit: int) -> bool:
    """Whether ``value`` has more than ``limit`` nodes (itself, and every value and item in
    its objects and arrays at any depth); counting stops past the limit."""
    pending, nodes = [value], 1
    while pending:
        item = pending.pop()
        kind = type(item)
        # Exact types first: a JSON value's are these, and an ABC's check costs ten times more.
        if kind in _SCALARS:
            continue
        if kind is dict:
            children: Collection[Any] = item.values()
        elif kind is list:
            children = item
        elif isinstance(item, Mapping):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        nodes += len(children)
        if nodes > limit:
            return True
        pending.extend(children)
    return nodes > limit


def deeper_than(value: Any, limit: int) -> Path | None:
    """The keys and indexes leading to the first object or array nested more than ``limit``
    levels deep (the outermost value is level 1), or None when ``value`` stays within it."""
    # Each entry links to its parent's (key, link) instead of copying the path: linear time.
    pending: list[tuple[Any, int, _Link]] = [(value, 1, None)]
    while pending:
        item, depth, link = pending.pop()
        kind = type(item)
        # Exact types first, as in ``more_nodes_than``: only containers are pushed, and a
        # JSON value's are dicts and lists.
        if kind is dict or (kind is not list and isinstance(item, Mapping)):
            children: Any = item.items()
        elif kind is list or isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            return _path(link)
        pending.extend(
            (child, depth + 1, (key, link))
            for key, child in children
            if type(child) not in _SCALARS and isinstance(child, Mapping | list | tuple)
        )
    return None


def _path(link: _Link) -> Path:
    keys: list[str | int] = []
    while link is not None:
        key, link = link
        keys.append(key)
    return tuple(reversed(keys))
