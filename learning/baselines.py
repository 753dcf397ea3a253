"""Behaviour against a fair baseline: error rate, p95 latency, output contracts (pure: no Django).

Drift in what a tool *does* (requires, produces, arguments, risk) is judged by
``learning.inference.contract_drift``; this module judges how *well* it does it, over the
traces since the approved version (``since``, an aggregate). Each rule, its baseline and its
threshold (the constants below) are described once, in docs/learning.md. Every item carries its
baseline, the observed figure, the counts and example trace ids, and ``report_only`` when it
must never open a ticket.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

from .aggregates import aggregate_percentile
from .shapes import Aggregate, Baseline, DriftItem

CONFIDENCE = 0.99
Z = NormalDist().inv_cdf(CONFIDENCE)  # one-sided: 2.326
MIN_EXCESS = 0.05
LATENCY_GROWTH = 1.5
OUTPUT_VIOLATION_SHARE = 0.10


def wilson_bounds(hits: int, total: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of ``hits / total``; each bound is one-sided at ``z``."""
    if total <= 0:
        return 0.0, 1.0
    rate = hits / total
    denominator = 1 + z * z / total
    centre = (rate + z * z / (2 * total)) / denominator
    margin = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - margin), min(1.0, centre + margin)


def baseline_snapshot(aggregate: Aggregate, *, version: int | None) -> Baseline:
    """What the traces before a version's publication showed: counts and durations only."""
    return {
        "version": version,
        "total": aggregate.get("total", 0),
        "errors": aggregate.get("errors", 0),
        "durations": dict(aggregate.get("durations") or {}),
    }


def behaviour_drift(
    *,
    approved: dict[str, Any],
    since: Aggregate,
    min_support: int,
    latency_is_drift: bool = False,
) -> list[DriftItem]:
    """Error-rate, latency and output items for a tool's traces since its approved version."""
    cost = approved.get("cost") or {}
    baseline: Mapping[str, Any] = since.get("baseline") or {}
    items = [
        error_rate_drift(
            declared=cost.get("error_rate"),
            baseline=baseline,
            since=since,
            min_support=min_support,
        ),
        latency_drift(
            declared_p95=cost.get("latency_ms_p95"),
            baseline=baseline,
            since=since,
            min_support=min_support,
            is_drift=latency_is_drift,
        ),
        output_drift(since=since, min_support=min_support),
    ]
    return [item for item in items if item is not None]


def error_rate_drift(
    *,
    declared: float | None,
    baseline: Mapping[str, Any],
    since: Aggregate,
    min_support: int,
) -> DriftItem | None:
    total, errors = since.get("total", 0), since.get("errors", 0)
    if total < max(min_support, 1):
        return None
    rate = errors / total
    lower, _ = wilson_bounds(errors, total)
    observed = {"rate": round(rate, 4), "lower_bound": round(lower, 4)}
    counts = {"total": total, "errors": errors}
    examples = list(since.get("error_examples") or [])
    if declared is not None:
        reference = {"source": "declared", "rate": float(declared)}
        limit = float(declared)
    elif baseline.get("total", 0) >= max(min_support, 1):
        before, before_errors = baseline["total"], baseline.get("errors", 0)
        _, upper = wilson_bounds(before_errors, before)
        reference = {
            "source": f"observed before v{baseline.get('version')} was published",
            "rate": round(before_errors / before, 4),
            "upper_bound": round(upper, 4),
            "total": before,
            "errors": before_errors,
        }
        limit = upper
    else:
        if lower <= MIN_EXCESS:
            return None
        return _item(
            "error_rate",
            f"error rate {rate:.2f} ({errors} of {total} calls) with no baseline to judge it "
            "against: the contract declares no error_rate and too few traces preceded it",
            baseline=None, observed=observed, counts=counts, examples=examples, report_only=True,
        )  # fmt: skip
    if lower <= limit + MIN_EXCESS:
        return None
    return _item(
        "error_rate",
        f"error rate {rate:.2f} ({errors} of {total} calls), baseline {reference['rate']:.2f} "
        f"({reference['source']}); at {CONFIDENCE:.0%} it is at least {lower:.2f}",
        baseline=reference, observed=observed, counts=counts, examples=examples,
        report_only=False,
    )  # fmt: skip


def latency_drift(
    *,
    declared_p95: float | None,
    baseline: Mapping[str, Any],
    since: Aggregate,
    min_support: int,
    is_drift: bool,
) -> DriftItem | None:
    timed = sum((since.get("durations") or {}).values())
    if timed < max(min_support, 1):
        return None
    p95 = aggregate_percentile(since, 95)
    before_timed = sum((baseline.get("durations") or {}).values())
    reference: dict[str, Any]
    if declared_p95:
        expected = float(declared_p95)
        reference = {"source": "declared", "latency_ms_p95": expected}
    elif before_timed >= max(min_support, 1):
        expected = aggregate_percentile(baseline, 95) or 0.0
        reference = {
            "source": f"observed before v{baseline.get('version')} was published",
            "latency_ms_p95": expected,
            "total": before_timed,
        }
    else:
        return None
    if p95 is None or p95 <= expected * LATENCY_GROWTH:
        return None
    return _item(
        "latency_ms_p95",
        f"p95 latency {p95:.0f} ms over {timed} calls, baseline {reference['latency_ms_p95']:.0f}"
        f" ms ({reference['source']}): more than {LATENCY_GROWTH}x",
        baseline=reference, observed={"latency_ms_p95": p95}, counts={"total": timed},
        examples=[trace_id for _, trace_id in since.get("slowest") or []],
        report_only=not is_drift,
    )  # fmt: skip


def output_drift(*, since: Aggregate, min_support: int) -> DriftItem | None:
    outputs = since.get("outputs") or {}
    checked, failed = outputs.get("checked", 0), outputs.get("failed", 0)
    if not failed:
        return None
    share = failed / checked
    significant = checked >= max(min_support, 1) and share > OUTPUT_VIOLATION_SHARE
    paths = dict(sorted((outputs.get("paths") or {}).items(), key=lambda pair: -pair[1]))
    missing = dict(sorted((outputs.get("missing") or {}).items()))
    where = [f"{path}: {count}" for path, count in paths.items()][:5]
    where += [f"produced variable {name} missing: {count}" for name, count in missing.items()]
    headline = "output no longer matches its contract" if significant else "output violations"
    return _item(
        "output",
        f"{headline}: {failed} of {checked} successful calls ({share:.0%}; drift above "
        f"{OUTPUT_VIOLATION_SHARE:.0%}); " + "; ".join(where),
        baseline={"share": OUTPUT_VIOLATION_SHARE, "min_support": min_support},
        observed={"share": round(share, 4), "paths": paths, "missing": missing},
        counts={"checked": checked, "failed": failed, "unchecked": outputs.get("unchecked", 0)},
        examples=list(outputs.get("examples") or []),
        report_only=not significant,
    )  # fmt: skip


def _item(
    field: str,
    detail: str,
    *,
    baseline: dict[str, Any] | None,
    observed: dict[str, Any],
    counts: dict[str, int],
    examples: list[Any],
    report_only: bool,
) -> DriftItem:
    return {
        "field": field,
        "added": [],
        "removed": [],
        "detail": detail,
        "baseline": baseline,
        "observed": observed,
        "counts": counts,
        "examples": examples,
        "report_only": report_only,
    }
