"""When two figures of a contract's ``cost`` differ (pure: no Django).

Cost figures are measurements: p50/p95 latency read from a histogram whose buckets are 15 %
wide (a percentile within 7.5 %, so two readings of one latency within 15 % of each other), an
error rate from a sample. Two readings within the noise of their measurement are the same
figure, not a change a reviewer must look at. This is the one definition: the tool page's
comparison (``learning.evidence.contract_differences``), the proposal drift makes
(``learning.inference.apply_drift``), the review diff (``reviews.diff``) and the ticket's
figures (``reviews.evidence``) all ask ``cost_changed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """A difference is noise when within ``relative`` of the earlier figure or ``absolute``,
    whichever is larger."""

    relative: float
    absolute: float


COST_TOLERANCE: dict[str, Tolerance] = {
    "latency_ms_p50": Tolerance(relative=0.15, absolute=1.0),
    "latency_ms_p95": Tolerance(relative=0.15, absolute=1.0),
    # Five points, the least rise the error-rate drift rule counts (learning.baselines).
    "error_rate": Tolerance(relative=0.0, absolute=0.05),
}
EXACT = Tolerance(relative=0.0, absolute=0.0)


def cost_changed(key: str, before: Any, after: Any) -> bool:
    """True when ``after`` differs from ``before`` by more than the noise of figure ``key``.
    A figure appearing or disappearing is a change; a non-number is compared as is."""
    if not (_is_number(before) and _is_number(after)):
        return bool(before != after)
    tolerance = COST_TOLERANCE.get(key, EXACT)
    return abs(after - before) > max(tolerance.relative * abs(before), tolerance.absolute)


def cost_figures_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The figures measured on both sides that moved beyond their noise, in ``after``'s order."""
    return [
        key
        for key, value in after.items()
        if _is_number(value)
        and _is_number(before.get(key))
        and cost_changed(key, before[key], value)
    ]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
