"""Causal filtering on the Contract2Tool benchmark: our filter next to the paper's CMTF.

Replays the gold tool chains of the 102 tasks (283 steps) with the gold contracts of the
100-tool registry. Before each gold step the state is the task's initial state plus what the
earlier gold steps produced (their mock outputs) and the goal is the task's goal state; a
filter passes a step when the gold tool is among the tools it shows. Reported for both
``api.causal.filter_tools`` and a literal re-implementation of the paper's CMTF (breadth-first
search over sets of known variables, tools tried in registry order, the first step of the
first shortest plan shown):

- gold-tool exposure rate (the paper: 1.000), mean visible tools per step (1.0), steps with
  no visible tool (0), how often the two filters show the same tools, and compute time.

Run: ``python -m benchmarks.contract2tool_filter [DATA_DIR]``. Pure Python, no Django.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from api.causal import ProducerIndex, filter_tools
from registry.risk_order import DEFAULT_RISK_RANK

DATA_DIR = Path(__file__).resolve().parent / "data" / "contract2tool"
# The registry's labels, ranked as the registry's own RiskLevel migration ranks them.

Filter = Callable[[set[str], set[str]], list[str]]


def paper_cmtf(tools: Sequence[Mapping[str, Any]], *, state: set[str], goal: set[str]) -> list[str]:
    """The paper's CMTF, literally: BFS over sets of known variables, tools in registry order.

    Shows the first step of the first shortest plan found, or nothing when the goal is met or
    cannot be reached. Exponential in the plan's width: a reference, not a runtime filter.
    """
    start = frozenset(state)
    if goal <= start:
        return []
    queue: deque[tuple[frozenset[str], str]] = deque([(start, "")])
    visited = {start}
    while queue:
        known, first_step = queue.popleft()
        for tool in tools:
            if not set(tool["requires"]) <= known:
                continue
            after = known | frozenset(tool["produces"])
            if after in visited:
                continue
            step = first_step or tool["name"]
            if goal <= after:
                return [step]
            visited.add(after)
            queue.append((after, step))
    return []


def load(data_dir: Path) -> tuple[list[dict], list[dict]]:
    tools = json.loads((data_dir / "tool_registry_100.json").read_text())
    tasks = json.loads((data_dir / "tasks_102.json").read_text())
    return tools, tasks


def replay(tasks: list[dict], show: Filter) -> dict[str, Any]:
    """Score one filter on every gold step; also keep what it showed, for comparisons."""
    exposed = visible = empty = 0
    shown_per_step: list[list[str]] = []
    seconds: list[float] = []
    for task in tasks:
        state = set(task["initial_state"])
        goal = set(task["goal_state"])
        for gold_tool in task["gold_tool_chain"]:
            started = time.perf_counter()
            shown = show(state, goal)
            seconds.append(time.perf_counter() - started)
            shown_per_step.append(shown)
            exposed += gold_tool in shown
            visible += len(shown)
            empty += not shown
            state |= set(task["mock_outputs"].get(gold_tool, {}))
    steps = len(shown_per_step)
    return {
        "steps": steps,
        "gold_exposure_rate": exposed / steps,
        "mean_visible_tools": visible / steps,
        "no_visible_steps": empty,
        "median_ms": statistics.median(seconds) * 1000,
        "shown": shown_per_step,
    }


def run_filter_benchmark(data_dir: Path | str = DATA_DIR) -> dict[str, Any]:
    tools, tasks = load(Path(data_dir))
    started = time.perf_counter()
    index = ProducerIndex(tools, risk_rank=DEFAULT_RISK_RANK)
    build_ms = (time.perf_counter() - started) * 1000

    ours = replay(tasks, lambda state, goal: filter_tools(index, state=state, goal=goal).tools)
    paper = replay(tasks, lambda state, goal: paper_cmtf(tools, state=state, goal=goal))
    agreeing = sum(a == b for a, b in zip(ours.pop("shown"), paper.pop("shown"), strict=True))
    return {
        "tools": len(tools),
        "tasks": len(tasks),
        "gold_steps": ours["steps"],
        "index_build_ms": build_ms,
        "causal_filter": ours,
        "paper_cmtf": paper,
        "same_tools_shown": agreeing,
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    result = run_filter_benchmark(Path(argv[0]) if argv else DATA_DIR)
    print(
        f"Contract2Tool filter oracle: {result['tools']} tools, {result['tasks']} tasks, "
        f"{result['gold_steps']} gold steps (gold contracts)"
    )
    print(f"{'':24}{'exposure':>10}{'visible/step':>14}{'no-visible':>12}{'median ms':>11}")
    for label, key in (("causal filter (ours)", "causal_filter"), ("paper CMTF", "paper_cmtf")):
        row = result[key]
        print(
            f"{label:24}{row['gold_exposure_rate']:>10.3f}{row['mean_visible_tools']:>14.2f}"
            f"{row['no_visible_steps']:>12d}{row['median_ms']:>11.3f}"
        )
    print(
        f"same tools shown at {result['same_tools_shown']}/{result['gold_steps']} steps; "
        f"index built in {result['index_build_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
