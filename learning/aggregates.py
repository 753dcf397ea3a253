"""Per-tool trace statistics that fold one trace at a time and merge (pure: no Django).

An aggregate is a JSON object, stored in a database row and merged under that row's lock, so
it must be small whatever the number of traces: at most MAX_VARIABLES state variables and
MAX_ARGS argument names are tracked (later newcomers are counted under "overflow"), at most
MAX_EXAMPLES example trace ids per variable, and durations go into fixed logarithmic buckets.
Merging is addition, so folding traces into two aggregates and merging them equals folding all
of them into one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from .dataflow import trace_reconstruct
from .shapes import Aggregate, ArgCounts, OutputCounts, VariableCounts

Counts = TypeVar("Counts", VariableCounts, ArgCounts)

MAX_VARIABLES = 200
MAX_ARGS = 100
MAX_EXAMPLES = 5
# Durations: bucket i holds [BASE**i, BASE**(i+1)) ms; 1.15 keeps percentiles within 7.5%.
BUCKET_BASE = 1.15
MAX_ROUTES = 5  # ways a variable's values went, per variable, kept as evidence
ROUTE_ARROW = " → "  # in a requirement's route: where the value came from → the argument
MAX_SOURCES = 50
MAX_OUTPUT_PATHS = 50  # distinct failing output paths counted; later ones under OTHER_PATHS
OTHER_PATHS = "(other paths)"
OPERATOR = "operator"
TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
# Argument names and output keys become property names of a proposed schema, which a model
# reads: only identifier-like names of at most 64 ASCII characters are tracked. A name carrying
# an instruction, a right-to-left override or markup is counted under "unsafe_names" and never
# inferred (#23.1); it does not take one of the MAX_ARGS places either.
INFERABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
ARGUMENT_HEAD = re.compile(r"[.\[{]")  # where an argument's top-level name ends in its path


def inferable_name(name: Any) -> bool:
    return isinstance(name, str) and INFERABLE_NAME.fullmatch(name) is not None


def new_aggregate() -> Aggregate:
    return {
        "total": 0,
        "successes": 0,
        "errors": 0,
        "variables": {},
        "args": {},
        "durations": {},
        "overflow": 0,
        "sources": {},
        # Evidence a reviewer can follow: a few trace ids per application, of errors and of the
        # slowest calls ([duration_ms, trace_id], slowest first).
        "source_examples": {},
        "error_examples": [],
        "slowest": [],
        "outputs": new_outputs(),
    }


def new_outputs() -> OutputCounts:
    """Output checks against the approved contract (``learning/outputs.py``), counted per
    failing path and per produced variable missing from ``state_after``; ``keys`` and ``roots``
    describe the outputs seen, for proposing an output schema that matches them."""
    return {
        "checked": 0,
        "failed": 0,
        "unchecked": 0,
        "paths": {},
        "missing": {},
        "examples": [],
        "keys": {},
        "roots": {},
    }


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _entry(
    agg: Aggregate, entries: dict[str, Counts], name: str, cap: int, fresh: Callable[[], Counts]
) -> Counts | None:
    """The counters of one variable or argument, created if there is room under the cap."""
    entry = entries.get(name)
    if entry is None:
        if len(entries) >= cap:
            agg["overflow"] += 1
            return None
        entry = entries[name] = fresh()
    return entry


def _variable(agg: Aggregate, name: str) -> VariableCounts | None:
    return _entry(agg, agg["variables"], name, MAX_VARIABLES, _new_variable)


def _arg(agg: Aggregate, name: str) -> ArgCounts | None:
    return _entry(agg, agg["args"], name, MAX_ARGS, _new_arg)


def _new_variable() -> VariableCounts:
    return {"before_ok": 0, "before_err": 0, "added_ok": 0, "flows": 0, "examples": []}


def _new_arg() -> ArgCounts:
    return {"count": 0, "types": {}, "from": {}}


def _route(entry: VariableCounts, route: str, trace_id: Any, count: int = 1) -> None:
    """How a variable's values went: which output path fed which argument (a requirement),
    or which output path brought them (an effect); at most MAX_ROUTES per variable."""
    routes = entry.setdefault("routes", {})
    counted = routes.get(route)
    if counted is None:
        if len(routes) >= MAX_ROUTES:
            return
        counted = routes[route] = {"count": 0, "examples": []}
    counted["count"] += count
    if trace_id is not None:
        _remember(counted["examples"], trace_id)


def _example(entry: VariableCounts, trace_id: Any) -> None:
    _remember(entry["examples"], trace_id)


def _remember(examples: list[Any], trace_id: Any) -> None:
    if len(examples) < MAX_EXAMPLES and trace_id not in examples:
        examples.append(trace_id)


def _slow(agg: Aggregate, duration: float, trace_id: Any) -> None:
    slowest = agg.setdefault("slowest", [])
    if len(slowest) >= MAX_EXAMPLES and duration <= slowest[-1][0]:
        return
    if any(seen == trace_id for _, seen in slowest):
        return
    slowest.append([duration, trace_id])
    slowest.sort(key=lambda pair: -pair[0])
    del slowest[MAX_EXAMPLES:]


def _count_output(agg: Aggregate, check: dict[str, Any], output: Any, trace_id: Any) -> None:
    """Fold one output check: ``{"paths": [...], "missing": [...], "unchecked": reason}``."""
    outputs = agg.setdefault("outputs", new_outputs())
    if check.get("unchecked"):
        outputs["unchecked"] += 1
        return
    outputs["checked"] += 1
    root = json_type(output)
    outputs["roots"][root] = outputs["roots"].get(root, 0) + 1
    if isinstance(output, dict):
        for key, value in output.items():
            if not inferable_name(key):
                agg["unsafe_names"] = agg.get("unsafe_names", 0) + 1
                continue
            entry = outputs["keys"].get(key)
            if entry is None:
                if len(outputs["keys"]) >= MAX_ARGS:
                    continue
                entry = outputs["keys"][key] = {"count": 0, "types": {}}
            entry["count"] += 1
            kind = json_type(value)
            entry["types"][kind] = entry["types"].get(kind, 0) + 1
    paths, missing = check.get("paths") or [], check.get("missing") or []
    if not (paths or missing):
        return
    outputs["failed"] += 1
    _remember(outputs["examples"], trace_id)
    for path in paths:
        _count_path(outputs["paths"], path, 1)
    for name in missing:
        outputs["missing"][name] = outputs["missing"].get(name, 0) + 1


def _count_new_path(paths: dict[str, int], path: str, count: int) -> None:
    """Calls whose output brought a value new to its trace at ``path``; at most
    MAX_OUTPUT_PATHS paths, the first seen (a path past them is never an effect's route:
    they are the output's shape, a handful of paths)."""
    if path in paths or len(paths) < MAX_OUTPUT_PATHS:
        paths[path] = paths.get(path, 0) + count


def _count_path(paths: dict[str, int], path: str, count: int) -> None:
    if path not in paths and len(paths) >= MAX_OUTPUT_PATHS:
        path = OTHER_PATHS
    paths[path] = paths.get(path, 0) + count


def aggregate_add(agg: Aggregate, trace: dict[str, Any]) -> None:
    """Fold one trace (variable names already canonical) into ``agg``."""
    success = trace.get("status") == "success"
    agg["total"] += 1
    agg["successes" if success else "errors"] += 1
    # A null argument is a left-out one: OpenAI's strict mode sends null for every optional
    # argument the model did not give, and plan validation reads it so (docs/api.md).
    args = {name: value for name, value in (trace.get("args") or {}).items() if value is not None}
    trace_id = trace.get("trace_id")
    if not success:
        _remember(agg.setdefault("error_examples", []), trace_id)
    check = trace.get("output_check")
    if success and check is not None:
        _count_output(agg, check, trace.get("output"), trace_id)

    for name, value in args.items():
        if not inferable_name(name):
            agg["unsafe_names"] = agg.get("unsafe_names", 0) + 1
            continue
        counts = _arg(agg, name)
        if counts is not None:
            counts["count"] += 1
            kind = json_type(value)
            counts["types"][kind] = counts["types"].get(kind, 0) + 1

    flow = trace.get("dataflow")
    if flow is None:  # a trace read alone: its own state is all it has
        flow = trace_reconstruct([trace]).steps[0]
    for name in flow["present"]:
        entry = _variable(agg, name)
        if entry is not None:
            entry["before_ok" if success else "before_err"] += 1
    if success:
        fed: dict[str, list[tuple[str, str]]] = {}
        for name, argument, origin in flow["flows"]:
            fed.setdefault(name, []).append((argument, origin))
        for name, routes in fed.items():
            entry = _variable(agg, name)
            if entry is None:
                continue
            entry["flows"] += 1
            _example(entry, trace_id)
            for argument, origin in routes:
                _route(entry, f"{origin}{ROUTE_ARROW}{argument}", trace_id)
                arg = agg["args"].get(ARGUMENT_HEAD.split(argument, maxsplit=1)[0])
                if arg is not None:
                    arg["from"][name] = arg["from"].get(name, 0) + 1
        for name, path in flow["effects"]:
            entry = _variable(agg, name)
            if entry is not None:
                entry["added_ok"] += 1
                _example(entry, trace_id)
                _route(entry, path, trace_id)
        new_paths = agg.setdefault("new_paths", {})
        for path in flow.get("new_paths", ()):
            _count_new_path(new_paths, path, 1)

    source = _count_source(agg, trace.get("application_id"))
    _remember(agg.setdefault("source_examples", {}).setdefault(source, []), trace_id)

    duration = trace.get("duration_ms")
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
        bucket = str(int(math.log(max(duration, 1), BUCKET_BASE)))
        agg["durations"][bucket] = agg["durations"].get(bucket, 0) + 1
        _slow(agg, duration, trace_id)
    occurred = trace.get("occurred_at")
    if isinstance(occurred, datetime) and occurred.tzinfo is not None:
        when = occurred.astimezone(UTC).isoformat()
        _seen(agg, when, when)


def aggregate_effects_add(agg: Aggregate, effects: list[tuple[str, str]], trace_id: Any) -> None:
    """Fold the effects of a call folded before, revealed when a later call of its trace used
    the values it brought (``learning.dataflow``: an effect is known once a value flows)."""
    for name, path in effects:
        entry = _variable(agg, name)
        if entry is not None:
            entry["added_ok"] += 1
            _example(entry, trace_id)
            _route(entry, path, trace_id)


def _seen(agg: Aggregate, first: str | None, last: str | None) -> None:
    """When the folded calls were first and last made: UTC ISO texts, which sort as times."""
    if first is not None and (agg.get("first_seen") is None or first < agg["first_seen"]):
        agg["first_seen"] = first
    if last is not None and (agg.get("last_seen") is None or last > agg["last_seen"]):
        agg["last_seen"] = last


def aggregate_merge(into: Aggregate, other: Aggregate) -> None:
    """Add ``other`` into ``into``; the same caps apply."""
    into["total"] = into.get("total", 0) + other.get("total", 0)
    into["successes"] = into.get("successes", 0) + other.get("successes", 0)
    into["errors"] = into.get("errors", 0) + other.get("errors", 0)
    into["overflow"] = into.get("overflow", 0) + other.get("overflow", 0)
    if other.get("unsafe_names"):
        into["unsafe_names"] = into.get("unsafe_names", 0) + other["unsafe_names"]
    for name, entry in other.get("variables", {}).items():
        target = _variable(into, name)
        if target is None:
            continue
        target["before_ok"] += entry["before_ok"]
        target["before_err"] += entry["before_err"]
        target["added_ok"] += entry["added_ok"]
        target["flows"] += entry["flows"]
        for trace_id in entry["examples"]:
            _example(target, trace_id)
        for route, counted in entry.get("routes", {}).items():
            _route(target, route, None, counted["count"])
            kept = target["routes"].get(route)
            if kept is not None:
                for trace_id in counted["examples"]:
                    _remember(kept["examples"], trace_id)
    for name, counts in other.get("args", {}).items():
        arg = _arg(into, name)
        if arg is None:
            continue
        arg["count"] += counts["count"]
        for kind, count in counts["types"].items():
            arg["types"][kind] = arg["types"].get(kind, 0) + count
        for source, count in counts["from"].items():
            arg["from"][source] = arg["from"].get(source, 0) + count
    for bucket, count in other.get("durations", {}).items():
        into["durations"][bucket] = into["durations"].get(bucket, 0) + count
    for source, count in other.get("sources", {}).items():
        _count_source(into, source, count)
    for source, trace_ids in other.get("source_examples", {}).items():
        key = source if source in into["sources"] else "other"
        examples = into.setdefault("source_examples", {}).setdefault(key, [])
        for trace_id in trace_ids:
            _remember(examples, trace_id)
    for trace_id in other.get("error_examples", []):
        _remember(into.setdefault("error_examples", []), trace_id)
    for duration, trace_id in other.get("slowest", []):
        _slow(into, duration, trace_id)
    _merge_outputs(into.setdefault("outputs", new_outputs()), other.get("outputs"))
    if other.get("new_paths"):
        new_paths = into.setdefault("new_paths", {})
        for path, count in other["new_paths"].items():
            _count_new_path(new_paths, path, count)
    _seen(into, other.get("first_seen"), other.get("last_seen"))


def _merge_outputs(into: OutputCounts, other: OutputCounts | None) -> None:
    if not other:
        return
    into["checked"] += other.get("checked", 0)
    into["failed"] += other.get("failed", 0)
    into["unchecked"] += other.get("unchecked", 0)
    for path, count in other.get("paths", {}).items():
        _count_path(into["paths"], path, count)
    for name, count in other.get("missing", {}).items():
        into["missing"][name] = into["missing"].get(name, 0) + count
    for trace_id in other.get("examples", []):
        _remember(into["examples"], trace_id)
    for root, count in other.get("roots", {}).items():
        into["roots"][root] = into["roots"].get(root, 0) + count
    for key, entry in other.get("keys", {}).items():
        target = into["keys"].get(key)
        if target is None:
            if len(into["keys"]) >= MAX_ARGS:
                continue
            target = into["keys"][key] = {"count": 0, "types": {}}
        target["count"] += entry["count"]
        for kind, count in entry["types"].items():
            target["types"][kind] = target["types"].get(kind, 0) + count


def _count_source(agg: Aggregate, application_id: Any, count: int = 1) -> str:
    """How many traces each application reported (``operator``: imports naming none); bounded:
    past MAX_SOURCES applications the rest count under ``other``. Returns the key counted."""
    sources = agg.setdefault("sources", {})
    key = OPERATOR if application_id in (None, OPERATOR) else str(application_id)
    if key not in sources and len(sources) >= MAX_SOURCES:
        key = "other"
    sources[key] = sources.get(key, 0) + count
    return key


def aggregate_percentile(agg: Mapping[str, Any], q: float) -> float | None:
    """The q-th percentile (0-100) of durations, at the middle of its bucket."""
    buckets = sorted((int(bucket), count) for bucket, count in agg.get("durations", {}).items())
    total = sum(count for _, count in buckets)
    if not total:
        return None
    rank = q / 100 * total
    seen = 0
    for bucket, count in buckets:
        seen += count
        if seen >= rank:
            return round(BUCKET_BASE ** (bucket + 0.5), 1)
    return round(BUCKET_BASE ** (buckets[-1][0] + 0.5), 1)
