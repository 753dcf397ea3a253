"""How deep a JSON value nests, asked without recursion.

Pure Python (no Django). A recursive walk would hit the very limit it guards against, so
``deeper_than`` keeps its own stack: any depth is safe, and it stops at the first container
past the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str | int, ...]
_Link = tuple[str | int, "_Link"] | None  # a key and its parent's link


def deeper_than(value: Any, limit: int) -> Path | None:
    """The keys and indexes leading to the first object or array nested more than ``limit``
    levels deep (the outermost value is level 1), or None when ``value`` stays within it."""
    # Each entry links to its parent's (key, link) instead of copying the path: linear time.
    pending: list[tuple[Any, int, _Link]] = [(value, 1, None)]
    while pending:
        item, depth, link = pending.pop()
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            return _path(link)
        pending.extend(
            (child, depth + 1, (key, link))
            for key, child in children
            if isinstance(child, Mapping | list | tuple)
        )
    return None


def _path(link: _Link) -> Path:
    keys: list[str | int] = []
    while link is not None:
        key, link = link
        keys.append(key)
    return tuple(reversed(keys))
