"""A tool's contract inferred from its trace aggregates (pure: no Django), and drift.

After Contract2Tool (arXiv 2606.07904, section IV), but deterministic:

- ``produces``: variables that successful calls bring new values of (``learning.dataflow``:
  added to a state the runtime sent, or a value the trace did not know) in at least
  ``produces_ratio`` of successes (a search that finds nothing a third of the time still
  produces its id; a variable added once in twenty calls is incidental, not an effect). Judged
  across traces too: an output path that brought a variable in at least ``min_count`` calls'
  traces brings it in every call that brought a new value at that path (``_brought``).
- ``requires``: variables whose values flow into the arguments (nested too; found by
  ``learning.dataflow`` in earlier outputs, the user's messages or the state) in at least
  ``flow_ratio`` of successes, or ``required_flow_ratio`` of them when the argument is required
  (the input schema's ``required``: declared, or always sent). A required argument is sent on
  every call, so the question is only whether it carries data someone had to know or a setting
  the model chose; values that flowed in a third of the calls say data (the other calls'
  values were derived: a date written out, a name abbreviated), while a setting never flows.
  Plus variables present in every success and absent from at
  least ``failure_ratio`` of failures (preconditions seen only through failures). A variable
  that is merely always there (a user id, a locale) never flows and is present in failures too,
  so it is not a precondition; a variable feeding an argument sent only sometimes is optional.
- ``input_schema``: observed argument names and JSON types, merged into the declared schema
  (``_schema``); ``required`` = always sent. Only identifier-like names are inferred
  (``aggregates.inferable_name``): a model reads them, and a runtime chooses them; the others
  are counted in ``evidence.unsafe_names``.
- ``risk``: a suggestion that never under-rates danger (``learning.risk``): words of danger
  in the name, description, effects and permissions found through WordNet, and the labels
  people gave similar tools in this registry; its evidence is returned under
  ``evidence.risk``. A person's label always wins over it.
- ``cost``: latency p50/p95 from the duration histogram and the error rate.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from registry.cost import cost_changed
from registry.risk_order import DEFAULT_RISK_RANK

from .aggregates import ROUTE_ARROW, aggregate_percentile, inferable_name
from .outputs import output_schema_proposal
from .risk import LabelIndex, Lexicon, prepare_labels, suggest_risk
from .shapes import (
    NO_VARIABLE,
    Aggregate,
    DriftItem,
    InferredDocument,
    OutputCounts,
    Route,
    VariableCounts,
)

# The contract's lists of state variables, compared name by name.
CONTRACT_LISTS: tuple[Literal["requires", "produces"], ...] = ("requires", "produces")

ARGUMENT_END = re.compile(r"[.\[]")  # where a route's argument path goes below its argument


@dataclass(frozen=True)
class Thresholds:
    produces_ratio: float = 0.3
    flow_ratio: float = 0.8
    required_flow_ratio: float = 0.3
    failure_ratio: float = 0.5
    min_count: int = 3


__all__ = ["prepare_labels", "suggest_risk"]  # the risk part lives in .risk


def infer_contract(
    *,
    name: str,
    description: str,
    input_schema: dict[str, Any] | None,
    aggregate: Aggregate,
    labelled: Iterable[Mapping[str, Any]] | LabelIndex = (),
    permissions: Iterable[str] = (),
    annotations: dict[str, Any] | None = None,
    thresholds: Thresholds = Thresholds(),
    lex: Lexicon | None = None,
) -> InferredDocument:
    successes = aggregate.get("successes", 0)
    errors = aggregate.get("errors", 0)
    total = aggregate.get("total", 0)
    variables = aggregate.get("variables", {})
    produces, requires, gated = [], [], []
    schema, unsafe = _schema(aggregate, input_schema, total)
    required = set(schema.get("required") or ())
    new_paths = aggregate.get("new_paths") or {}
    brought = {var: _brought(entry, new_paths, thresholds) for var, entry in variables.items()}
    for var, entry in sorted(variables.items()):
        if (
            successes
            and brought[var] >= thresholds.min_count
            and (brought[var] / successes >= thresholds.produces_ratio)
        ):
            produces.append(var)
        ratio = thresholds.required_flow_ratio if _feeds(entry, required) else thresholds.flow_ratio
        flows = successes and entry["flows"] / successes >= ratio
        missing_in_errors = errors - entry["before_err"]
        gate = (
            successes >= thresholds.min_count
            and entry["before_ok"] == successes
            and missing_in_errors >= 1
            and missing_in_errors / errors >= thresholds.failure_ratio
        )
        if (flows and entry["flows"] >= thresholds.min_count) or gate:
            requires.append(var)
        if gate:
            gated.append(var)
    flowed = {var: entry["flows"] for var, entry in variables.items()}
    risk, risk_confidence, risk_evidence = suggest_risk(
        name=name, description=description, produces=produces, permissions=list(permissions),
        labelled=labelled, annotations=annotations,
        arguments=list((schema or {}).get("properties") or {}), gated=gated, lex=lex,
    )  # fmt: skip
    support = total
    # More traces, more confidence; 30 traces give about 0.95.
    evidence = 1 - math.exp(-support / 10) if support else 0.0
    return {
        "name": name,
        "description": description,
        "requires": requires,
        "produces": produces,
        "risk": risk,
        "input_schema": schema,
        "cost": {
            "latency_ms_p50": aggregate_percentile(aggregate, 50),
            "latency_ms_p95": aggregate_percentile(aggregate, 95),
            "error_rate": round(errors / total, 4) if total else 0.0,
        },
        "support": support,
        "confidence": {
            "requires": round(evidence * _margin(flowed, successes, requires), 3),
            "produces": round(evidence * _margin(brought, successes, produces), 3),
            "input_schema": round(evidence, 3),
            "risk": round(risk_confidence, 3),
            "cost": round(evidence, 3),
        },
        # Why each suggestion was made, for the reviewer: the risk's words, effects,
        # permissions and neighbours (learning.risk._evidence); and how many argument
        # names and output keys were left out for not being identifier-like.
        "evidence": {
            "risk": risk_evidence,
            # Preconditions its calls failed without: a feature of other tools' risk labels.
            "gated": gated,
            "unsafe_names": aggregate.get("unsafe_names", 0) + unsafe,
            # Which output path (or user message, or state) fed which argument, and which path
            # brought each effect: in how many calls, with example trace ids.
            "dataflow": {
                "requires": _routes(variables, requires, flows=True),
                "produces": _routes(variables, produces, flows=False, new_paths=new_paths),
            },
        },
    }


def _feeds(entry: VariableCounts, required: set[str]) -> bool:
    """Whether a variable's values flowed into a required argument (the top-level argument of
    a route's ``origin → argument path``)."""
    for route in entry.get("routes") or ():
        _, arrow, path = route.partition(ROUTE_ARROW)
        if arrow and ARGUMENT_END.split(path, maxsplit=1)[0] in required:
            return True
    return False


