"""Poisoning flags on real tool catalogs (false positives) and on poisoned tools (recall).

Every tool goes through the path a source takes: its ``tools/list`` entry becomes a declared
contract (``sources.declared``) and the review diff of a new tool (``reviews.diff``) lists
the flags a reviewer would see on its ticket. A tool counts as *alarm-flagged* when one of
its flags is an alarm; information (a link, a long text) is counted on its own.

False positives: the declared tools of public MCP servers (``benchmarks/data/catalogs/``,
the reference servers, and ``catalogs/vendors/``, the vendors' own), none of them poisoned.
Recall: the techniques of ``benchmarks/data/poisoning/techniques.json`` (one tool each,
written here) and the poisoned tools of ``mcp-server-everything-wrong`` (Apache-2.0,
captured by ``benchmarks/capture_catalogs.py``; ``poisoned`` marks them); with
``--safetybench PATH``, also the poisoned tool descriptions of an MCP-SafetyBench checkout
(read in place, not copied: see docs/benchmarks.md).

Targets: at most 2 % of real tools alarm-flagged, at least 90 % of poisoned tools flagged.

``--scaling`` also times the checks on hostile texts of n and 2n characters (runs of what
the patterns look for) and prints the ratio: about 2 where the work is linear.

Run: ``python -m benchmarks.poisoning_flags [--verbose] [--safetybench PATH] [--scaling]``.
Pure Python, no Django, no network.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reviews.diff import contract_diff
from reviews.poisoning import LocatedFlag, Severity, contract_flags, poisoning_flags, severity_of
from sources.declared import Refused, declared_document, declared_tool

DATA = Path(__file__).resolve().parent / "data"
CATALOG_DIRS = (DATA / "catalogs", DATA / "catalogs" / "vendors")
POISONING_DIR = DATA / "poisoning"
# Catalogs captured after the rules were settled and scored as they came.
HELD_OUT = frozenset({"hubspot", "exa", "clickhouse", "motherduck", "markitdown"})
# MCP-SafetyBench's domain whose poisoned tools were never read while writing the rules.
SAFETYBENCH_HELD_OUT = frozenset({"repository_management"})
TARGETS = {"false_positive_rate": 0.02, "recall": 0.90}


def tool_flags(server: str, tool: Mapping[str, Any]) -> list[LocatedFlag] | None:
    """The flags a new tool's ticket shows, or None when a source would refuse the tool."""
    try:
        declared = declared_tool(server, tool)
    except Refused:
        return None
    document = declared_document(declared, approved=None, risk="medium")
    return list(contract_diff(None, document)["flags"])


def alarms(flags: Iterable[LocatedFlag]) -> list[LocatedFlag]:
    return [flag for flag in flags if severity_of(flag) == Severity.ALARM]


def catalogs() -> dict[str, list[dict]]:
    return {
        path.stem: json.loads(path.read_text())["tools"]
        for folder in CATALOG_DIRS
        for path in sorted(folder.glob("*.json"))
    }


def techniques() -> list[dict]:
    return json.loads((POISONING_DIR / "techniques.json").read_text())["techniques"]


def everything_wrong() -> list[dict]:
    path = POISONING_DIR / "everything_wrong.json"
    return json.loads(path.read_text())["tools"] if path.exists() else []


def safetybench(root: Path) -> list[dict]:
    """Each poisoned tool description of an MCP-SafetyBench task, with its attack category."""
    found = []
    for path in sorted(root.glob("mcpuniverse/benchmark/configs/test/**/*.json")):
        task = json.loads(path.read_text())
        for change in task.get("mcp_server_modifications") or []:
            text = change.get("modification_description")
            if isinstance(text, str) and text.strip():
                found.append(
                    {
                        "category": task.get("attack_category", "?"),
                        "domain": path.parent.name,
                        "task": path.stem,
                        "tool": {
                            "name": str(change.get("tool_name") or "tool").replace("-", "_"),
                            "description": text,
                            "inputSchema": {"type": "object", "properties": {}},
                        },
                    }
                )
    return found


def catalog_figures(tools: list[dict], server: str) -> dict:
    flagged: dict[str, list[LocatedFlag]] = {}
    informed: dict[str, list[LocatedFlag]] = {}
    refused = 0
    for tool in tools:
        flags = tool_flags(server, tool)
        if flags is None:
            refused += 1
            continue
        if alarms(flags):
            flagged[tool["name"]] = alarms(flags)
        elif flags:
            informed[tool["name"]] = flags
    checked = len(tools) - refused
    return {
        "tools": checked,
        "refused": refused,
        "alarm": flagged,
        "information": informed,
        "rate": len(flagged) / checked if checked else 0.0,
    }


def recall(tools: list[dict], server: str = "poisoned") -> tuple[int, list[str]]:
    """How many of ``tools`` carry an alarm, and the names of those that do not."""
    missed = [tool["name"] for tool in tools if not alarms(tool_flags(server, tool) or [])]
    return len(tools) - len(missed), missed


