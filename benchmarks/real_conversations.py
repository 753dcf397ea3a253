"""Contracts learnt from real agent conversations, with no state handed over, against gold.

The conversations are BFCL's (``benchmarks/data/bfcl_conversations/``: 200 conversations,
1,142 calls of 81 tools, gold contracts written from the tools' code). Each run starts on a
fresh database, registers the tools as a registry file would (name, description, input
schema; no ``requires`` or ``produces``), sends every conversation through one door, refreshes
(``learning.services.tools_refresh``, as ``refresh_contracts`` does) and scores the inferred
``requires`` and ``produces`` against gold. The doors, each with the vocabulary declared (the
gold's variables, with the argument names that reach them as aliases) and empty:

- ``otlp``: OpenTelemetry GenAI spans made by the OpenTelemetry SDK and sent by its OTLP/HTTP
  exporter to ``otlp/v1/traces``: an ``invoke_agent`` root, for each user turn a ``chat`` span
  whose ``gen_ai.input.messages`` holds the user's turns so far, then one ``execute_tool`` span
  per call with its arguments and result. No ``registry.state``.
- ``native``: native traces (``POST traces/``) without ``state_before``/``state_after``, each
  carrying the user's turns so far in ``messages`` (``[{"role": "user", "content": ...}]``).
  A registry whose trace format does not know ``messages`` gets the traces without it (said
  in the output).

Scores are micro-averaged over the (tool, variable) pairs of the tools called at least
``MIN_CALLS`` times. Nothing inferred gives precision 0. It also prints how many gold
requirements a reader of values could find at all (``literal_flows``).

    .venv/bin/python -m benchmarks.real_conversations [--limit N] [--verbose]
    .venv/bin/python -m benchmarks.real_conversations --cpu   # the data flow's CPU speed only

Each run uses its own PostgreSQL database (``registry_bench_real_<door>_<vocabulary>``,
recreated) on DATABASE_URL's host, like the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "benchmarks" / "data" / "bfcl_conversations"
MIN_CALLS = 3  # learning.inference.Thresholds.min_count: fewer calls are never inferred from
DOORS = ("otlp", "native")
VOCABULARIES = ("declared", "empty")
BATCH = 500  # native traces per request (API_MAX_TRACES_PER_REQUEST is 1,000)
FLOW_SHARE = 0.8  # learning.inference.Thresholds.flow_ratio: a requirement flows this often


# ------------------------------------------------------------------------ the data set (pure)
def load(data_dir: Path = DATA_DIR) -> tuple[list[dict], list[dict], dict[str, dict]]:
    """(conversations, tool documents, gold contracts)."""
    with (data_dir / "conversations.jsonl").open(encoding="utf-8") as handle:
        conversations = [json.loads(line) for line in handle if line.strip()]
    tools = json.loads((data_dir / "tools.json").read_text(encoding="utf-8"))
    gold = json.loads((data_dir / "gold.json").read_text(encoding="utf-8"))
    return conversations, tools, gold


def calls_of(conversation: dict) -> Iterator[tuple[int, dict]]:
    """Each call with the number of the user turn it answers."""
    for number, turn in enumerate(conversation["turns"]):
        for call in turn["calls"]:
            yield number, call


def canonical(name: str, schema: dict | None = None) -> str:
    """A variable's name from the argument that receives it: snake_case, and a list
    argument's plural made singular (``cityA`` → ``city_a``, ``item_ids`` → ``item_id``)."""
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    if (schema or {}).get("type") == "array":
        if snake.endswith("ies"):
            return snake[:-3] + "y"
        if snake.endswith("s") and not snake.endswith("ss"):
            return snake[:-1]
    return snake


def vocabulary(tools: list[dict], gold: dict[str, dict]) -> list[dict]:
    """The gold's variables as a registry file declares them, with every argument name that
    canonicalises to one of them as an alias."""
    names = {var for contract in gold.values() for key in ("requires", "produces")
             for var in contract[key]}  # fmt: skip
    aliases: dict[str, set[str]] = {name: set() for name in names}
    for tool in tools:
        for argument, schema in (tool["input_schema"].get("properties") or {}).items():
            name = canonical(argument, schema)
            if name in aliases and argument != name:
                aliases[name].add(argument)
    return [
        {"name": name, **({"aliases": sorted(aliases[name])} if aliases[name] else {})}
        for name in sorted(names)
    ]