def _routes(
    variables: dict[str, VariableCounts],
    chosen: list[str],
    *,
    flows: bool,
    new_paths: Mapping[str, int] | None = None,
) -> dict[str, list[Route]]:
    """The routes behind each chosen variable, most seen first: ``origin → argument`` for a
    requirement, the output path for an effect, with the calls that brought new values at
    that path (``new_values``: what the effect was judged on across traces)."""
    found: dict[str, list[Route]] = {}
    for var in chosen:
        routes: list[Route] = []
        for route, counted in (variables.get(var, NO_VARIABLE).get("routes") or {}).items():
            if (ROUTE_ARROW in route) != flows:
                continue
            shown: Route = {
                "route": route,
                "traces": counted["count"],
                "examples": counted["examples"][:3],
            }
            if new_paths and route in new_paths:
                shown["new_values"] = new_paths[route]
            routes.append(shown)
        if routes:
            found[var] = sorted(routes, key=lambda item: (-item["traces"], item["route"]))
    return found


def _brought(entry: VariableCounts, new_paths: dict[str, int], thresholds: Thresholds) -> int:
    """The successful calls that brought a variable: those whose own trace showed it
    (``added_ok``) or, judged across traces, every call whose output brought a new value at an
    output path that brought the variable in at least ``min_count`` calls' traces. A trace
    shows an effect only when a later call of it uses the value; a path whose values are a
    variable's in some traces holds that variable's values in the others too (a search's
    results that no later call happened to take)."""
    brought = entry["added_ok"]
    for route, counted in (entry.get("routes") or {}).items():
        if ROUTE_ARROW not in route and counted["count"] >= thresholds.min_count:
            brought = max(brought, new_paths.get(route, 0))
    return brought


