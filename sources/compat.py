"""Whether a changed schema breaks its callers or only widens what it takes.

Pure Python (no Django), over ``reviews.schema_changes``. A caller written against the old
input schema breaks when the new one requires an argument it did not, drops a property, narrows
a type or an enum, or tightens a bound; a consumer of the old output breaks when a property it
read disappears. Everything else that changed widens (a new optional argument, a looser bound,
more enum values) or only changes words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviews.schema_changes import schema_changes


def compatibility(
    base_input: Any, proposed_input: Any, base_output: Any = None, proposed_output: Any = None
) -> dict[str, list[str]]:
    """``{"breaking": [...], "widening": [...]}``: one sentence per finding, with its path."""
    breaking: list[str] = []
    widening: list[str] = []
    for change in schema_changes(base_input, proposed_input):
        sentence = f"{change.path or '(root)'}: {change.message}"
        (breaking if change.breaks else widening).append(sentence)
    if isinstance(base_output, Mapping) and base_output:
        for change in schema_changes(base_output, proposed_output):
            if change.kind == "removed" and change.path:
                breaking.append(f"output {change.path}: removed")
    return {"breaking": breaking, "widening": widening}
