"""A ticket's evidence as a reviewer reads it: what changed, in how many of how many traces,
baseline against now, and which runs to open (pure: no Django).

Evidence is JSON written by the learning loop, and other writers add keys over time. Keys read
here are turned into sentences and figures; any other key is still shown, by name, so nothing a
writer adds is hidden from the reviewer (the raw JSON stays on the page, folded).

What writers write is typed (``reviews.shapes.TicketEvidence``), but this reads stored rows,
some written before a key or its shape existed: every value read is still checked here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from registry.cost import cost_changed

# Keys of a drift item that the summary turns into words; everything else is listed as is.
ITEM_KEYS = frozenset(
    {
        "field", "added", "removed", "detail", "counts", "total", "total_of",
        "example_trace_ids", "example_runs", "baseline", "observed",
    }
)  # fmt: skip
# Top-level keys the summary reads; the rest are listed as is.
TOP_KEYS = frozenset(
    {
        "base_version", "traces_since_version", "support", "applications", "drift",
        "inferred", "unknown_variables", "calls_seen", "dataflow",
    }
)  # fmt: skip
COST_FIGURES = (
    ("error_rate", "error rate", "rate"),
    ("latency_ms_p50", "latency p50", "ms"),
    ("latency_ms_p95", "latency p95", "ms"),
)
MAX_TEXT = 300
MAX_EXAMPLES = 5


def evidence_summary(
    evidence: Mapping[str, Any], *, base_cost: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``{"items", "first_seen", "last_seen", "traces", "support", "applications", "figures",
    "unknown_variables", "other"}``: each drift item with a headline, its counts, baseline and
    observed figures, example runs and any keys not understood; when the calls behind it were
    first and last seen; the cost figures approved against observed."""
    items = [_item(item) for item in evidence.get("drift") or [] if isinstance(item, Mapping)]
    applications = evidence.get("applications") or {}
    inferred = _mapping(evidence.get("inferred"))
    observed_cost = _mapping(inferred.get("cost"))
    calls_seen = _mapping(evidence.get("calls_seen"))
    return {
        "items": items,
        "first_seen": _moment(calls_seen.get("first")),
        "last_seen": _moment(calls_seen.get("last")),
        "traces": _number(evidence.get("traces_since_version")),
        "support": _number(evidence.get("support")),
        "base_version": evidence.get("base_version"),
        "applications": (
            sorted(applications.items(), key=lambda pair: (-_count(pair[1]), str(pair[0])))
            if isinstance(applications, Mapping)
            else []
        ),
        "figures": _figures(base_cost or {}, observed_cost),
        "unknown_variables": _unknown(evidence.get("unknown_variables")),
        "dataflow": _dataflow(evidence.get("dataflow")),
        "other": [
            (str(key), _text(value)) for key, value in evidence.items() if key not in TOP_KEYS
        ],
    }


def _item(item: Mapping[str, Any]) -> dict[str, Any]:
    field = str(item.get("field", "?"))
    added = [str(name) for name in item.get("added") or []]
    removed = [str(name) for name in item.get("removed") or []]
    counts = _mapping(item.get("counts"))
    total = _number(item.get("total"))
    total_of = str(item.get("total_of") or "traces")
    return {
        "field": field,
        "headline": _headline(field, added, removed, item),
        "detail": _text(item.get("detail", "")),
        "counts": [
            {
                "name": str(name),
                "count": _count(count),
                "total": total,
                "share": _share(_count(count), total),
            }
            for name, count in counts.items()
        ],
        "total": total,
        "total_of": total_of,
        "baseline": _figure_text(item.get("baseline"), field),
        "observed": _figure_text(item.get("observed"), field),
        "examples": _examples(item),
        "extra": [(str(key), _text(value)) for key, value in item.items() if key not in ITEM_KEYS],
    }


