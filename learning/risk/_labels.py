"""Rule 5 of docs/learning.md (*Risk suggestions*): what reviewers' labels say.

The labelled tools are read once (``prepare_labels``); the closest tools with the same action
word vote, and a naive Bayes model over the readings' features may raise a suggestion.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, cast

from registry.risk_order import RISK_ORDER

from ._evidence import Neighbour, RiskEvidence
from ._lexicon import Lexicon, lexicon
from ._names import arguments_of
from ._reading import read_tool

NEIGHBOURS = 3


class PreparedLabel(TypedDict):
    """A labelled tool as the suggester reads it (``prepare_labels``)."""

    name: str
    risk: str
    tokens: set[str]  # its words, for likeness
    verb: str | None  # its action word
    kind: str  # how the action word reads: INFORMS, CHANGES, DANGER…
    features: frozenset[str]  # of the labels model
    produces: list[str]
    requires: list[str]
    gated: list[str]  # state variables its calls failed without


class LabelsModel(TypedDict):
    counts: dict[str, int]  # tools per level
    features: dict[str, dict[str, int]]  # per level: tools with each feature
    seen: set[str]  # features some labelled tool has
    size: int  # labelled tools


def prepare_labels(
    labelled: Iterable[Mapping[str, Any]], lex: Lexicon | None = None
) -> list[PreparedLabel]:
    """Read the labelled tools once, for many suggestions (a refresh of a whole registry)."""
    lex = lex or lexicon()
    prepared: list[PreparedLabel] = []
    fresh: list[PreparedLabel] = []
    for tool in labelled:
        if tool.get("risk") not in RISK_ORDER:
            continue
        if "features" in tool and "tokens" in tool:  # prepared already
            prepared.append(cast(PreparedLabel, tool))
            continue
        name = tool.get("name", "")
        reading = read_tool(
            name=name, description=tool.get("description", ""),
            produces=tool.get("produces") or [], permissions=tool.get("permissions") or [],
            annotations=tool.get("annotations"), arguments=arguments_of(tool), lex=lex,
        )  # fmt: skip
        entry: PreparedLabel = {
            "name": name, "risk": tool["risk"], "tokens": reading.tokens,
            "verb": reading.action.word, "kind": reading.kind, "features": reading.features,
            "produces": list(tool.get("produces") or []),
            "requires": list(tool.get("requires") or []), "gated": list(tool.get("gated") or []),
        }  # fmt: skip
        prepared.append(entry)
        fresh.append(entry)
    # What the traces and the other contracts say of each tool read here (rule 5): outputs
    # other tools need, and preconditions calls failed without.
    required_by = requirers(prepared) if fresh else {}
    for tool in fresh:
        tool["features"] = tool["features"] | observed_features(
            tool["name"], tool["produces"], tool["gated"], required_by, []
        )
    return prepared


def requirers(tools: Iterable[PreparedLabel]) -> dict[str, set[str]]:
    """Which tools require each state variable."""
    found: dict[str, set[str]] = defaultdict(set)
    for tool in tools:
        for variable in tool.get("requires") or []:
            found[variable].add(tool["name"])
    return found


def observed_features(
    name: str, produces: Iterable[str], gated: Iterable[str],
    required_by: dict[str, set[str]], evidence: list[RiskEvidence],
) -> frozenset[str]:  # fmt: skip
    """The labels model's features from behaviour: ``consumed`` when another tool requires
    what this one produces; ``gated`` when its calls failed without a state variable."""
    found = set()
    consumers = sorted(
        {other for variable in produces for other in required_by.get(variable, ())} - {name}
    )
    if consumers:
        found.add("o:consumed")
        evidence.append(
            {"kind": "observed", "signal": "consumed",
             "detail": f"its outputs are required by {len(consumers)} other tool(s): "
                       f"{', '.join(consumers[:3])}"}
        )  # fmt: skip
    gated = sorted(gated)
    if gated:
        found.add("o:gated")
        evidence.append(
            {"kind": "observed", "signal": "gated",
             "detail": f"calls failed without {', '.join(gated[:3])}: a precondition guards it"}
        )  # fmt: skip
    return frozenset(found)


# The labels model (rule 5): naive Bayes over the readings' features, trained on the labels
# of the same namespace (or, with fewer than MODEL_MIN_LABELS there, of every labelled tool).
MODEL_MIN_LABELS = 4
MODEL_MIN_LEVEL = 2
MODEL_RAISE = 0.6
MODEL_MARGIN = 0.1
SMOOTHING = 1.0


def labels_model(tools: list[PreparedLabel]) -> LabelsModel:
    """Per level: how many tools, and how many have each feature."""
    counts: dict[str, int] = dict.fromkeys(RISK_ORDER, 0)
    features: dict[str, dict[str, int]] = {risk: defaultdict(int) for risk in RISK_ORDER}
    for tool in tools:
        counts[tool["risk"]] += 1
        for feature in tool["features"]:
            features[tool["risk"]][feature] += 1
    seen = {feature for table in features.values() for feature in table}
    return {"counts": counts, "features": features, "seen": seen, "size": len(tools)}


def model_probabilities(model: LabelsModel, features: Iterable[str]) -> dict[str, float]:
    """P(level | features): naive Bayes over the features the tool has that some labelled
    tool has too (Laplace-smoothed); a level with no label has no probability."""
    present = set(features) & model["seen"]
    scores = {}
    for risk in RISK_ORDER:
        count = model["counts"][risk]
        if not count:
            continue
        score = math.log((count + SMOOTHING) / (model["size"] + SMOOTHING * len(RISK_ORDER)))
        table = model["features"][risk]
        for feature in present:
            score += math.log((table.get(feature, 0) + SMOOTHING) / (count + 2 * SMOOTHING))
        scores[risk] = score
    if not scores:
        return dict.fromkeys(RISK_ORDER, 0.0)
    top = max(scores.values())
    exps = {risk: math.exp(score - top) for risk, score in scores.items()}
    total = sum(exps.values())
    return {risk: exps.get(risk, 0.0) / total for risk in RISK_ORDER}


def mostly_low(tools: list[PreparedLabel]) -> bool:
    """More than half rated low (a tie goes up)."""
    return sum(tool["risk"] == "low" for tool in tools) * 2 > len(tools)


def neighbours_vote(
    own: set[str], pool: list[PreparedLabel], *, same_kind: bool
) -> tuple[str, float, list[Neighbour]]:
    """The closest few vote by likeness; ties go to the higher level."""
    scored = [
        pair
        for pair in sorted(
            ((_similarity(own, tool["tokens"]), tool) for tool in pool),
            key=lambda pair: (-pair[0], pair[1]["name"]),
        )[:NEIGHBOURS]
        if pair[0] > 0 or same_kind
    ]
    votes: defaultdict[str, float] = defaultdict(float)
    for similarity, tool in scored:
        # Tools of the same kind count even when no word is shared.
        votes[tool["risk"]] += similarity or (0.01 if same_kind else 0.0)
    total = sum(votes.values())
    neighbours: list[Neighbour] = [
        {"name": tool["name"], "risk": tool["risk"], "similarity": round(similarity, 3)}
        for similarity, tool in scored
    ]
    if not total:
        # No tool shares a word: the pool's usual label, how reviewers rate its kind.
        counts: defaultdict[str, float] = defaultdict(float)
        for tool in pool:
            counts[tool["risk"]] += 1
        best = max(RISK_ORDER, key=lambda risk: (counts[risk], RISK_ORDER.index(risk)))
        return best, counts[best] / len(pool) / 2, []
    best = max(RISK_ORDER, key=lambda risk: (votes[risk], RISK_ORDER.index(risk)))
    return best, votes[best] / total, neighbours


def _similarity(own: set[str], other: set[str]) -> float:
    return len(own & other) / len(own | other) if own | other else 0.0