def _margin(counts: dict[str, int], successes: int, chosen: list[str]) -> float:
    """How clear-cut the choice was: 1 when every ratio is 0 or 1, lower near the thresholds."""
    if not successes or not counts:
        return 1.0
    worst = 1.0
    for count in counts.values():
        ratio = count / successes
        worst = min(worst, abs(ratio - 0.5) * 2)
    return max(worst, 0.5 if chosen else 0.0) if worst < 1 else 1.0


def _schema(
    aggregate: Aggregate, declared: dict[str, Any] | None, total: int
) -> tuple[dict[str, Any], int]:
    """The input schema the traces propose: the one proposal a drift ticket carries and the
    tool page shows. Without a declared schema (a shadow tool, a contract with none): each
    argument seen with its JSON types, required when always sent. With one: the declared schema
    as written (enum, pattern, description and every other keyword kept), a declared argument
    whose calls sent another type widened to the types seen, an argument it does not declare
    added with its types (optional: its callers never sent it), and a required argument that
    calls did not always send made optional. Only identifier-like argument names are inferred
    (a model reads them and a runtime chooses them); the others are counted, and returned
    beside the schema (an aggregate folded before names were checked may still hold some)."""
    declared_properties = (declared or {}).get("properties") or {}
    observed: dict[str, dict[str, Any]] = {}
    always: list[str] = []
    unsafe = 0
    for arg, entry in sorted(aggregate.get("args", {}).items()):
        if not inferable_name(arg):
            unsafe += 1
            continue
        kinds = sorted(entry["types"], key=lambda kind: (-entry["types"][kind], kind))
        # An integer is also a number: report "number" once both are seen.
        if "integer" in kinds and "number" in kinds:
            kinds.remove("integer")
        observed[arg] = {"type": kinds[0] if len(kinds) == 1 else kinds}
        if total and entry["count"] == total:
            always.append(arg)
    if not isinstance(declared_properties, dict) or not declared_properties:
        return {"type": "object", "properties": observed, "required": always}, unsafe
    schema = json.loads(json.dumps(declared))
    properties = schema["properties"]
    for arg, prop in observed.items():
        described = properties.get(arg)
        if arg not in properties:
            properties[arg] = prop
        if not isinstance(described, dict):
            continue
        widened = _widened(described.get("type"), prop["type"])
        if widened is not None:
            properties[arg] = {**described, "type": widened}
    if total:
        schema["required"] = [arg for arg in schema.get("required") or [] if arg in always]
    return schema, unsafe


def _widened(allowed: object, seen: str | list[str]) -> str | list[str] | None:
    """The declared type widened to the types seen, or None when they fit it already."""
    if isinstance(allowed, str):
        declared = [allowed]
    elif isinstance(allowed, list) and allowed:
        declared = [str(kind) for kind in allowed]
    else:
        return None
    fits = set(declared) | ({"integer"} if "number" in declared else set())
    extra = sorted(({seen} if isinstance(seen, str) else set(seen)) - fits)
    return [*declared, *extra] if extra else None


def _rank(ranks: dict[str, int], risk: str | None) -> int:
    """A missing or unknown risk ranks below every level."""
    return -1 if risk is None else ranks.get(risk, -1)


