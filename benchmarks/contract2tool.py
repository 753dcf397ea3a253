"""The public Contract2Tool benchmark: contract inference and causal filtering, beside the paper.

Inference: each of the 102 tasks' gold tool chain is executed with its mock outputs to make
successful traces (the state before a step is the task's initial state plus what earlier steps
produced; the arguments are the values of the tool's input properties taken from that state).
The traces go through the same pure modules the service runs at ingest and refresh
(``learning.aggregates``, ``learning.inference``); each tool's risk is learned from the labels
of the *other* 99 tools only (leave-one-out), never its own. Tools without traces get the
documentation evidence the paper calls "schema": requires = the input schema's required
properties, produces = nothing observed.

Scoring is the paper's: per tool precision/recall/F1 of the requires and produces sets (both
empty: 1.0; one empty: 0.0), risk accuracy, and exact match (requires, produces and risk all
equal), macro-averaged over tools. Claude Opus 4.8 with hybrid evidence is read from the
paper's per-tool CSV and averaged over the same tools.

Run: ``python -m benchmarks.contract2tool [DATA_DIR]``. Pure Python, no Django, no network.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from learning.aggregates import aggregate_add, new_aggregate
from learning.dataflow import trace_reconstruct
from learning.inference import infer_contract

DATA_DIR = Path(__file__).resolve().parent / "data" / "contract2tool"
PAPER_MODEL = "us.anthropic.claude-opus-4-8"
METRICS = ("requires_f1", "produces_f1", "risk_accuracy", "exact_match")


def set_f1(gold: list[str], predicted: list[str]) -> float:
    gold_set, predicted_set = set(gold), set(predicted)
    if not gold_set and not predicted_set:
        return 1.0
    if not gold_set or not predicted_set:
        return 0.0
    hits = len(gold_set & predicted_set)
    if not hits:
        return 0.0
    precision, recall = hits / len(predicted_set), hits / len(gold_set)
    return 2 * precision * recall / (precision + recall)


STATES = ("every step", "initial", "none")


def gold_traces(
    registry: dict[str, dict], tasks: list[dict], *, state: str = "every step"
) -> dict[str, dict]:
    """Replay every gold chain; return each traced tool's aggregate.

    ``state`` is what the runtime sends: the state before and after ``every step``; only the
    task's ``initial`` state, on its first call; or ``none`` (the user's query as the user's
    message). Each call's output is its mock output, and each run's data flow is reconstructed
    (``learning.dataflow``) with the registry's variables as the declared vocabulary.
    """
    vocabulary = {name: name for tool in registry.values() for name in _variables(tool)}
    aggregates: dict[str, dict] = {}
    for task in tasks:
        current = dict(task["initial_state"])
        steps = []
        for step, name in enumerate(task["gold_tool_chain"]):
            tool = registry[name]
            args = {
                key: current[key] for key in tool["input_schema"]["properties"] if key in current
            }
            output = task["mock_outputs"][name]
            after = {**current, **output}
            trace = {
                "trace_id": task["task_id"],
                "step": step,
                "tool": name,
                "status": "success",
                "args": args,
                "output": output,
                "duration_ms": 100 * tool.get("cost", 1),
            }
            if state == "every step":
                trace["state_before"], trace["state_after"] = dict(current), after
            elif state == "initial" and step == 0:
                trace["state_before"] = dict(task["initial_state"])
            elif state == "none":
                trace["user_texts"] = [task["user_query"]]
            steps.append(trace)
            current = after
        flows = trace_reconstruct(steps, aliases=vocabulary).steps
        for trace, flow in zip(steps, flows, strict=True):
            aggregate_add(
                aggregates.setdefault(trace["tool"], new_aggregate()), {**trace, "dataflow": flow}
            )
    return aggregates


def _variables(tool: dict) -> list[str]:
    return [*tool.get("requires", []), *tool.get("produces", [])]


def run_inference_benchmark(data_dir: Path = DATA_DIR, *, state: str = "every step") -> dict:
    tools = json.loads((data_dir / "tool_registry_100.json").read_text())
    tasks = json.loads((data_dir / "tasks_102.json").read_text())
    registry = {tool["name"]: tool for tool in tools}
    aggregates = gold_traces(registry, tasks, state=state)
    scores: dict[str, dict] = {}
    risks: list[tuple[str, str, str]] = []
    for tool in tools:
        labelled = [
            {"name": other["name"], "description": other["description"], "risk": other["risk"],
             "produces": other["produces"]}
            for other in tools
            if other["name"] != tool["name"]
        ]  # fmt: skip
        aggregate = aggregates.get(tool["name"], new_aggregate())
        inferred = infer_contract(
            name=tool["name"],
            description=tool["description"],
            input_schema=tool["input_schema"],
            aggregate=aggregate,
            labelled=labelled,
        )
        if not aggregate["total"]:
            inferred["requires"] = list(tool["input_schema"].get("required", []))
        requires_f1 = set_f1(tool["requires"], inferred["requires"])
        produces_f1 = set_f1(tool["produces"], inferred["produces"])
        risk_ok = float(inferred["risk"] == tool["risk"])
        risks.append((tool["risk"], inferred["risk"], tool["name"]))
        scores[tool["name"]] = {
            "requires_f1": requires_f1,
            "produces_f1": produces_f1,
            "risk_accuracy": risk_ok,
            "exact_match": float(requires_f1 == produces_f1 == 1.0 and risk_ok == 1.0),
        }
    paper = _paper_scores(data_dir)
    traced = sorted(aggregates)
    return {
        "traced_tools": traced,
        "ours_traced": _mean(scores, traced),
        "paper_traced": _mean(paper, traced),
        "ours_all": _mean(scores, list(registry)),
        "paper_all": _mean(paper, list(registry)),
        "risk": risks,
        "misses": {
            name: score
            for name, score in scores.items()
            if name in traced and score["exact_match"] < 1
        },
    }


RISKS = ("low", "medium", "high")


def print_risk_report(title: str, pairs: list[tuple[str, str, str]]) -> dict:
    """Accuracy, a confusion matrix (rows: the label, columns: the suggestion) and the
    count of high-risk tools suggested low, the error a reviewer cannot afford."""
    matrix = {gold: dict.fromkeys(RISKS, 0) for gold in RISKS}
    for gold, suggested, _ in pairs:
        matrix[gold][suggested] += 1
    accuracy = sum(gold == suggested for gold, suggested, _ in pairs) / len(pairs)
    high_low = [name for gold, suggested, name in pairs if gold == "high" and suggested == "low"]
    under = [name for gold, suggested, name in pairs if RISKS.index(suggested) < RISKS.index(gold)]
    print(f"{title}: accuracy {accuracy:.3f} over {len(pairs)} tools")
    print("  " + "label / suggested".ljust(20) + "".join(f"{risk:>8}" for risk in RISKS))
    for gold in RISKS:
        print(f"  {gold:20}" + "".join(f"{matrix[gold][risk]:>8}" for risk in RISKS))
    print(f"  high-risk tools suggested low: {len(high_low)} {high_low}")
    print(f"  under-rated (any level): {len(under)} {under}")
    return {"accuracy": accuracy, "matrix": matrix, "high_as_low": high_low, "under": under}


def _paper_scores(data_dir: Path) -> dict[str, dict]:
    scores = {}
    with open(data_dir / "contract_predictions_scored_traces_hybrid_4models.csv") as handle:
        for row in csv.DictReader(handle):
            if row["model"] == PAPER_MODEL and row["evidence"] == "hybrid":
                scores[row["tool_name"]] = {metric: float(row[metric]) for metric in METRICS}
    return scores


def _mean(scores: dict[str, dict], names: list[str]) -> dict:
    present = [scores[name] for name in names if name in scores]
    return {metric: sum(score[metric] for score in present) / len(present) for metric in METRICS}


def main() -> None:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR
    result = run_inference_benchmark(data_dir)
    print("Contract2Tool inference (102 tasks replayed into traces; risk learned leave-one-out)")
    print(f"{'':34}{'requires F1':>12}{'produces F1':>12}{'risk acc':>10}{'exact':>8}")
    for label, key in (
        (f"ours, {len(result['traced_tools'])} traced tools", "ours_traced"),
        ("Opus 4.8 hybrid, same tools", "paper_traced"),
        ("ours, all 100 tools", "ours_all"),
        ("Opus 4.8 hybrid, all 100 tools", "paper_all"),
    ):
        row = result[key]
        print(
            f"{label:34}{row['requires_f1']:>12.3f}{row['produces_f1']:>12.3f}"
            f"{row['risk_accuracy']:>10.3f}{row['exact_match']:>8.3f}"
        )
    for name, score in result["misses"].items():
        print(f"  not exact: {name} {score}")
    print()
    print("The same chains with less state sent (traced tools, vocabulary declared):")
    for state in STATES:
        row = run_inference_benchmark(data_dir, state=state)["ours_traced"]
        print(f"  state sent: {state:12} requires F1 {row['requires_f1']:.3f}  "
              f"produces F1 {row['produces_f1']:.3f}")  # fmt: skip
    print()
    print_risk_report("Contract2Tool risk, all 100 tools, leave-one-out labels", result["risk"])
    try:
        from benchmarks.contract2tool_filter import main as filter_main
    except ImportError:  # pragma: no cover - the filter ships with the project
        return
    print()
    filter_main()


def otel_replay_section() -> None:
    """The same chains (and the synthetic and demo worlds) replayed as OpenTelemetry GenAI
    spans through the OTLP receiver's decoding and assembly: inferred requires and produces
    beside the native traces' (``benchmarks/otlp.py``)."""
    from benchmarks.otlp import inference_figures, print_inference

    print()
    print_inference(inference_figures())


if __name__ == "__main__":
    main()
    otel_replay_section()
