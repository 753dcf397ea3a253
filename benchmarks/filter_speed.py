"""Compute time of causal filtering on a synthetic 1,000-tool registry.

The registry is layered like real ones (searches feed reads, reads feed writes) but denser:
variables sit in 10 layers of 40; a tool in layer k requires one to three variables, mostly of
layer k-1, and produces one or two of layer k, so each variable has several producers; one tool
in ten is a near-duplicate of another. Queries start from part of the base layer and ask for
one or two variables of the top layers, so the regression reaches deep into the registry.
Prints the median and p99 of ``filter_tools`` (index build excluded) and the index build time.

Run: ``python -m benchmarks.filter_speed [--tools N] [--queries N]``. Pure Python, no Django.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from api.causal import ProducerIndex, filter_tools
from registry.risk_order import DEFAULT_RISK_RANK

LAYERS = 10


def synthetic_registry(tools: int = 1000, *, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    per_layer = _variables_per_layer(tools)
    variables = [[f"v{layer}_{i}" for i in range(per_layer)] for layer in range(LAYERS + 1)]
    documents: list[dict[str, Any]] = []
    for number in range(tools):
        layer = 1 + number * LAYERS // tools
        if documents and rng.random() < 0.1:
            twin = rng.choice(documents)  # a near-duplicate: same effect, other preconditions
            produces = list(twin["produces"])
        else:
            produces = rng.sample(variables[layer], rng.choice((1, 1, 2)))
        # Mostly the layer just below, sometimes any lower one: chains with shortcuts.
        below = variables[layer - 1] if rng.random() < 0.8 else variables[rng.randrange(layer)]
        documents.append(
            {
                "name": f"tool_{number:04d}",
                "requires": rng.sample(below, rng.choice((1, 2, 2, 3))),
                "produces": produces,
                "risk": rng.choice(("low", "low", "medium", "high")),
                "cost": {"latency_ms_p50": rng.randint(20, 2000)},
            }
        )
    return documents


def queries(count: int, *, tools: int = 1000, seed: int = 11) -> list[tuple[set[str], set[str]]]:
    rng = random.Random(seed)
    per_layer = _variables_per_layer(tools)
    base = [f"v0_{i}" for i in range(per_layer)]
    top = [f"v{layer}_{i}" for layer in (LAYERS - 2, LAYERS - 1, LAYERS) for i in range(per_layer)]
    return [
        (
            set(rng.sample(base, rng.randint(per_layer // 4, per_layer))),
            set(rng.sample(top, rng.choice((1, 1, 2)))),
        )
        for _ in range(count)
    ]


def _variables_per_layer(tools: int) -> int:
    # 2.5 tools per variable and layer: several producers each, so most goals are reachable.
    return max(2, int(tools / LAYERS / 2.5))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args(argv)

    documents = synthetic_registry(args.tools)
    builds = []
    for _ in range(5):
        started = time.perf_counter()
        index = ProducerIndex(documents, risk_rank=DEFAULT_RISK_RANK)
        builds.append(time.perf_counter() - started)

    seconds, reachable, shown, plan_steps = [], 0, 0, 0
    for state, goal in queries(args.queries, tools=args.tools):
        started = time.perf_counter()
        result = filter_tools(index, state=state, goal=goal)
        seconds.append(time.perf_counter() - started)
        if result.plan:
            reachable += 1
            shown += len(result.tools)
            plan_steps += len(result.plan)

    print(f"filter_tools on a synthetic registry of {args.tools} tools, {args.queries} queries")
    print(
        f"  compute: median {statistics.median(seconds) * 1000:.3f} ms, "
        f"p99 {percentile(seconds, 0.99) * 1000:.3f} ms, max {max(seconds) * 1000:.3f} ms"
    )
    print(f"  index build: median {statistics.median(builds) * 1000:.2f} ms")
    if reachable:
        print(
            f"  reachable goals: {reachable}/{args.queries}; mean plan {plan_steps / reachable:.1f}"
            f" steps, mean tools shown {shown / reachable:.2f}"
        )


if __name__ == "__main__":
    main()
