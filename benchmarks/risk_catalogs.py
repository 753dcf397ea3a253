"""Risk suggestions on real tool catalogs, Contract2Tool and the synthetic worlds, leave-one-out.

Catalogs: the declared tools of public MCP servers (``benchmarks/data/catalogs/``, captured by
``benchmarks/capture_catalogs.py``; labels from the authors' annotations, reviewed by hand:
docs/benchmarks.md), Contract2Tool's 100 tools and the second synthetic world
(``demo/risk_world.py``). Each tool's risk is suggested from its own words (and, in the
"with hints" run, its declared annotations) and from the labels of the *other* tools of the
same catalog: each catalog is one application whose reviewers labelled the rest.

Per catalog and run: accuracy; high-risk tools suggested below high; write tools (labelled
medium or high) suggested low; read-only tools (labelled low) suggested low (a rate); and
over-ratings. Targets, one set of settings: 0, 0, at least 90%, accuracy at least 0.85.

Run: ``python -m benchmarks.risk_catalogs [--verbose]``. Pure Python, no Django, no network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from demo.risk_world import labelled_tools
from learning.risk import prepare_labels, suggest_risk
from registry.risk_order import RISK_ORDER

DATA = Path(__file__).resolve().parent / "data"
CATALOG_DIR = DATA / "catalogs"
DEMO_REGISTRY = Path(__file__).resolve().parent.parent / "demo" / "registry.json"
# Catalogs the rules were never tuned on (their figures are reported as they came).
HELD_OUT = frozenset({"github", "gitlab", "slack"})
TARGETS = {"high_below_high": 0, "write_low": 0, "read_low_rate": 0.9, "accuracy": 0.85}


def mcp_catalog(path: Path) -> list[dict]:
    document = json.loads(path.read_text())
    return [
        {
            "name": tool["name"],
            "description": tool["description"],
            "input_schema": tool["inputSchema"],
            "annotations": tool.get("annotations"),
            "produces": [],
            "permissions": [],
            "risk": tool["label"],
        }
        for tool in document["tools"]
    ]


def contract2tool() -> list[dict]:
    tools = json.loads((DATA / "contract2tool" / "tool_registry_100.json").read_text())
    return [
        {"name": tool["name"], "description": tool["description"],
         "input_schema": tool["input_schema"], "produces": tool["produces"],
         "permissions": tool.get("permissions") or [], "risk": tool["risk"]}
        for tool in tools
    ]  # fmt: skip


def demo_registry() -> list[dict]:
    """The demo's registry (``demo/registry.json``): the team's first synthetic world."""
    document = json.loads(DEMO_REGISTRY.read_text())
    return [
        {"name": tool["name"], "description": tool.get("description", ""),
         "input_schema": tool.get("input_schema"), "produces": tool.get("produces") or [],
         "permissions": tool.get("permissions") or [], "risk": tool["risk"]}
        for tool in document["tools"]
        if tool.get("risk") in RISK_ORDER
    ]  # fmt: skip


def catalogs() -> dict[str, list[dict]]:
    found = {path.stem: mcp_catalog(path) for path in sorted(CATALOG_DIR.glob("*.json"))}
    found["contract2tool"] = contract2tool()
    found["demo_registry"] = demo_registry()
    found["risk_world"] = labelled_tools()
    return found


def run(tools: list[dict], *, hints: bool) -> list[dict]:
    """Leave-one-out suggestions; with ``hints`` False, annotations are removed everywhere."""
    if not hints:
        tools = [{**tool, "annotations": None} for tool in tools]
    prepared = prepare_labels(tools)
    results = []
    for tool, own in zip(tools, prepared, strict=True):
        schema = tool.get("input_schema") or {}
        suggestion = suggest_risk(
            name=tool["name"],
            description=tool["description"],
            produces=tool.get("produces") or [],
            permissions=tool.get("permissions") or [],
            annotations=tool.get("annotations"),
            arguments=list(schema.get("properties") or {}),
            labelled=[other for other in prepared if other is not own],
        )
        results.append({"name": tool["name"], "label": tool["risk"], **suggestion._asdict()})
    return results


def figures(results: list[dict]) -> dict:
    def rank(risk: str) -> int:
        return RISK_ORDER.index(risk)

    reads = [item for item in results if item["label"] == "low"]
    return {
        "tools": len(results),
        "accuracy": sum(item["label"] == item["risk"] for item in results) / len(results),
        "high_below_high": [
            item["name"] for item in results if item["label"] == "high" and item["risk"] != "high"
        ],
        "write_low": [
            item["name"] for item in results if item["label"] != "low" and item["risk"] == "low"
        ],
        "read_low_rate": (
            sum(item["risk"] == "low" for item in reads) / len(reads) if reads else 1.0
        ),
        "over": [item["name"] for item in results if rank(item["risk"]) > rank(item["label"])],
    }


def meets(result: dict) -> bool:
    return (
        len(result["high_below_high"]) == TARGETS["high_below_high"]
        and len(result["write_low"]) == TARGETS["write_low"]
        and result["read_low_rate"] >= TARGETS["read_low_rate"]
        and result["accuracy"] >= TARGETS["accuracy"]
    )


def main(verbose: bool = False) -> None:
    header = (
        f"{'catalog':16}{'run':>8}{'tools':>7}{'accuracy':>10}{'high<high':>11}"
        f"{'write low':>11}{'read low':>10}{'over':>6}  targets"
    )
    print(header)
    for name, tools in catalogs().items():
        for hints in (False, True):
            if hints and not any(tool.get("annotations") for tool in tools):
                continue
            results = run(tools, hints=hints)
            result = figures(results)
            label = f"{name}{' (held out)' if name in HELD_OUT else ''}"
            print(
                f"{label:16}{'hints' if hints else 'words':>8}{result['tools']:>7}"
                f"{result['accuracy']:>10.3f}{len(result['high_below_high']):>11}"
                f"{len(result['write_low']):>11}{result['read_low_rate']:>10.0%}"
                f"{len(result['over']):>6}  {'met' if meets(result) else 'MISSED'}"
            )
            if verbose:
                for item in results:
                    if item["label"] != item["risk"]:
                        print(f"    {item['name']}: labelled {item['label']}, "
                              f"suggested {item['risk']}")  # fmt: skip


if __name__ == "__main__":
    main(verbose="--verbose" in sys.argv[1:])