def contract_drift(
    *,
    approved: dict[str, Any],
    inferred: InferredDocument,
    risk_rank: dict[str, int] | None = None,
    baseline_risk: str | None = None,
) -> list[DriftItem]:
    """What the tool now does differently from its approved contract.

    ``baseline_risk`` is the suggestion for the approved contract itself: a risk suggested from
    the same words is no change in behaviour, so only a suggestion above both it and the
    approved label counts as drift. How well it does it (error rate, latency, outputs) is
    judged against baselines in ``learning/baselines.py``.
    """
    items: list[DriftItem] = []
    for key in CONTRACT_LISTS:
        before, after = set(approved.get(key) or []), set(inferred.get(key) or [])
        if before != after:
            items.append(
                {
                    "field": key,
                    "added": sorted(after - before),
                    "removed": sorted(before - after),
                    "detail": f"{key} was {sorted(before)}, traces show {sorted(after)}",
                }
            )
    items += _schema_drift(approved.get("input_schema") or {}, inferred.get("input_schema") or {})
    ranks = risk_rank or DEFAULT_RISK_RANK
    before_risk, after_risk = approved.get("risk"), inferred.get("risk")
    # A lower inferred risk is never drift: a person's label wins.
    floor = max(_rank(ranks, before_risk), _rank(ranks, baseline_risk))
    if _rank(ranks, after_risk) > floor:
        items.append(
            {
                "field": "risk",
                "added": [str(after_risk)],
                "removed": [before_risk] if before_risk is not None else [],
                "detail": f"behaviour suggests {after_risk} risk, approved {before_risk}",
            }
        )
    return items


def _schema_drift(approved: dict[str, Any], inferred: dict[str, Any]) -> list[DriftItem]:
    declared = approved.get("properties") or {}
    observed = inferred.get("properties") or {}
    closed = approved.get("additionalProperties") is False
    items: list[DriftItem] = []
    unknown = sorted(arg for arg in observed if arg not in declared)
    if unknown and (closed or declared):
        items.append(
            {
                "field": "input_schema",
                "added": unknown,
                "removed": [],
                "detail": "arguments sent that the approved schema does not declare: "
                + ", ".join(unknown),
            }
        )
    conflicts = []
    for arg, prop in sorted(observed.items()):
        allowed = (
            (declared.get(arg) or {}).get("type") if isinstance(declared.get(arg), dict) else None
        )
        if not allowed:
            continue
        allowed = {allowed} if isinstance(allowed, str) else set(allowed)
        if "number" in allowed:
            allowed.add("integer")
        seen = {prop["type"]} if isinstance(prop["type"], str) else set(prop["type"])
        if seen - allowed:
            conflicts.append(f"{arg}: {sorted(seen - allowed)} not in {sorted(allowed)}")
    if conflicts:
        items.append(
            {"field": "input_schema", "added": [], "removed": [],
             "detail": "type conflicts: " + "; ".join(conflicts)}
        )  # fmt: skip
    dropped = sorted(set(approved.get("required") or []) - set(inferred.get("required") or []))
    if dropped and observed:
        items.append(
            {
                "field": "input_schema",
                "added": [],
                "removed": dropped,
                "detail": "required arguments not always sent: " + ", ".join(dropped),
            }
        )
    return items


def drift_fingerprint(tool: str, items: list[DriftItem]) -> str:
    """Stable over reruns: what drifted, not how often it was seen."""
    essence = sorted(
        json.dumps([item["field"], sorted(item["added"]), sorted(item["removed"])])
        for item in items
    )
    return hashlib.sha256(json.dumps([tool, essence]).encode()).hexdigest()


def apply_drift(
    approved: dict[str, Any],
    inferred: InferredDocument,
    items: list[DriftItem],
    *,
    outputs: OutputCounts | None = None,
) -> dict[str, Any]:
    """The approved contract with each drifted field taken from the inferred one; an output
    drift proposes the output schema the ``outputs`` seen since the version match."""
    proposal = json.loads(json.dumps(approved))
    fields = {item["field"] for item in items}
    for key in ("requires", "produces", "risk"):
        if key in fields:
            proposal[key] = inferred[key]
    if "input_schema" in fields:
        # The inferred schema is already the proposal (``_schema``): the ticket proposes what
        # the tool page shows.
        proposal["input_schema"] = json.loads(json.dumps(inferred["input_schema"]))
    # Cost figures are measurements, not promises: whatever drifted, the proposal carries what
    # the traces measured beyond the noise of the approved figure (registry.cost), so the
    # review diff shows approved and observed latency and error rate side by side instead of
    # repeating figures the traces contradict.
    declared = proposal.get("cost") or {}
    observed = {
        key: value
        for key, value in (inferred.get("cost") or {}).items()
        if value is not None and cost_changed(key, declared.get(key), value)
    }
    if observed:
        proposal["cost"] = {**declared, **observed}
    if "output" in fields and outputs:
        proposal["output_schema"] = output_schema_proposal(proposal.get("output_schema"), outputs)
    return proposal
