"""Risk suggestions on a second synthetic world (``demo/risk_world.py``), leave-one-out.

Each tool's risk is suggested from its own name, description, effects and permissions and
from the labels of the *other* tools only. Prints accuracy, the confusion matrix, the
high-risk tools suggested low (the target is none), and what building the WordNet lexicon
costs in a fresh process (time and peak traced memory).

Run: ``python -m benchmarks.risk_world``. Pure Python, no Django, no network.
"""

from __future__ import annotations

import time
import tracemalloc

from benchmarks.contract2tool import print_risk_report
from demo.risk_world import labelled_tools
from learning.risk import lexicon, prepare_labels, suggest_risk


def lexicon_cost() -> tuple[float, float]:
    """Seconds and peak megabytes to build the lexicon (only the first call builds it)."""
    tracemalloc.start()
    started = time.perf_counter()
    lexicon()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak


def run() -> list[tuple[str, str, str]]:
    tools = labelled_tools()
    prepared = prepare_labels(tools)
    pairs = []
    for tool, own in zip(tools, prepared, strict=True):
        others = [other for other in prepared if other is not own]
        suggestion = suggest_risk(
            name=tool["name"],
            description=tool["description"],
            produces=tool["produces"],
            permissions=tool["permissions"],
            labelled=others,
        )
        pairs.append((tool["risk"], suggestion.risk, tool["name"]))
    return pairs


def main() -> None:
    seconds, peak = lexicon_cost()
    lex = lexicon()
    print(
        f"WordNet risk lexicon: built in {seconds * 1000:.0f} ms, peak {peak:.1f} MB traced; "
        f"{len(lex.verbs)} verbs, {len(lex.nouns)} act nouns, {len(lex.phrases)} phrases"
    )
    started = time.perf_counter()
    pairs = run()
    elapsed = time.perf_counter() - started
    print_risk_report("Second synthetic world, leave-one-out labels", pairs)
    print(f"  {len(pairs)} suggestions in {elapsed * 1000:.0f} ms")
    for gold, suggested, name in pairs:
        if gold != suggested:
            print(f"  {name}: labelled {gold}, suggested {suggested}")


if __name__ == "__main__":
    main()