def registry_file(tools: list[dict], gold: dict[str, dict], *, declared: bool) -> dict:
    """The tools as an operator registers them: input schemas, nothing about data flow."""
    return {
        "state_variables": vocabulary(tools, gold) if declared else [],
        "tools": [
            {"name": tool["name"], "description": tool["description"],
             "input_schema": tool["input_schema"], "requires": [], "produces": [],
             "risk": "medium"}
            for tool in tools
        ],
    }  # fmt: skip


def moments(conversations: list[dict]) -> dict[str, datetime]:
    """When each conversation began: a minute apart, ending an hour ago."""
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    return {
        conversation["id"]: end - timedelta(minutes=len(conversations) - number)
        for number, conversation in enumerate(conversations)
    }


def native_traces(conversations: list[dict], *, messages: bool = True) -> list[dict]:
    """One native trace per call, without state; ``messages``: the user's turns so far."""
    began = moments(conversations)
    traces = []
    for conversation in conversations:
        turns = [turn["user"] for turn in conversation["turns"]]
        for step, (turn, call) in enumerate(calls_of(conversation)):
            trace = {
                "trace_id": conversation["id"], "step": step, "tool": call["tool"],
                "args": call["args"], "status": call["status"], "output": call.get("output"),
                "error": call.get("error"), "duration_ms": 10,
                "occurred_at": (began[conversation["id"]] + timedelta(seconds=step)).isoformat(),
            }  # fmt: skip
            if messages:
                trace["messages"] = [
                    {"role": "user", "content": text} for text in turns[: turn + 1]
                ]
            traces.append(trace)
    return traces


def scored_tools(conversations: list[dict], gold: dict[str, dict]) -> list[str]:
    calls = Counter(call["tool"] for c in conversations for _, call in calls_of(c))
    return sorted(name for name in gold if calls[name] >= MIN_CALLS)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _trivial(value: Any) -> bool:
    return (
        value is None or isinstance(value, bool) or value == ""
        or (isinstance(value, int | float) and -10 < value < 10)
    )  # fmt: skip


def literal_flows(
    conversations: list[dict], tools: list[dict], gold: dict[str, dict]
) -> tuple[int, int, int]:
    """How many gold requirements of the scored tools a reader of values could find at all:
    (those whose argument's value, where not trivial, is in the user's words so far or equal
    to or inside an earlier output's value in at least ``FLOW_SHARE`` of the tool's calls; in
    at least one call; all). The rest the model derived from the user's words (``OMEG`` for
    "Omega Industries", ``SFO`` for "San Francisco", a date written out) or from the world's
    initial state, which no output shows."""
    properties = {tool["name"]: tool["input_schema"].get("properties") or {} for tool in tools}
    calls, found = Counter[tuple[str, str]](), Counter[tuple[str, str]]()
    for conversation in conversations:
        said, seen, texts = "", set(), []
        for turn in conversation["turns"]:
            said += " " + turn["user"]
            for call in turn["calls"]:
                tool = call["tool"]
                named = {canonical(key, properties[tool].get(key)): value
                         for key, value in call["args"].items()}  # fmt: skip
                for var in gold[tool]["requires"]:
                    values = [v for v in _leaves(named.get(var)) if not _trivial(v)]
                    if not values:
                        continue
                    calls[(tool, var)] += 1
                    output = all(
                        v in seen or (isinstance(v, str) and any(v in text for text in texts))
                        for v in values
                    )
                    user = all(
                        str(v) in said
                        or (isinstance(v, float) and v.is_integer() and str(int(v)) in said)
                        for v in values
                    )
                    found[(tool, var)] += output or user
                if call["status"] == "success":
                    for leaf in _leaves(call.get("output")):
                        if not _trivial(leaf):
                            seen.add(json.dumps(leaf) if isinstance(leaf, list | dict) else leaf)
                        if isinstance(leaf, str):
                            texts.append(leaf)
    pairs = [(t, v) for t in scored_tools(conversations, gold) for v in gold[t]["requires"]]
    mostly = sum(1 for p in pairs if calls[p] and found[p] / calls[p] >= FLOW_SHARE)
    ever = sum(1 for p in pairs if found[p])
    return mostly, ever, len(pairs)


