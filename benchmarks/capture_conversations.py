"""Capture real multi-turn agent conversations from the Berkeley Function Calling Leaderboard.

BFCL's multi-turn categories (ShishirPatil/gorilla, ``berkeley-function-call-leaderboard/``,
Apache-2.0) give, for each conversation, the user's turns, the initial state of the tools'
world (``initial_config``) and the ground-truth calls of each turn; the tools themselves are
executable Python classes (``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``). This
script executes the ground-truth calls in order against those classes, initialised as BFCL
does, and writes what an instrumented runtime would have seen: each turn's user message, then
each call with its arguments (positional ones named by the method's signature), its output
and whether it failed; beside it, ``tools.json``: each called tool's description and input
schema from BFCL's function documents. The classes' code is needed only here, at capture
time; it is not part of the project.

    python -m benchmarks.capture_conversations PATH/berkeley-function-call-leaderboard \\
        [--category multi_turn_base] [--out benchmarks/data/bfcl_conversations/conversations.jsonl]

Run it with an interpreter that has ``mpmath`` (BFCL's MathAPI imports it); it imports
nothing from the project, so any Python 3.11 does.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

# BFCL's class -> module (bfcl_eval.constants.executable_backend_config.CLASS_FILE_PATH_MAPPING).
MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = {"MathAPI"}  # BFCL's STATELESS_CLASSES: no scenario to load
# The registry's tool namespace for each class: the words of the class's own name.
NAMESPACES = {
    "GorillaFileSystem": "file_system",
    "MathAPI": "math",
    "MessageAPI": "message",
    "TwitterAPI": "twitter",
    "TicketAPI": "ticket",
    "TradingBot": "trading",
    "TravelAPI": "travel",
    "VehicleControlAPI": "vehicle",
}
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# BFCL's function documents (``data/multi_turn_func_doc/``) for each class.
FUNC_DOCS = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
# BFCL's parameter types in JSON Schema's words.
TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
OUTPUT_LIMIT = 4000  # characters of one output kept: file contents can be long


def instances(classes: list[str], config: dict) -> dict[str, Any]:
    made = {}
    for name in classes:
        cls = getattr(importlib.import_module(f"{PACKAGE}.{MODULES[name]}"), name)
        instance = cls()
        if name not in STATELESS:
            instance._load_scenario(copy.deepcopy(config.get(name, {})), long_context=False)
        made[name] = instance
    return made


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text}")
    args = [ast.literal_eval(arg) for arg in node.args]
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    return node.func.id, args, kwargs


def jsonable(value: Any) -> Any:
    """What the tool answered, as JSON (BFCL's executor does the same with ``json.dumps``)."""
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def run(calls: list[str], methods: dict[str, tuple[str, Any]]) -> list[dict]:
    steps = []
    for text in calls:
        name, args, kwargs = parse_call(text)
        owner, method = methods[name]
        bound = inspect.signature(method).bind(*args, **kwargs)
        named = dict(bound.arguments)
        step: dict[str, Any] = {"tool": f"{NAMESPACES[owner]}.{name}", "args": named}
        try:
            output = jsonable(method(*args, **kwargs))
        except Exception as exc:  # the tool failed: that is data, as BFCL records it
            step.update(status="error", error=f"{type(exc).__name__}: {exc}")
        else:
            failed = isinstance(output, dict) and set(output) == {"error"}
            if failed:
                step.update(status="error", error=str(output["error"]))
            else:
                encoded = json.dumps(output)
                if len(encoded) > OUTPUT_LIMIT:
                    output = {"truncated": encoded[:OUTPUT_LIMIT]}
                step.update(status="success", output=output)
        steps.append(step)
    return steps


def capture(root: Path, category: str) -> list[dict]:
    sys.path.insert(0, str(root))
    data = root / "bfcl_eval" / "data"
    questions = [json.loads(line) for line in (data / f"BFCL_v4_{category}.json").open()]
    answers = {
        item["id"]: item["ground_truth"]
        for item in map(json.loads, (data / "possible_answer" / f"BFCL_v4_{category}.json").open())
    }
    conversations = []
    for question in questions:
        classes = question["involved_classes"]
        made = instances(classes, question.get("initial_config", {}))
        methods = {
            name: (owner, method)
            for owner, instance in made.items()
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod)
            if not name.startswith("_")
        }
        turns = []
        for messages, calls in zip(question["question"], answers[question["id"]], strict=True):
            user = " ".join(m["content"] for m in messages if m["role"] == "user")
            turns.append({"user": user, "calls": run(calls, methods)})
        conversations.append(
            {"id": question["id"], "classes": sorted(NAMESPACES[c] for c in classes),
             "turns": turns}
        )  # fmt: skip
    return conversations


def schema_of(parameter: dict) -> dict:
    """A BFCL parameter document as JSON Schema: types renamed, descriptions and enums kept."""
    schema: dict[str, Any] = {}
    kind = TYPES.get(parameter.get("type", ""), parameter.get("type"))
    if kind:
        schema["type"] = kind
    for key in ("description", "enum"):
        if key in parameter:
            schema[key] = parameter[key]
    if "items" in parameter:
        schema["items"] = schema_of(parameter["items"])
    if "properties" in parameter:
        schema["properties"] = {k: schema_of(v) for k, v in parameter["properties"].items()}
    if parameter.get("required"):
        schema["required"] = list(parameter["required"])
    return schema


def tool_documents(root: Path, used: set[str]) -> list[dict]:
    """The called tools' names, descriptions and input schemas, from BFCL's function docs."""
    documents = []
    for owner, stem in FUNC_DOCS.items():
        path = root / "bfcl_eval" / "data" / "multi_turn_func_doc" / f"{stem}.json"
        for line in path.open():
            doc = json.loads(line)
            name = f"{NAMESPACES[owner]}.{doc['name']}"
            if name in used:
                description = doc["description"].split("Tool description: ", 1)[-1]
                documents.append(
                    {"name": name, "description": description,
                     "input_schema": schema_of(doc["parameters"])}
                )  # fmt: skip
    return sorted(documents, key=lambda document: document["name"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path, help="a checkout's berkeley-function-call-leaderboard/")
    parser.add_argument("--category", default="multi_turn_base")
    default = Path(__file__).parent / "data" / "bfcl_conversations" / "conversations.jsonl"
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args()
    conversations = capture(args.root, args.category)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        for conversation in conversations:
            handle.write(json.dumps(conversation, sort_keys=True, separators=(",", ":")) + "\n")
    calls = [c for conv in conversations for turn in conv["turns"] for c in turn["calls"]]
    tools = tool_documents(args.root, {call["tool"] for call in calls})
    (args.out.parent / "tools.json").write_text(json.dumps(tools, indent=1) + "\n")
    errors = sum(call["status"] == "error" for call in calls)
    print(f"{len(conversations)} conversations, {len(calls)} calls ({errors} failed), "
          f"{len(tools)} tools -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
