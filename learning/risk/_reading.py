"""Rules 1–4 of docs/learning.md (*Risk suggestions*): what one tool's words, hints and
schema say, before any reviewer's label; and what the object says of the action word."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ._actions import NO_ACTION, Action, action_of, description_lead, participle
from ._evidence import RiskEvidence, argument_signals, danger_evidence, scope_evidence
from ._hints import apply_hints
from ._lexicon import (
    ACTS,
    CHANGES,
    DANGER,
    DOMINANT_SENSES,
    INFORMS,
    KIND_ORDER,
    NEUTRAL,
    UNKNOWN,
    Lexicon,
    WordReading,
    lexicon,
    seed_synset,
)
from ._names import likeness_tokens, object_words, without_preamble, words
from ._wordnet import WordNet

# What an action word does to its object, by WordNet 3.0 sense (docs/learning.md, rule 2).
GIVE_SEED = "give.v.03"  # transfer possession of something to somebody ("return": give back)
OWNERSHIP_SEED = "transfer.v.05"  # cause to change ownership ("deliver": hand over)
MOVE_SEED = "move.v.02"  # cause to move or shift into a new position or place
PERSON_FILE = 18  # noun.person: agent, representative, customer, supervisor…
POSSESSION_FILE = 21  # noun.possession: money, funds, amount, payment, balance…
HYPERNYM_DEPTH = 8


def _under(wn: WordNet, lemma: str, seed: str, *, pos: str = "v") -> bool:
    """Does one of the lemma's dominant senses lie under the seed sense (within
    ``HYPERNYM_DEPTH`` levels)?"""
    wanted = seed_synset(wn, seed).offset
    for offset in wn.senses(lemma, pos)[:DOMINANT_SENSES]:
        frontier, seen = {offset}, {offset}
        for _ in range(HYPERNYM_DEPTH + 1):
            if wanted in frontier:
                return True
            above = {
                target for item in frontier for target, _, _ in wn.synset(item, pos).related("@")
            }
            frontier = above - seen
            seen |= frontier
    return False


def _noun_files(wn: WordNet, word: str) -> set[int]:
    """The lexicographer files of a noun's two most frequent senses (plural or not)."""
    for form in (word, word[:-1] if word.endswith("s") else word, *wn.base_forms(word, "n")):
        offsets = wn.senses(form, "n")[:2]
        if offsets:
            return {wn.synset(offset, "n").lexfile for offset in offsets}
    return set()


def _gives_back_bought(lex: Lexicon, item: Action, objects: list[str]) -> str | None:
    """A read word that also means *give back* ("return"), in its base form, done to what was
    delivered, bought or paid for ("return the delivered items") gives goods back for their
    money: a refund. Returns the participle that says so."""
    wn = lex.wn()
    if item.word is None or item.reading is None or item.reading.kind != INFORMS:
        return None
    if not wn.senses(item.word, "v") or not _under(wn, item.word, GIVE_SEED):
        return None  # "returns" (a description of an output) is not the base form
    for word in objects:
        if not participle(lex, word):
            continue
        entry = lex.entry(word)
        if entry is not None and entry[1].danger == "money":
            return word
        bases = [form for form in wn.base_forms(word, "v") if wn.senses(form, "v")]
        if any(_under(wn, b, OWNERSHIP_SEED) or _under(wn, b, GIVE_SEED) for b in bases):
            return word
    return None


def _hands_over_to_person(lex: Lexicon, word: str, objects: list[str]) -> str | None:
    """A money word that also means moving something ("transfer"), done to a person and to no
    possession ("transfer to a human agent"), hands the conversation over: no money moves.
    Returns the person's word."""
    wn = lex.wn()
    lemma = next((form for form in wn.base_forms(word, "v") if wn.senses(form, "v")), None)
    if lemma is None or not _under(wn, lemma, MOVE_SEED):
        return None
    files = {other: _noun_files(wn, other) for other in objects}
    if any(POSSESSION_FILE in found for found in files.values()):
        return None
    return next((other for other, found in files.items() if PERSON_FILE in found), None)


