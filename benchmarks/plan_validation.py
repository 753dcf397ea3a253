"""Compute time of plan validation: 50-step plans over a synthetic 1,000-tool registry.

The registry is ``benchmarks.filter_speed``'s (layered variables, near-duplicates), each tool
given an input schema of three properties. A plan is a walk up the layers: each step a tool
whose requires the state and the steps before provide, seven times in ten (the others lack a
variable and get ``unmet_requires`` naming its producers), with args that satisfy the schema.
Prints the median and p99 of ``validate_plan`` with the producer index built once, as the API
caches it per application and registry revision.

Run: ``python -m benchmarks.plan_validation [--tools N] [--steps N] [--plans N]``. Pure Python.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from api.causal import ProducerIndex
from api.planning import validate_plan
from benchmarks.filter_speed import synthetic_registry
from registry.risk_order import DEFAULT_RISK_RANK

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def random_plan(
    documents: list[dict[str, Any]], steps: int, state: list[str], rng: random.Random
) -> list[dict]:
    available = set(state)
    by_layer: dict[int, list[dict[str, Any]]] = {}
    for document in documents:
        layer = int(document["produces"][0].split("_")[0][1:])
        by_layer.setdefault(layer, []).append(document)
    layers = sorted(by_layer)
    plan = []
    for step in range(steps):
        layer = layers[min(len(layers) - 1, step * len(layers) // steps)]
        ready = [
            d
            for d in by_layer[layer] + by_layer.get(layer - 1, [])
            if available >= set(d["requires"])
        ]
        tool = rng.choice(ready if ready and rng.random() < 0.7 else by_layer[layer])
        available.update(tool["requires"], tool["produces"])
        args = {"query": f"q{step}", "limit": rng.randint(1, 100), "tags": ["a", "b"]}
        plan.append({"tool": tool["name"], "args": args})
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--plans", type=int, default=500)
    options = parser.parse_args()
    rng = random.Random(11)
    documents = [{**d, "input_schema": SCHEMA} for d in synthetic_registry(options.tools)]
    contracts = {document["name"]: document for document in documents}
    index = ProducerIndex(documents, risk_rank=DEFAULT_RISK_RANK)

    def producers(variable: str) -> list[str]:
        return [index.names[tool] for tool in index.producers.get(variable, ())]

    state = [f"v0_{i}" for i in range(20)]
    times, unmet = [], 0
    for _ in range(options.plans):
        plan = random_plan(documents, options.steps, state, rng)
        started = time.perf_counter()
        result = validate_plan(
            plan=plan, contracts=contracts, policy=None, state=state, producers=producers
        )
        times.append(time.perf_counter() - started)
        unmet += sum(v["invariant"] == "unmet_requires" for v in result["violations"])
    times.sort()
    print(
        f"{options.plans} plans of {options.steps} steps over {options.tools} tools: "
        f"median {statistics.median(times) * 1000:.2f} ms, "
        f"p99 {times[int(len(times) * 0.99) - 1] * 1000:.2f} ms, max {times[-1] * 1000:.2f} ms; "
        f"{unmet / options.plans:.1f} unmet_requires per plan"
    )


if __name__ == "__main__":
    main()