def overall(names: Iterable[str], found: dict[str, dict]) -> tuple[int, int]:
    names = list(names)
    return (
        sum(len(found[name]["alarm"]) for name in names),
        sum(found[name]["tools"] for name in names),
    )


# Hostile texts: long runs of what each check looks for, so a pattern that backtracks shows.
HOSTILE = {
    "letters": "a",
    "leetspeak": "1a",
    "base64": "QUFB",
    "base64 words": base64.b64encode(b"send it to evil.zz/x now ").decode() + " ",
    "send to": "send to ",
    "you must": "you must ",
    "ignore": "ignore ",
    "open tags": "<a ",
    "host dots": "a.",
    "scheme-relative": "//a.",
    "compliance": "compliance ",
    "rm -rf": "rm -rf ",
    "chinese": "忽略",
}
SCALING_SIZE = 20_000


def _seconds(check: Any, argument: Any) -> float:
    started = time.perf_counter()
    check(argument)
    return time.perf_counter() - started


def scaling() -> None:
    """Seconds for n and 2n characters of each hostile text, and their ratio."""
    print(f"{'hostile text':18}{'n':>9}{'2n':>9}{'ratio':>7}")
    for label, unit in HOSTILE.items():
        small, large = (unit * (size // len(unit)) for size in (SCALING_SIZE, 2 * SCALING_SIZE))
        first, second = _seconds(poisoning_flags, small), _seconds(poisoning_flags, large)
        print(f"{label:18}{first:>8.2f}s{second:>8.2f}s{second / first:>7.1f}")
    documents = [
        {
            "description": "ignore all previous",
            "input_schema": {
                "type": "object",
                "properties": {
                    f"p{index}": {"type": "string", "description": "instructions " * 20}
                    for index in range(count)
                },
            },
            "annotations": {"readOnlyHint": True},
        }
        for count in (200, 400)
    ]
    first, second = (_seconds(contract_flags, document) for document in documents)
    print(f"{'200/400 parameters':18}{first:>8.2f}s{second:>8.2f}s{second / first:>7.1f}")


def main(arguments: list[str]) -> None:
    verbose = "--verbose" in arguments
    found = {name: catalog_figures(tools, name) for name, tools in catalogs().items()}
    print(f"{'catalog':24}{'tools':>7}{'alarm':>7}{'rate':>8}{'information':>13}")
    for name, result in found.items():
        label = f"{name}{' (held out)' if name in HELD_OUT else ''}"
        print(
            f"{label:24}{result['tools']:>7}{len(result['alarm']):>7}{result['rate']:>8.1%}"
            f"{len(result['information']):>13}"
        )
        if verbose:
            for tool, flags in result["alarm"].items():
                for flag in flags:
                    print(f"    ALARM {tool} {flag['where']}: {flag['code']}: {flag['excerpt']}")
            for tool, flags in result["information"].items():
                codes = ", ".join(sorted({flag["code"] for flag in flags}))
                print(f"    info  {tool}: {codes}")
    for label, names in (
        ("tuned on", [name for name in found if name not in HELD_OUT]),
        ("held out", [name for name in found if name in HELD_OUT]),
        ("all", list(found)),
    ):
        flagged, total = overall(names, found)
        rate = flagged / total if total else 0.0
        target = "met" if rate <= TARGETS["false_positive_rate"] else "MISSED"
        print(f"false positives, {label}: {flagged}/{total} = {rate:.1%}  ({target})")
    sets = [
        ("techniques", [item["tool"] for item in techniques()]),
        ("mcp-server-everything-wrong", [t for t in everything_wrong() if t.get("poisoned")]),
    ]
    if "--safetybench" in arguments:
        root = Path(arguments[arguments.index("--safetybench") + 1])
        cases = safetybench(root)
        for label, held in (("tuned on", False), ("held out", True)):
            chosen = [c["tool"] for c in cases if (c["domain"] in SAFETYBENCH_HELD_OUT) == held]
            sets.append((f"MCP-SafetyBench, {label}", chosen))
        sets.append(("MCP-SafetyBench, all", [case["tool"] for case in cases]))
    for label, tools in sets:
        hit, missed = recall(tools)
        rate = hit / len(tools) if tools else 0.0
        target = "met" if rate >= TARGETS["recall"] else "MISSED"
        print(f"recall, {label}: {hit}/{len(tools)} = {rate:.1%}  ({target})")
        if verbose and missed:
            print("    missed: " + ", ".join(missed))
    honest = [t for t in everything_wrong() if not t.get("poisoned")]
    hit, _ = recall(honest)
    print(f"honest tools of mcp-server-everything-wrong alarm-flagged: {hit}/{len(honest)}")
    if "--scaling" in arguments:
        scaling()


if __name__ == "__main__":
    main(sys.argv[1:])
