"""What a drift item rests on, read from the aggregate it was judged on (pure: no Django).

A drift item says what changed ("requires now has approval_code"); a reviewer also needs in how
many of how many traces that was seen, and a few traces to open. Both come from the aggregate
the drift was judged on (``aggregate_since_version``): per variable, how often it was present
before a success or added by one, with a few example trace ids; per argument, how often it was
sent. Nothing here reads a trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from registry.cost import cost_figures_changed

from .shapes import NO_ARG, NO_VARIABLE, Aggregate, DriftItem, VariableCounts

MAX_ITEM_EXAMPLES = 5


def drift_item_support(item: DriftItem, aggregate: Aggregate) -> DriftItem:
    """``item`` with ``counts`` (name → traces showing it), ``total`` and ``total_of`` (what the
    counts are out of), and ``example_trace_ids`` where the aggregate has them.

    The added keys are counts, never part of the drift's fingerprint.
    """
    field = item["field"]
    names = [*item.get("added", []), *item.get("removed", [])]
    variables = aggregate.get("variables") or {}
    args = aggregate.get("args") or {}
    successes = int(aggregate.get("successes") or 0)
    total = int(aggregate.get("total") or 0)
    supported = item.copy()
    if field in ("requires", "produces"):
        key: Literal["before_ok", "added_ok"] = "before_ok" if field == "requires" else "added_ok"
        supported["counts"] = {
            name: int((variables.get(name) or NO_VARIABLE).get(key, 0)) for name in names
        }
        supported["total"], supported["total_of"] = successes, "successful calls"
        supported["example_trace_ids"] = _examples(variables, names)
    elif field == "input_schema":
        supported["counts"] = {
            name: int((args.get(name) or NO_ARG).get("count", 0)) for name in names
        }
        supported["total"], supported["total_of"] = total, "calls"
        # Arguments keep no examples; a variable of the same name that flowed into it does.
        supported["example_trace_ids"] = _examples(variables, names)
    elif field == "error_rate":
        supported["counts"] = {"errors": int(aggregate.get("errors") or 0)}
        supported["total"], supported["total_of"] = total, "calls"
    if not supported.get("example_trace_ids"):
        supported.pop("example_trace_ids", None)
    return supported


def _examples(variables: dict[str, VariableCounts], names: list[str]) -> list[str]:
    found: list[str] = []
    for name in names:
        for trace_id in (variables.get(name) or NO_VARIABLE).get("examples", []):
            if trace_id not in found and len(found) < MAX_ITEM_EXAMPLES:
                found.append(str(trace_id))
    return found


def contract_differences(
    approved: Mapping[str, Any] | None, inferred: Mapping[str, Any]
) -> list[str]:
    """The fields in which an inferred contract differs from the approved one, in contract
    order: ``requires``, ``produces``, ``risk``, ``input_schema`` (argument names and which are
    required), and ``cost`` when a figure moved beyond its noise (``registry.cost``). A tool
    with no approved contract differs in everything it has."""
    if approved is None:
        return [key for key in ("input_schema", "requires", "produces", "risk") if key in inferred]
    fields = []
    approved_schema = approved.get("input_schema") or {}
    inferred_schema = inferred.get("input_schema") or {}
    if set(approved_schema.get("properties") or {}) != set(
        inferred_schema.get("properties") or {}
    ) or set(approved_schema.get("required") or []) != set(inferred_schema.get("required") or []):
        fields.append("input_schema")
    for key in ("requires", "produces"):
        if set(approved.get(key) or []) != set(inferred.get(key) or []):
            fields.append(key)
    if inferred.get("risk") and approved.get("risk") != inferred.get("risk"):
        fields.append("risk")
    if cost_figures_changed(approved.get("cost") or {}, inferred.get("cost") or {}):
        fields.append("cost")
    return fields
