"""Rule 4 of docs/learning.md (*Risk suggestions*): the server author's declared hints
(MCP annotations), as claims: they raise, and a contradiction is shown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._evidence import RiskEvidence
from ._lexicon import CHANGES, DANGER, INFORMS


def apply_hints(
    annotations: Mapping[str, Any] | None, floor: str, confidence: float, kind: str,
    evidence: list[RiskEvidence],
) -> tuple[str, float]:  # fmt: skip
    """Rule 4: the server author's declared hints, as evidence; contradictions are shown."""
    if not isinstance(annotations, dict):
        return floor, confidence
    read_only = annotations.get("readOnlyHint")
    destructive = annotations.get("destructiveHint")
    for hint, value in (("readOnlyHint", read_only), ("destructiveHint", destructive)):
        if isinstance(value, bool):
            evidence.append({"kind": "hint", "hint": hint, "value": value})
    words_say = floor
    if read_only is True:
        if kind in (CHANGES, DANGER) or floor == "high":
            evidence.append(
                {"kind": "contradiction", "hint": "readOnlyHint",
                 "detail": f"declared read-only, but the words say {words_say}: the words stand"}
            )  # fmt: skip
            return floor, 0.5
        if floor != "low":
            evidence.append(
                {"kind": "rule", "floor": "low",
                 "detail": "declared read-only, and no word says otherwise: low"}
            )  # fmt: skip
        return "low", max(confidence, 0.8)
    if destructive is True and read_only is not True:
        if floor != "high":
            evidence.append(
                {"kind": "rule", "floor": "high", "detail": "declared destructive: high"}
            )  # fmt: skip
        return "high", max(confidence, 0.8)
    if read_only is False:
        if kind == INFORMS:
            evidence.append(
                {"kind": "contradiction", "hint": "readOnlyHint",
                 "detail": "declared not read-only, but the words say it reads: medium"}
            )  # fmt: skip
        if floor == "low":
            evidence.append(
                {"kind": "rule", "floor": "medium", "detail": "declared not read-only: medium"}
            )  # fmt: skip
            return "medium", 0.6
    if destructive is False and floor == "high" and words_say == "high":
        evidence.append(
            {"kind": "contradiction", "hint": "destructiveHint",
             "detail": "declared not destructive, but the words say high: the words stand"}
        )  # fmt: skip
    return floor, confidence