@dataclass
class Score:
    precision: float
    recall: float
    f1: float
    true: int
    inferred: int
    gold: int


def score(gold: dict[str, dict], inferred: dict[str, dict], tools: list[str], key: str) -> Score:
    """Micro precision, recall and F1 of ``key`` (``requires`` or ``produces``) over the
    (tool, variable) pairs of ``tools``. Nothing inferred scores precision 0."""
    expected = {(tool, var) for tool in tools for var in gold[tool][key]}
    found = {(tool, var) for tool in tools for var in (inferred.get(tool) or {}).get(key, [])}
    true = len(expected & found)
    precision = true / len(found) if found else 0.0
    recall = true / len(expected) if expected else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1, true, len(found), len(expected))


def differences(gold: dict[str, dict], inferred: dict[str, dict], tools: list[str]) -> list[str]:
    """Per tool, what inference missed (-) and added (+), for --verbose."""
    lines = []
    for tool in tools:
        for key in ("requires", "produces"):
            want = set(gold[tool][key])
            got = set((inferred.get(tool) or {}).get(key, []))
            if want != got:
                changes = [f"-{v}" for v in sorted(want - got)] + [
                    f"+{v}" for v in sorted(got - want)
                ]
                lines.append(f"  {tool} {key}: " + " ".join(changes))
    return lines


def contracts_in_process(
    conversations: list[dict], tools: list[dict], gold: dict[str, dict], *, declared: bool
) -> dict[str, dict]:
    """Each tool's inferred ``requires`` and ``produces`` from the native traces without state,
    read by the pure modules ingest and refresh run (``learning.traces``, ``learning.dataflow``,
    ``learning.aggregates``, ``learning.inference``) with no database: a quick check of the
    data flow rules, equal to the native door's figures when each conversation is one batch."""
    from learning.aggregates import aggregate_add, new_aggregate
    from learning.dataflow import trace_reconstruct
    from learning.inference import infer_contract
    from learning.traces import trace_parse

    aliases = {}
    for variable in vocabulary(tools, gold) if declared else []:
        aliases[variable["name"]] = variable["name"]
        aliases.update(dict.fromkeys(variable.get("aliases", []), variable["name"]))
    runs: dict[str, list[dict]] = {}
    for item in native_traces(conversations):
        trace, errors = trace_parse(item, aliases=aliases)
        assert trace is not None, errors
        runs.setdefault(trace["trace_id"], []).append(trace)
    aggregates: dict[str, Any] = {}
    for steps in runs.values():
        for trace, flow in zip(steps, trace_reconstruct(steps, aliases=aliases).steps, strict=True):
            aggregate = aggregates.setdefault(trace["tool"], new_aggregate())
            aggregate_add(aggregate, {**trace, "dataflow": flow})
    documents = {tool["name"]: tool for tool in tools}
    inferred = {}
    for name, aggregate in aggregates.items():
        document = infer_contract(
            name=name, description=documents[name]["description"],
            input_schema=documents[name]["input_schema"], aggregate=aggregate,
        )  # fmt: skip
        inferred[name] = {key: list(document[key]) for key in ("requires", "produces")}
    return inferred