def _object_senses(
    lex: Lexicon, readings: list[Action], evidence: list[RiskEvidence], objects: list[str]
) -> tuple[list[Action], list[RiskEvidence]]:
    """Readings and evidence once the object says which sense the action word has."""
    changed: list[Action] = []
    for item in readings:
        bought = _gives_back_bought(lex, item, objects)
        if bought is not None and item.word is not None:
            via = f"gives back what was {bought}: a refund (money)"
            assert item.reading is not None
            reading = WordReading(item.word, item.reading.lemma, DANGER, False, via)
            evidence.append({"kind": "verb", "word": item.word, "class": "money", "via": via})
            item = Action(item.word, item.source, reading)
        elif item.word is not None and item.reading is not None and item.reading.kind == DANGER:
            money = any(e.get("class") == "money" and e.get("word") == item.word for e in evidence)
            others = any(
                e.get("class") not in (None, "money") and e.get("word") == item.word
                for e in evidence
            )
            person = (
                _hands_over_to_person(lex, item.word, objects) if money and not others else None
            )
            if person is not None:
                via = f"hands over to a person ({person}): acts, no money moves"
                reading = WordReading(item.word, item.reading.lemma, ACTS, False, via)
                evidence = [
                    e for e in evidence
                    if not (e.get("class") == "money" and e.get("word") == item.word)
                ]  # fmt: skip
                item = Action(item.word, item.source, reading)
        changed.append(item)
    return changed, evidence


class Reading(NamedTuple):
    """What the words, the hints and the schema of one tool say (before any labels)."""

    floor: str
    confidence: float
    evidence: list[RiskEvidence]
    action: Action
    kind: str
    features: frozenset[str]
    tokens: set[str]


def read_tool(
    *, name: str, description: str, produces: Iterable[str], permissions: Iterable[str],
    annotations: Mapping[str, Any] | None = None, arguments: Iterable[str] = (),
    lex: Lexicon | None = None,
) -> Reading:  # fmt: skip
    """Rules 1–4 of docs/learning.md (*Risk suggestions*): the floor the words and hints set.

    The phases: the action words read (``_action_readings``, rules 1 and 2) and their senses
    settled by the object (``_object_senses``); the evidence of danger, scope and arguments
    gathered; the floor set by rule 3 (``_floor``) and moved by the hints (rule 4,
    ``apply_hints``); the features the labels model learns from (``_features``).
    """
    lex = lex or lexicon()
    produces, permissions, arguments = list(produces), list(permissions), list(arguments)
    description = without_preamble(description)
    action, readings = _action_readings(name, description, lex)
    evidence = danger_evidence(
        name=name, description=description, produces=produces, permissions=permissions,
        lex=lex, action_word=action.word,
    )  # fmt: skip
    readings, evidence = _object_senses(
        lex, readings, evidence, object_words(name, description, action.word)
    )
    kind = _kind(*readings)
    evidence += _action_evidence(readings)
    scope = scope_evidence(name, description, lex)
    signals = argument_signals(arguments)
    evidence += scope + signals
    strong, weak = _danger_classes(evidence)
    floor, detail, confidence = _floor(kind, readings, evidence, strong=strong, scope=scope)
    evidence.append({"kind": "rule", "detail": detail, "floor": floor})
    floor, confidence = apply_hints(annotations, floor, confidence, kind, evidence)
    features = _features(
        lex, action, kind, evidence, strong=strong, weak=weak, signals=signals, scope=scope
    )
    return Reading(
        floor, confidence, evidence, action, kind, features,
        likeness_tokens(name, description, produces, permissions),
    )  # fmt: skip


def _action_readings(name: str, description: str, lex: Lexicon) -> tuple[Action, list[Action]]:
    """The name's action, and the action words the tool is read by: the name's and the
    description's lead, or what a neutral verb runs."""
    action = action_of(name, description, lex)
    lead = description_lead(description, action, lex)
    if _reviewed(action) and not _reviewed(lead) and lead.reading and lead.reading.kind != DANGER:
        # The reviewed lexicon placed the name's action; a description beginning with a verb
        # only WordNet can read ("Turn an address into coordinates") does not overrule it.
        lead = NO_ACTION
    readings = [item for item in (action, lead) if item.reading is not None]
    if any(item.reading.kind != NEUTRAL for item in readings if item.reading):
        # "run_tests" runs tests: a verb that runs something is read through the others.
        readings = [item for item in readings if item.reading and item.reading.kind != NEUTRAL]
    elif readings and action.word:
        # Only "run", "execute"…: what it runs, when the name says so ("run_tests").
        parts = words(name.rsplit(".", 1)[-1])
        following = parts[parts.index(action.word) + 1 :] if action.word in parts else []
        runs = next((word for word in following if lex.entry(word) is not None), None)
        if runs is not None:
            readings = [Action(runs, "name", lex.word_reading(runs))]
    return action, readings


def _action_evidence(readings: list[Action]) -> list[RiskEvidence]:
    """How each action word was read, as evidence."""
    evidence: list[RiskEvidence] = []
    for item in readings:
        assert item.reading is not None
        evidence.append(
            {"kind": "action", "word": item.word or "", "source": item.source,
             "reading": item.reading.kind, "via": item.reading.via}
        )  # fmt: skip
    return evidence


