"""Output checks at ingest (pure, in-process): checks per second over the demo's contracts.

    .venv/bin/python benchmarks/output_checks.py [--checks 50000]

calendar.find_events checks a matching output (the common case) and one that violates its
schema; then a list of 20,000 rows, what a hostile runtime can make one trace cost, under a
schema that stops at the work budget and one whose rows cost no keyword (linear in size).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from learning.outputs import output_checker  # noqa: E402


def rate(check, output, state_after, count: int) -> tuple[float, dict]:
    started = time.perf_counter()
    for _ in range(count):
        result = check(output, state_after)
    elapsed = time.perf_counter() - started
    return elapsed / count * 1e6, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", type=int, default=50_000)
    args = parser.parse_args()
    registry = json.loads((ROOT / "demo" / "registry.json").read_text())
    tool = next(t for t in registry["tools"] if t["name"] == "calendar.find_events")
    check = output_checker(schema=tool["output_schema"], produces=tool["produces"])
    state_after = {"event_id": "evt_123"}

    def rows_checker(items: dict):
        schema = {"type": "object", "properties": {"rows": {"type": "array", "items": items}}}
        return output_checker(schema=schema, produces=[])

    many = {"rows": [{"a": i} for i in range(20_000)]}
    cases = {
        "matching output": (check, {"event_id": "evt_123", "match_count": 3}),
        "violating output": (check, {"event_id": "nope", "match_count": -1}),
        # Each row costs a keyword: the budget stops the check after 5,000 of them.
        "20,000 rows, typed (budget)": (rows_checker({"type": "object"}), many),
        # Rows under an empty schema cost no keyword: linear in the output's size instead.
        "20,000 rows, untyped (budget)": (rows_checker({}), many),
    }
    for label, (checker, output) in cases.items():
        count = args.checks if "budget" not in label else max(args.checks // 1000, 5)
        micros, result = rate(checker, output, state_after, count)
        print(f"{label:28} {micros:9.1f} us/check  {1e6 / micros:10,.0f}/s  {result}")


if __name__ == "__main__":
    main()