# ----------------------------------------------------------------- the doors (Django set up)
def messages_supported() -> bool:
    """Whether this registry's native trace format reads ``messages``."""
    from learning.traces import trace_parse

    probe = {"trace_id": "probe", "step": 0, "tool": "t", "status": "success",
             "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    _, errors = trace_parse(probe, aliases={})
    return not any(field == "messages" for field, _ in errors)


def send_native(traces: list[dict], *, base_url: str, token: str) -> None:
    import requests

    for start in range(0, len(traces), BATCH):
        response = requests.post(
            f"{base_url}/api/v1/traces/",
            json=traces[start : start + BATCH],
            headers={"Authorization": f"Bearer {token}"},
            timeout=300,
        )
        response.raise_for_status()
        rejected = response.json().get("rejected")
        assert not rejected, rejected[:3]


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


def send_spans(conversations: list[dict], *, base_url: str, token: str) -> int:
    """The conversations as GenAI spans, through the OpenTelemetry SDK and its OTLP/HTTP
    exporter; then assembled. Returns the number of traces assembled."""
    from django.utils import timezone
    from opentelemetry import trace as otel_trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    from learning.otel_ingest import otel_traces_assemble

    exporter = OTLPSpanExporter(
        endpoint=f"{base_url}/api/v1/otlp/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        timeout=300,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "bfcl-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=256))
    tracer = provider.get_tracer("bfcl-agent")
    began = moments(conversations)
    for conversation in conversations:
        clock = _ns(began[conversation["id"]])
        root = tracer.start_span(
            "invoke_agent assistant", start_time=clock,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant"},
        )  # fmt: skip
        context = otel_trace.set_span_in_context(root)
        said: list[dict] = []
        number = 0
        for turn in conversation["turns"]:
            said.append({"role": "user", "parts": [{"type": "text", "content": turn["user"]}]})
            clock += 10**6
            chat = tracer.start_span(
                "chat model", context=context, start_time=clock,
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "model",
                            "gen_ai.input.messages": json.dumps(said)},
            )  # fmt: skip
            chat.end(end_time=clock + 5 * 10**5)
            for call in turn["calls"]:
                clock += 10**6
                number += 1
                span = tracer.start_span(
                    f"execute_tool {call['tool']}", context=context, start_time=clock,
                    attributes={"gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": call["tool"],
                                "gen_ai.tool.call.id": f"call_{number}",
                                "gen_ai.tool.call.arguments": json.dumps(call["args"])},
                )  # fmt: skip
                if call["status"] == "error":
                    span.set_attribute("error.type", "ToolError")
                    span.set_status(Status(StatusCode.ERROR, call.get("error") or ""))
                else:
                    span.set_attribute("gen_ai.tool.call.result", json.dumps(call.get("output")))
                span.end(end_time=clock + 5 * 10**5)
        root.end(end_time=clock + 10**6)
    provider.shutdown()  # flushes every batch
    return otel_traces_assemble(now=timezone.now() + timedelta(minutes=5))


def inferred_contracts() -> dict[str, dict]:
    """Refresh as ``refresh_contracts`` does; each tool's inferred requires and produces."""
    from learning.models import InferredContract
    from learning.services import tools_refresh, tools_with_new_traces

    tools_refresh(tool_names=tools_with_new_traces())
    return {
        row.tool_name: {key: list(row.document.get(key) or []) for key in ("requires", "produces")}
        for row in InferredContract.objects.all()
    }


def run(
    conversations: list[dict],
    tools: list[dict],
    gold: dict[str, dict],
    *,
    door: str,
    declared: bool,
    base_url: str,
) -> dict[str, Any]:
    """One door, one vocabulary setting, on an empty registry served at ``base_url``."""
    from api.services import runtime_token_create
    from learning.models import Trace
    from reviews.services import registry_import

    registry_import(data=registry_file(tools, gold, declared=declared), approve=True)
    _, token = runtime_token_create(application_name="bfcl", scopes=["traces:write"])
    notes = []
    calls = sum(1 for c in conversations for _ in calls_of(c))
    if door == "otlp":
        assembled = send_spans(conversations, base_url=base_url, token=token)
        assert assembled == len(conversations), (assembled, len(conversations))
    else:
        messages = messages_supported()
        if not messages:
            notes.append("this registry's trace format has no 'messages': sent without")
        send_native(native_traces(conversations, messages=messages), base_url=base_url, token=token)
    stored = Trace.objects.count()
    assert stored == calls, (stored, calls)
    inferred = inferred_contracts()
    names = scored_tools(conversations, gold)
    return {
        "door": door, "vocabulary": "declared" if declared else "empty", "calls": calls,
        "tools": len(names), "notes": notes,
        "requires": asdict(score(gold, inferred, names, "requires")),
        "produces": asdict(score(gold, inferred, names, "produces")),
        "differences": differences(gold, inferred, names),
    }  # fmt: skip


