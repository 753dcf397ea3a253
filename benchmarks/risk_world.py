"""Risk suggestions on a second synthetic world (``demo/risk_world.py``), leave-one-out.

Each tool's risk is suggested from its own name, description, effects and permissions and
from the labels of the *other* tools only. Prints accuracy, the confusion matrix, the
high-risk tools suggested low (the target is none), and what the WordNet lexicon costs in a
fresh process: building it from the seeds (time and peak traced memory), then the senses its
walks up the hypernyms read and keep while the 54 suggestions are made (how many, and the
memory they hold).

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
    tracemalloc.start()
    held = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    pairs = run()
    elapsed = time.perf_counter() - started
    held = (tracemalloc.get_traced_memory()[0] - held) / 1e6
    tracemalloc.stop()
    assert lex.wordnet is not None
    print(
        f"  walks up the hypernyms: {len(lex._senses)} verb senses read, "
        f"{len(lex.wordnet._synsets)} synsets kept, {held:.1f} MB held after the run"
    )
    started = time.perf_counter()
    run()
    warm = time.perf_counter() - started
    print_risk_report("Second synthetic world, leave-one-out labels", pairs)
    print(
        f"  {len(pairs)} suggestions in {elapsed * 1000:.0f} ms on first use (memory traced), "
        f"{warm * 1000:.0f} ms once the senses are read"
    )
    for gold, suggested, name in pairs:
        if gold != suggested:
            print(f"  {name}: labelled {gold}, suggested {suggested}")


if __name__ == "__main__":
    main()
