"""The suggested level, how sure, and the evidence: the words, then the labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ._evidence import RiskEvidence
from ._labels import (
    MODEL_MARGIN,
    MODEL_MIN_LABELS,
    MODEL_MIN_LEVEL,
    MODEL_RAISE,
    RISK_ORDER,
    LabelIndex,
    labels_model_without,
    model_probabilities,
    observed_features,
    prepare_labels,
)
from ._lexicon import NEUTRAL, Lexicon, lexicon
from ._names import namespace
from ._reading import read_tool


class RiskSuggestion(NamedTuple):
    risk: str
    confidence: float
    evidence: list[RiskEvidence]


def suggest_risk(
    *, name: str, description: str, produces: list[str], permissions: list[str],
    labelled: Iterable[Mapping[str, Any]] | LabelIndex, lex: Lexicon | None = None,
    annotations: Mapping[str, Any] | None = None,
    arguments: Iterable[str] = (), gated: Iterable[str] = (),
) -> RiskSuggestion:  # fmt: skip
    """The suggested level, its confidence and the evidence behind it (docs/learning.md).

    ``gated``: state variables the tool's calls failed without (``learning.inference``): a
    precondition guards it. Whether other labelled tools require what it ``produces`` is read
    from ``labelled``. Both are features of the labels model only (rule 5).

    ``labelled`` is best a ``LabelIndex`` built once for many suggestions: then a suggestion
    reads the tools of its namespace and action word, not every labelled tool. The tool's own
    label, if it has one, is left out either way."""
    lex = lex or lexicon()
    reading = read_tool(
        name=name, description=description, produces=produces, permissions=permissions,
        annotations=annotations, arguments=arguments, lex=lex,
    )  # fmt: skip
    floor, confidence, evidence = reading.floor, reading.confidence, reading.evidence
    if floor == RISK_ORDER[-1]:
        return RiskSuggestion(floor, round(confidence, 3), evidence)
    if isinstance(labelled, LabelIndex):
        index = labelled
    else:
        index = LabelIndex(prepare_labels(labelled, lex))
    own = index.own(name)  # left out of everything below: a tool is not its own neighbour
    observed = observed_features(name, produces, gated, index.required_by, evidence)
    reading = reading._replace(features=reading.features | observed)
    space = index.spaces.get(namespace(name))
    if space is not None and len(space.tools) - len(own) >= MODEL_MIN_LABELS:
        group, scope = space, f"namespace '{namespace(name)}'" if namespace(name) else ""
    else:
        group, scope = index.everything, ""
    scope = scope or "every labelled tool"
    labels = len(group.tools) - len(own)
    risk = floor
    # The reviewers' labels of tools with the same action word: the closest few vote.
    word = reading.action.word
    # The tools of the same action word but this one, read once for the whole index.
    pool = group.verb_pool(word)
    same_verb = pool.size_without(name)
    declared_write = any(
        item["kind"] == "hint" and item["hint"] == "readOnlyHint" and not item["value"]
        for item in evidence
    )
    low = pool.risks_without(name)["low"] if same_verb else 0
    if reading.kind == NEUTRAL and same_verb and low * 2 > same_verb and not declared_write:
        # Mostly low (more than half: a tie goes up).
        risk = "low"
        evidence.append(
            {"kind": "rule", "floor": "low",
             "detail": f"'{word}' runs something, and reviewers rated "
                       f"{low} of {same_verb} tools with it low: low"}
        )  # fmt: skip
    if same_verb:
        voted, vote_confidence, neighbours = pool.vote_without(reading.tokens, name, same_kind=True)
        evidence.append(
            {"kind": "neighbours", "basis": f"same action word '{word}'", "vote": voted,
             "tools": neighbours}
        )  # fmt: skip
        if RISK_ORDER.index(voted) > RISK_ORDER.index(risk):
            risk, confidence = voted, vote_confidence
    # Without such tools, the model over every feature, trained on the namespace's labels.
    if not same_verb and labels >= MODEL_MIN_LABELS and risk != RISK_ORDER[-1]:
        model = labels_model_without(group.model, own)
        probabilities = model_probabilities(model, reading.features)
        for rank in reversed(range(RISK_ORDER.index(risk) + 1, len(RISK_ORDER))):
            level = RISK_ORDER[rank]
            # Reviewers here gave tools of the same kind (reads, changes…) this level or above.
            above = RISK_ORDER[rank:]
            alike = sum(group.kinds[(reading.kind, r)] for r in above) - sum(
                1 for tool in own if tool["kind"] == reading.kind and tool["risk"] in above
            )
            if alike < MODEL_MIN_LEVEL:
                continue
            at_least = sum(probabilities[r] for r in RISK_ORDER[RISK_ORDER.index(level) :])
            prior = sum(model["counts"][r] for r in RISK_ORDER[RISK_ORDER.index(level) :])
            # The tool's features, not how common the level is here, must carry the raise.
            if at_least >= MODEL_RAISE and at_least > prior / model["size"] + MODEL_MARGIN:
                evidence.append(
                    {"kind": "model", "basis": scope, "vote": level, "labels": model["size"],
                     "probability": round(at_least, 3),
                     "detail": f"reviewers' labels in {scope} ({model['size']} tools) put "
                               f"tools like this at {level} or above ({at_least:.0%})"}
                )  # fmt: skip
                risk, confidence = level, at_least
                break
    return RiskSuggestion(risk, round(confidence, 3), evidence)