# ------------------------------------------------------------------------------ the script
class _Server:
    """The project's WSGI application on a free local port, in a thread of this process."""

    def __enter__(self) -> str:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from django.core.wsgi import get_wsgi_application

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

        self.server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_port}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


def one(door: str, vocabulary_setting: str, limit: int | None) -> dict[str, Any]:
    from benchmarks import database

    database.django_on_fresh_database(
        f"registry_bench_real_{door}_{vocabulary_setting}",
        API_THROTTLE_RATE="1000000/min",
        ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    conversations, tools, gold = load()
    conversations = conversations[:limit] if limit else conversations
    with _Server() as base_url:
        return run(
            conversations, tools, gold, door=door,
            declared=vocabulary_setting == "declared", base_url=base_url,
        )  # fmt: skip


def print_table(rows: list[dict], *, verbose: bool, limit: int | None = None) -> None:
    first = rows[0]
    print(
        f"Real conversations (BFCL multi-turn base): {first['calls']:,} calls, "
        f"{first['tools']} tools scored (called at least {MIN_CALLS} times), no state sent"
    )
    print(f"{'door':8}{'vocabulary':12}{'requires P / R / F1':>24}{'produces P / R / F1':>24}")
    for row in rows:
        cells = [
            f"{row[key]['precision']:.2f} / {row[key]['recall']:.2f} / {row[key]['f1']:.2f}"
            for key in ("requires", "produces")
        ]
        print(f"{row['door']:8}{row['vocabulary']:12}{cells[0]:>24}{cells[1]:>24}")
        for note in row["notes"]:
            print(f"  note: {note}")
        if verbose:
            print("\n".join(row["differences"]))
    print("Micro-averaged over (tool, variable) pairs; targets: F1 >= 0.9 (requires), >= 0.8")
    print("(produces), precision >= 0.95.")
    conversations, tools, gold = load()
    conversations = conversations[:limit] if limit else conversations
    mostly, ever, total = literal_flows(conversations, tools, gold)
    print(
        f"Requirements whose values can be found literally (the user's words, earlier outputs):"
        f" {mostly} of {total} in >= {FLOW_SHARE:.0%} of their calls, {ever} in at least one."
    )


def reconstruction_speed(conversations: list[dict], *, rounds: int = 5) -> float:
    """Calls a second, of CPU, that ``learning.dataflow.trace_reconstruct`` reads the native
    traces at (each conversation a trace, with the user's turns; best of ``rounds``)."""
    import time

    from learning.dataflow import trace_reconstruct
    from learning.traces import trace_parse

    runs: dict[str, list[dict]] = {}
    for item in native_traces(conversations):
        trace, errors = trace_parse(item, aliases={})
        assert trace is not None, errors
        runs.setdefault(trace["trace_id"], []).append(trace)
    calls = sum(len(steps) for steps in runs.values())
    best = math.inf
    for _ in range(rounds):
        started = time.process_time()
        for steps in runs.values():
            trace_reconstruct(steps)
        best = min(best, time.process_time() - started)
    return calls / best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    parser.add_argument("--verbose", action="store_true", help="each tool's misses")
    parser.add_argument("--cpu", action="store_true", help="only the reconstruction's speed")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # DOOR:VOCABULARY, in a child process
    args = parser.parse_args()
    if args.cpu:
        conversations = load()[0][: args.limit] if args.limit else load()[0]
        speed = reconstruction_speed(conversations)
        print(f"data flow of the conversations' calls: {speed:,.0f} calls/s of CPU (best of 5)")
        return
    if args.one:
        door, setting = args.one.split(":")
        print(json.dumps(one(door, setting, args.limit)))
        return
    rows = []
    for door in DOORS:
        for setting in VOCABULARIES:
            # A process per run: each sets Django up on a fresh database of its own.
            command = [sys.executable, "-m", "benchmarks.real_conversations"]
            command += ["--one", f"{door}:{setting}"]
            command += ["--limit", str(args.limit)] if args.limit else []
            done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{door} / {setting} failed:\n{done.stderr}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print_table(rows, verbose=args.verbose, limit=args.limit)


if __name__ == "__main__":
    main()
