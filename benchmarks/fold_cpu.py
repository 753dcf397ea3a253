"""CPU time of what ingest does to each trace besides storing it: parse, find the data flow,
fold. No database: the figure is steadier than a whole import on a shared machine.

    .venv/bin/python benchmarks/fold_cpu.py [--traces 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demo import scaled_world as world  # noqa: E402
from learning.aggregates import aggregate_add, new_aggregate  # noqa: E402
from learning.dataflow import trace_reconstruct  # noqa: E402
from learning.traces import trace_parse  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=20_000)
    args = parser.parse_args()
    traces = list(world.traces(world.registry(1000), args.traces))
    timings = []
    for _ in range(3):
        aggregates: dict[str, dict] = {}
        started = time.process_time()
        for item in traces:
            trace, _ = trace_parse(item, aliases={})
            assert trace is not None
            trace["dataflow"] = trace_reconstruct([trace]).steps[0]
            aggregate_add(aggregates.setdefault(trace["tool"], new_aggregate()), trace)
        timings.append(time.process_time() - started)
    print(
        f"parse, data flow and fold: {args.traces / min(timings):,.0f} traces/s of CPU (best of 3)"
    )


if __name__ == "__main__":
    main()