def _danger_classes(evidence: list[RiskEvidence]) -> tuple[list[str], set[str]]:
    """The danger classes in what the tool does (strong: its action, its effects' verbs, its
    permissions, a main affirmative clause of its description), and those its effects or
    description name at all (weak)."""
    strong = sorted(
        {
            item["class"] for item in evidence
            if item.get("class") and item["kind"] in ("verb", "effect", "permission", "description")
            and not item.get("negated") and not item.get("subordinate") and not item.get("noun")
        }
    )  # fmt: skip
    weak = {
        item["class"] for item in evidence
        if item.get("class") and item["kind"] in ("effect", "description")
    }  # fmt: skip
    return strong, weak


def _floor(
    kind: str,
    readings: list[Action],
    evidence: list[RiskEvidence],
    *,
    strong: list[str],
    scope: list[RiskEvidence],
) -> tuple[str, str, float]:
    """Rule 3: the floor, the detail that says why, and how sure it is."""
    # A danger verb in a subordinate clause ("If …, sends a request"): medium at most. Words
    # of permission in passing describe the tool's own access ("grants you internet access",
    # "allowed directories"), not access it gives.
    mentioned = [
        item for item in evidence
        if item["kind"] == "description" and item.get("subordinate") and not item.get("negated")
        and item.get("class") != "permissions"
    ]  # fmt: skip
    if strong:
        return "high", f"danger ({', '.join(strong)}) in what the tool does: high", 0.8
    if scope and kind not in (INFORMS, NEUTRAL):
        return "high", f"a change that reaches further ({scope[0]['word']}): high", 0.7
    if kind == INFORMS and mentioned:
        detail = f"a read whose description may also {mentioned[0]['word']}: medium"
        return "medium", detail, 0.5
    if kind == INFORMS:
        detail = f"'{readings[0].word}' takes in or works out information: low"
        lexicon_only = all(r.reading and r.reading.via.startswith("lexicon") for r in readings)
        return "low", detail, 0.8 if lexicon_only else 0.6
    return _medium_floor(readings)


def _medium_floor(readings: list[Action]) -> tuple[str, str, float]:
    """A tool that is not a read and shows no danger: medium, said through the action word
    that keeps it from low."""
    blocking = max(
        (item for item in readings if item.reading),
        key=lambda item: KIND_ORDER.index(_kind(item)),
        default=None,
    )
    reading = blocking.reading if blocking is not None else None
    detail = (
        "no action word the lexicon can place: medium"
        if blocking is None or reading is None
        else {
            CHANGES: f"'{blocking.word}' changes things: medium",
            ACTS: f"'{blocking.word}' acts on something: medium",
            NEUTRAL: f"'{blocking.word}' runs something the words do not name: medium",
        }.get(_kind(blocking), f"'{blocking.word}' cannot be placed: medium")
    )
    confidence = 0.7 if reading is not None and reading.kind == CHANGES else 0.4
    return "medium", detail, confidence


def _features(
    lex: Lexicon,
    action: Action,
    kind: str,
    evidence: list[RiskEvidence],
    *,
    strong: list[str],
    weak: set[str],
    signals: list[RiskEvidence],
    scope: list[RiskEvidence],
) -> frozenset[str]:
    """What the labels model learns from (rule 5): the kind, the danger classes, the action
    word, the argument signals, the hints and the scope."""
    features = {f"k:{kind}", *(f"c:{c}" for c in strong), *(f"w:{c}" for c in weak)}
    if action.word:
        features.add(f"a:{action.word}")
        base = lex.entry(action.word)
        if (base[0] if base else action.word) in lex.vocabulary.alters:
            # Changes what exists in place: whether that is high is the application's policy.
            features.add("alters")
    features |= {f"s:{item['class']}" for item in signals}
    features |= {f"h:{item['hint']}={item['value']}" for item in evidence if item["kind"] == "hint"}
    if scope:
        features.add("scope")
    return frozenset(features)


def _reviewed(action: Action) -> bool:
    """Was the action word placed by the reviewed lexicon (not by WordNet)?"""
    return action.reading is not None and action.reading.via.startswith("lexicon")


def _kind(*actions: Action) -> str:
    """What the tool's action words say together: it informs only if every one informs in
    its most frequent sense (a word that informs in a rarer sense acts on something)."""
    kinds = [
        ACTS if action.reading.kind == INFORMS and not action.reading.first
        else action.reading.kind
        for action in actions if action.reading is not None
    ]  # fmt: skip
    if not kinds:
        return UNKNOWN
    return max(kinds, key=KIND_ORDER.index)
