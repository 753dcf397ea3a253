"""A synthetic registry and traces at benchmark scale (stdlib only, deterministic).

Each tool ``domainD.verbV_N`` requires one or two variables of the world and produces one of
its own, so traces show clean data flow; names and values are distinctive strings.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

VERBS = ["find", "get", "list", "create", "update", "delete", "send", "share", "summarize"]
RISK = {"find": "low", "get": "low", "list": "low", "summarize": "low", "create": "medium",
        "update": "medium", "share": "high", "delete": "high", "send": "high"}  # fmt: skip


def registry(tools: int = 1000, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    variables = [{"name": f"var_{i}", "description": f"Variable {i}"} for i in range(tools + 50)]
    documents = []
    for index in range(tools):
        verb = VERBS[index % len(VERBS)]
        needs = sorted({f"var_{rng.randrange(tools + 50)}" for _ in range(rng.choice([1, 2]))})
        produces = f"var_{index}"
        documents.append(
            {
                "name": f"domain{index % 40}.{verb}_{index}",
                "description": f"{verb.capitalize()} thing number {index} of domain {index % 40}.",
                "input_schema": {
                    "type": "object",
                    "properties": {name: {"type": "string"} for name in needs},
                    "required": needs,
                    "additionalProperties": False,
                },
                "requires": needs,
                "produces": [produces],
                "risk": RISK[verb],
                "permissions": ["read"] if RISK[verb] == "low" else ["write"],
                "cost": {
                    "latency_ms_p50": 50 + index % 100,
                    "latency_ms_p95": 200,
                    "error_rate": 0.01,
                },
            }
        )
    return {
        "state_variables": variables,
        "permissions": [{"name": "read"}, {"name": "write"}],
        "tools": documents,
    }


def traces(
    world: dict[str, Any], count: int, *, seed: int = 2, prefix: str = "run"
) -> Iterator[dict[str, Any]]:
    """``count`` successful traces spread evenly over the world's tools."""
    rng = random.Random(seed)
    tools = world["tools"]
    start = datetime.now(UTC) - timedelta(days=1)
    for index in range(count):
        tool = tools[index % len(tools)]
        state = {name: f"{name}-value-{rng.randrange(10**9)}" for name in tool["requires"]}
        state["user_id"] = "u_1"
        after = {**state, tool["produces"][0]: f"out-{index}"}
        yield {
            "trace_id": f"{prefix}-{index // 4}",
            "step": index % 4,
            "tool": tool["name"],
            "args": {name: state[name] for name in tool["requires"]},
            "status": "success",
            "state_before": state,
            "state_after": after,
            "output": {"ok": True},
            "error": None,
            "duration_ms": 40 + rng.randrange(120),
            "occurred_at": (start + timedelta(milliseconds=index)).isoformat(),
        }


def write_jsonl(path: str, items: Iterator[dict[str, Any]]) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, separators=(",", ":")))
            handle.write("\n")
            count += 1
    return count


if __name__ == "__main__":
    # python -m demo.scaled_world REGISTRY.json OUT.jsonl COUNT SEED PREFIX
    import sys

    registry_path, out, count, seed, prefix = sys.argv[1:6]
    with open(registry_path, encoding="utf-8") as handle:
        world = json.load(handle)
    write_jsonl(out, traces(world, int(count), seed=int(seed), prefix=prefix))
