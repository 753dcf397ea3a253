"""CPU time of the review diff over a wide input schema, against copying the two documents.

``contract_diff`` walks both schemas (``reviews.schema_changes.flatten``), reads every change
(``schema_changes``: what narrows, what loosens) and every text a model reads. The reference in
the same run is ``copy.deepcopy`` of both documents, which the diff does once anyway; the ratio
is what to compare between machines and versions. No database.

    .venv/bin/python benchmarks/schema_diff.py [--properties 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviews.diff import contract_diff  # noqa: E402


def document(properties: int, *, changed: bool) -> dict[str, Any]:
    """A contract whose input schema has ``properties`` properties of several kinds; the
    changed one loosens a bound, narrows an enum and drops a required name every tenth."""
    schema: dict[str, Any] = {}
    required = []
    for index in range(properties):
        name = f"field_{index}"
        kind = index % 4
        if kind == 0:
            node: dict[str, Any] = {"type": "string", "maxLength": 80, "description": name}
        elif kind == 1:
            node = {"type": "integer", "minimum": 0, "maximum": 1000}
        elif kind == 2:
            node = {"enum": ["a", "b", "c"]}
        else:
            node = {"type": "array", "items": {"type": "object", "properties": {"x": {}}}}
        if changed and index % 10 == 0:
            node = {**node, "maxLength": 200} if kind == 0 else node
            node = {**node, "enum": ["a", "b"]} if kind == 2 else node
        schema[name] = node
        if not (changed and index % 10 == 0):
            required.append(name)
    return {
        "name": "bench.wide",
        "description": "A wide tool.",
        "input_schema": {"type": "object", "properties": schema, "required": required},
        "risk": "low",
    }


def best(runs: int, work: Any) -> float:
    timings = []
    for _ in range(runs):
        started = time.process_time()
        work()
        timings.append(time.process_time() - started)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--properties", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = document(args.properties, changed=False)
    proposed = document(args.properties, changed=True)
    diff = contract_diff(base, proposed)
    assert diff["loosened"], "the changed document loosens something"
    reference = best(args.runs, lambda: (copy.deepcopy(base), copy.deepcopy(proposed)))
    measured = best(args.runs, lambda: contract_diff(base, proposed))
    print(f"properties: {args.properties}, loosenings found: {len(diff['loosened'])}")
    print(f"deepcopy of both documents: {reference * 1000:.1f} ms (best of {args.runs})")
    print(f"contract_diff: {measured * 1000:.1f} ms (best of {args.runs})")
    print(f"ratio: {measured / reference:.1f}x the copy")


if __name__ == "__main__":
    main()