def _headline(field: str, added: list[str], removed: list[str], item: Mapping[str, Any]) -> str:
    parts: list[str] = []
    if field == "requires":
        if added:
            parts.append(f"now needs {_names(added)} in the state before it runs")
        if removed:
            parts.append(f"no longer needs {_names(removed)}")
    elif field == "produces":
        if added:
            parts.append(f"now adds {_names(added)} to the state")
        if removed:
            parts.append(f"no longer adds {_names(removed)}")
    elif field == "input_schema":
        if added:
            parts.append(f"is sent arguments its schema does not declare: {_names(added)}")
        if removed:
            parts.append(f"is no longer sent {_names(removed)}")
    elif field == "error_rate":
        parts.append("fails more often than its contract says")
    elif field == "risk":
        parts.append(
            f"behaves like a {_names(added) or '?'}-risk tool "
            f"(approved as {_names(removed) or '?'})"
        )
    if not parts:
        detail = item.get("detail")
        return f"{field}: {_text(detail)}" if detail else f"{field} changed"
    return "; ".join(parts).capitalize()


def _examples(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Runs to open: ``example_runs`` (trace id and application) when the writer resolved
    them, else bare ``example_trace_ids`` (any application)."""
    runs = item.get("example_runs")
    if isinstance(runs, list) and runs:
        return [
            {"trace_id": str(run.get("trace_id")), "application_id": run.get("application_id"),
             "resolved": True}
            for run in runs[:MAX_EXAMPLES]
            if isinstance(run, Mapping) and run.get("trace_id") is not None
        ]  # fmt: skip
    ids = item.get("example_trace_ids")
    if isinstance(ids, list):
        return [
            {"trace_id": str(trace_id), "application_id": None, "resolved": False}
            for trace_id in ids[:MAX_EXAMPLES]
            if isinstance(trace_id, str | int)
        ]
    return []


def _dataflow(dataflow: Any) -> list[dict[str, Any]]:
    """Each requirement's and effect's routes: which output path (or user message, or state)
    fed which argument, or which output path brought the values; in how many calls, with runs
    to open (``learning.inference``'s ``evidence.dataflow``)."""
    rows: list[dict[str, Any]] = []
    for field in ("requires", "produces"):
        by_variable = _mapping(_mapping(dataflow).get(field))
        for variable, routes in sorted(by_variable.items()):
            for route in routes if isinstance(routes, list) else []:
                if not isinstance(route, Mapping):
                    continue
                rows.append(
                    {
                        "field": field,
                        "variable": _text(variable),
                        "route": _text(route.get("route")),
                        "traces": _count(route.get("traces")),
                        "new_values": _count(route.get("new_values")),
                        "examples": _examples({"example_trace_ids": route.get("examples")}),
                    }
                )
    return rows


def _figures(base: Mapping[str, Any], observed: Mapping[str, Any]) -> list[dict[str, Any]]:
    figures = []
    for key, label, unit in COST_FIGURES:
        before, now = _number(base.get(key)), _number(observed.get(key))
        if before is None and now is None:
            continue
        figures.append(
            {
                "key": key,
                "label": label,
                "baseline": _format(before, unit),
                "now": _format(now, unit),
                # Higher is worse for every figure here: errors and latency; a difference
                # within the measurement's noise is no change (registry.cost).
                "worse": before is not None
                and now is not None
                and now > before
                and cost_changed(key, before, now),
            }
        )
    return figures


def _unknown(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, Mapping):
        return []
    return [
        (str(key), _names([str(name) for name in names]))
        for key, names in value.items()
        if isinstance(names, list)
    ]


def _figure_text(value: Any, field: str) -> str:
    if value is None:
        return ""
    number = _number(value)
    if number is not None:
        return _format(number, "rate" if "rate" in field else "")
    return _text(value)


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "rate":
        return f"{value * 100:.1f} %"
    if unit == "ms":
        return f"{value:,.0f} ms"
    return f"{value:,.4g}"


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _share(count: int, total: float | None) -> str:
    if not total:
        return ""
    return f"{count / total * 100:.0f} %"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _names(names: list[str]) -> str:
    return ", ".join(names)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
