"""Rule 5 of docs/learning.md (*Risk suggestions*): what reviewers' labels say.

The labelled tools are read once (``prepare_labels``) and indexed once (``LabelIndex``: by
name, namespace and action word, with the labels model of each namespace), so a suggestion
reads only the tools it compares with; the closest tools with the same action word vote, and a
naive Bayes model over the readings' features may raise a suggestion.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress, islice
from typing import Any, TypedDict, cast

from registry.risk_order import RISK_ORDER

from ._evidence import Neighbour, RiskEvidence
from ._lexicon import Lexicon, lexicon
from ._names import arguments_of, namespace
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
        entry = label_read(tool, lex)
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


def label_read(tool: Mapping[str, Any], lex: Lexicon) -> PreparedLabel:
    """One labelled tool's reading, without what the other tools say of it (``prepare_labels``
    and ``LabelIndex.update`` add that). It depends on the tool's contract and the lexicon
    only, so a caller may keep it for as long as both stay the same."""
    name = tool.get("name", "")
    reading = read_tool(
        name=name, description=tool.get("description", ""),
        produces=tool.get("produces") or [], permissions=tool.get("permissions") or [],
        annotations=tool.get("annotations"), arguments=arguments_of(tool), lex=lex,
    )  # fmt: skip
    return {
        "name": name, "risk": tool["risk"], "tokens": reading.tokens,
        "verb": reading.action.word, "kind": reading.kind, "features": reading.features,
        "produces": list(tool.get("produces") or []),
        "requires": list(tool.get("requires") or []), "gated": list(tool.get("gated") or []),
    }  # fmt: skip


@dataclass
class LabelGroup:
    """Labelled tools a suggestion compares with (all of them, or one namespace's), indexed,
    with the labels model trained on them kept up to date as tools come and go."""

    tools: dict[int, PreparedLabel] = field(default_factory=dict)  # by id(): order is moot
    by_verb: dict[str, dict[int, PreparedLabel]] = field(default_factory=dict)
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, risk) -> tools
    model: LabelsModel = field(default_factory=lambda: labels_model([]))
    _feature_totals: Counter[str] = field(default_factory=Counter)
    _pools: dict[str, VerbPool] = field(default_factory=dict)  # by_verb's, read for voting

    def add(self, tool: PreparedLabel) -> None:
        self.tools[id(tool)] = tool
        if tool["verb"]:
            self.by_verb.setdefault(tool["verb"], {})[id(tool)] = tool
            self._pools.pop(tool["verb"], None)
        self.kinds[(tool["kind"], tool["risk"])] += 1
        self._train(tool, 1)

    def remove(self, tool: PreparedLabel) -> None:
        del self.tools[id(tool)]
        if tool["verb"]:
            del self.by_verb[tool["verb"]][id(tool)]
            self._pools.pop(tool["verb"], None)
        self.kinds[(tool["kind"], tool["risk"])] -= 1
        self._train(tool, -1)

    def _train(self, tool: PreparedLabel, step: int) -> None:
        model = self.model
        model["counts"][tool["risk"]] += step
        model["size"] += step
        table = model["features"][tool["risk"]]
        for feature in tool["features"]:
            table[feature] = table.get(feature, 0) + step
            self._feature_totals[feature] += step
            if self._feature_totals[feature] > 0:
                model["seen"].add(feature)
            else:
                model["seen"].discard(feature)

    def same_verb(self, verb: str | None) -> list[PreparedLabel]:
        return list(self.by_verb.get(verb, {}).values()) if verb else []

    def verb_pool(self, verb: str | None) -> VerbPool:
        """``same_verb(verb)`` read once for every suggestion until a tool of the verb comes
        or goes."""
        if not verb:
            return VerbPool([])
        pool = self._pools.get(verb)
        if pool is None:
            pool = self._pools[verb] = VerbPool(self.same_verb(verb))
        return pool


class VerbPool:
    """The labelled tools of one action word, read for many suggestions: sorted by name once
    (equal names in the order given), so the closest few are found without sorting the pool
    for each suggestion; grouped by their set of words, so the likeness of tools with the same
    words is worked out once; and the count of each level. What ``neighbours_vote`` and
    ``mostly_low`` say of the pool without the tools of one name, the same to the last digit
    (learning/tests/risk/test_risk_pool.py compares them)."""

    def __init__(self, tools: Iterable[PreparedLabel]) -> None:
        self.tools = sorted(tools, key=lambda tool: tool["name"])
        holders: dict[frozenset[str], list[int]] = {}
        for position, tool in enumerate(self.tools):
            holders.setdefault(frozenset(tool["tokens"]), []).append(position)
        self.words = list(holders)  # each set of words once
        self.sizes = [len(words) for words in self.words]
        self.holders = list(holders.values())  # the positions of the tools with each, in order
        self.words_of = [0] * len(self.tools)  # each tool's set of words, by its index
        for index, positions in enumerate(self.holders):
            for position in positions:
                self.words_of[position] = index
        self.at: dict[str, list[int]] = defaultdict(list)  # positions of each name
        for position, tool in enumerate(self.tools):
            self.at[tool["name"]].append(position)
        self.risks = Counter(tool["risk"] for tool in self.tools)

    def risks_without(self, name: str) -> Counter[str]:
        """How many tools of each level, the tools named ``name`` left out."""
        risks = self.risks.copy()
        risks.subtract(self.tools[position]["risk"] for position in self.at.get(name, ()))
        return risks

    def size_without(self, name: str) -> int:
        return len(self.tools) - len(self.at.get(name, ()))

    def vote_without(
        self, own: set[str], name: str, *, same_kind: bool
    ) -> tuple[str, float, list[Neighbour]]:
        """``neighbours_vote(own, pool, same_kind=...)`` of the pool without the tools named
        ``name``."""
        # Likeness as _similarity computes it (the union's size from the same integers), the
        # sets intersected by the interpreter's own loops, once for each set of words.
        together = map(len, map(own.intersection, self.words))
        mine = len(own)
        likeness = [
            shared / union if (union := size + mine - shared) else 0.0
            for shared, size in zip(together, self.sizes, strict=True)
        ]
        left_out = self.at.get(name, ())
        # The closest first, equal likeness in name order: sorted(...)[:NEIGHBOURS] of
        # neighbours_vote, reading only as far as the few it keeps. A left-out tool takes no
        # place, so at most that many more likeness values are read.
        chosen: list[int] = []
        for value in heapq.nlargest(NEIGHBOURS + len(left_out), set(likeness)):
            sets = compress(range(len(likeness)), map(value.__eq__, likeness))
            found = heapq.merge(*(self.holders[index] for index in sets))
            others = (position for position in found if position not in left_out)
            chosen += islice(others, NEIGHBOURS - len(chosen))
            if len(chosen) == NEIGHBOURS:
                break
        scored = [
            (likeness[self.words_of[position]], self.tools[position])
            for position in chosen
            if likeness[self.words_of[position]] > 0 or same_kind
        ]
        return _vote(scored, lambda: self.risks_without(name), same_kind=same_kind)


class LabelIndex:
    """The prepared labels, indexed once for many suggestions: which tools require each
    variable, and per group (every tool, each namespace) the tools by action word, the labels
    model and the count of each kind at each level. A suggestion for a tool leaves the tool's
    own label out (``labels_model_without``) at the cost of its own entries, so it reads only
    what it compares with: the tools of its action word, the model's features.

    Built from prepared labels (``prepare_labels``), or empty and then kept up to date with
    ``update`` from readings (``label_read``), which adds what the other tools say of each
    (``observed_features``) and changes only what the readings added and removed touch: the
    tools they require and produce. An index is changed in place: one thread at a time."""

    def __init__(self, prepared: Iterable[PreparedLabel] = ()) -> None:
        self.by_name: dict[str, dict[int, PreparedLabel]] = {}
        self.everything = LabelGroup()
        self.spaces: dict[str, LabelGroup] = {}
        self.required_by: dict[str, set[str]] = defaultdict(set)
        # For ``update``: the labels by the caller's key, their readings, their producers.
        self._labels: dict[Any, PreparedLabel] = {}
        self._readings: dict[Any, PreparedLabel] = {}
        self._producers: dict[str, dict[Any, None]] = defaultdict(dict)
        prepared = [tool for tool in prepared if tool["risk"] in RISK_ORDER]
        for tool in prepared:
            self._add(tool)
            for variable in tool.get("requires") or []:
                self.required_by[variable].add(tool["name"])

    def __len__(self) -> int:
        return len(self.everything.tools)

    def own(self, name: str) -> list[PreparedLabel]:
        return list(self.by_name.get(name, {}).values())

    def keys(self) -> set[Any]:
        return set(self._readings)

    def update(self, *, added: Mapping[Any, PreparedLabel], removed: Iterable[Any]) -> None:
        """Remove the readings under ``removed`` keys and add ``added`` ones (``label_read``:
        without observed features), then correct the observed features of the tools whose
        outputs the change made required, or no longer required."""
        touched: set[str] = set()  # variables whose requirers changed
        for key in removed:
            reading = self._readings.pop(key)
            self._remove(self._labels.pop(key))
            for variable in reading["produces"]:
                self._producers[variable].pop(key, None)
            for variable in reading["requires"]:
                self.required_by[variable].discard(reading["name"])
                touched.add(variable)
        for key, reading in added.items():
            if reading["risk"] not in RISK_ORDER:
                continue
            self._readings[key] = reading
            for variable in reading["produces"]:
                self._producers[variable][key] = None
            for variable in reading["requires"]:
                self.required_by[variable].add(reading["name"])
                touched.add(variable)
        stale = {key for variable in touched for key in self._producers.get(variable, ())}
        for key in stale | {key for key in added if key in self._readings}:
            label = self._observed(self._readings[key])
            old = self._labels.get(key)
            if old is not None and old["features"] == label["features"]:
                continue
            if old is not None:
                self._remove(old)
            self._labels[key] = label
            self._add(label)

    def _observed(self, reading: PreparedLabel) -> PreparedLabel:
        observed = observed_features(
            reading["name"], reading["produces"], reading["gated"], self.required_by, []
        )
        return {**reading, "features": reading["features"] | observed}

    def _add(self, tool: PreparedLabel) -> None:
        self.by_name.setdefault(tool["name"], {})[id(tool)] = tool
        self.everything.add(tool)
        self.spaces.setdefault(namespace(tool["name"]), LabelGroup()).add(tool)

    def _remove(self, tool: PreparedLabel) -> None:
        del self.by_name[tool["name"]][id(tool)]
        self.everything.remove(tool)
        self.spaces[namespace(tool["name"])].remove(tool)


def labels_model_without(model: LabelsModel, left_out: list[PreparedLabel]) -> LabelsModel:
    """``model`` as if trained without ``left_out`` (tools it was trained on): only the levels
    and features those tools touch are copied."""
    if not left_out:
        return model
    counts = dict(model["counts"])
    features = dict(model["features"])
    for tool in left_out:
        counts[tool["risk"]] -= 1
        table = features[tool["risk"]] = dict(features[tool["risk"]])
        for feature in tool["features"]:
            table[feature] -= 1
    touched = {feature for tool in left_out for feature in tool["features"]}
    gone = {f for f in touched if not any(features[risk].get(f, 0) for risk in RISK_ORDER)}
    seen = model["seen"] - gone if gone else model["seen"]
    size = model["size"] - len(left_out)
    return {"counts": counts, "features": features, "seen": seen, "size": size}


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
    return _vote(scored, lambda: Counter(tool["risk"] for tool in pool), same_kind=same_kind)


def _vote(
    scored: list[tuple[float, PreparedLabel]],
    pool_risks: Callable[[], Counter[str]],
    *,
    same_kind: bool,
) -> tuple[str, float, list[Neighbour]]:
    """The vote of the closest tools, ``scored``; ``pool_risks``: the count of each level in
    the whole pool, for when none shares a word."""
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
        counts = pool_risks()
        best = max(RISK_ORDER, key=lambda risk: (counts[risk], RISK_ORDER.index(risk)))
        return best, counts[best] / counts.total() / 2, []
    best = max(RISK_ORDER, key=lambda risk: (votes[risk], RISK_ORDER.index(risk)))
    return best, votes[best] / total, neighbours


def _similarity(own: set[str], other: set[str]) -> float:
    return len(own & other) / len(own | other) if own | other else 0.0
