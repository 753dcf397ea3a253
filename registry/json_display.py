"""JSON as a page shows it, whatever a runtime stored (pure: no Django).

Runtimes store arguments, states and outputs of any shape; a page that pretty-prints them with
``json.dumps(indent=...)`` recurses once per level, and a run nested 900 levels deep exhausts
Python's recursion limit in the middle of a page (a 500). ``json_text`` copies the value
without recursion, showing at most ``MAX_SHOWN_DEPTH`` levels and a marker below them; a
value even Python's parser cannot read (``json.loads`` recurses too) is read as text from the
database and shown by ``stored_json_text``.
"""

from __future__ import annotations

import json
from typing import Any

# As deep as a contract's schema may go (registry.schema_limits.MAX_DEPTH): deeper values are
# rare and no reader follows them on a page.
MAX_SHOWN_DEPTH = 64


def bounded(value: Any, *, max_depth: int = MAX_SHOWN_DEPTH) -> Any:
    """A copy of ``value`` with every object or array below ``max_depth`` levels replaced by a
    marker string. Iterative, so any depth is safe."""
    holder: list[Any] = [None]
    pending: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 1)]
    while pending:
        source, target, key, depth = pending.pop()
        if isinstance(source, (dict, list)) and depth > max_depth:
            target[key] = f"… deeper levels not shown (this page shows {max_depth})"
        elif isinstance(source, dict):
            copied = dict.fromkeys(source)  # keys keep their order; values filled below
            target[key] = copied
            pending.extend((item, copied, name, depth + 1) for name, item in source.items())
        elif isinstance(source, list):
            items: list[Any] = [None] * len(source)
            target[key] = items
            pending.extend((item, items, index, depth + 1) for index, item in enumerate(source))
        else:
            target[key] = source
    return holder[0]


def stored_json_text(text: str | None) -> str:
    """JSON text as the database returns it, indented like ``json_text``; when it is nested too
    deep for Python's parser (which recurses once per level), the text as stored."""
    if text is None:
        return "null"
    try:
        value = json.loads(text)
    except (RecursionError, ValueError):
        return text
    return json_text(value)


def json_text(value: Any, *, sort_keys: bool = False) -> str:
    """``value`` as indented JSON, at most ``MAX_SHOWN_DEPTH`` levels deep."""
    return json.dumps(
        bounded(value), indent=2, ensure_ascii=False, sort_keys=sort_keys, default=str
    )
