"""Risk suggestions that never under-rate danger (pure: no Django, no network).

A suggestion reads the evidence a reviewer would read, and returns it:

- **Words of danger** in the tool's name, its description, its effects (produced variables)
  and its permissions, found through WordNet (``learning.lexicon``): a few seed senses per
  danger class, chosen by meaning (``SEEDS``), grow into their synonyms, their hyponyms (the ways
  of doing it) and the nouns that name the act (``delete`` → ``erase``, ``wipe out``,
  ``obliterate``; ``cancel officially`` → ``revoke``, ``rescind``; ``pay`` → ``refund``,
  ``payment``). A word reached through WordNet counts only where that sense is among its
  ``DOMINANT_SENSES`` most frequent ones, so "return" (rarely "refund") is no payment.
- **The labels reviewers gave similar tools**: the closest ``NEIGHBOURS`` labelled tools vote,
  weighted by likeness (Jaccard of name, description, effect and permission words).

The rules, in order:

1. With danger evidence, the neighbours that share a danger class vote; with none sharing one,
   the class speaks for itself (``CLASS_LEVEL``: destruction, money, sending out, public
   sharing and permission grants are ``high``; writes ``medium``). Either way the suggestion
   is never below ``medium``.
2. Without danger evidence, the tools with the same action word vote, else the closest tools;
   with no labelled tool at all, ``medium`` (nothing is known).
3. Ties go to the higher level.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

from .lexicon import ACTION_NOUN_FILES, Synset, WordNet, wordnet

RISK_ORDER = ("low", "medium", "high")
FLOOR = "medium"
NEIGHBOURS = 3
HYPONYM_DEPTH = 1
DOMINANT_SENSES = 3
# A phrasal verb's first word stands for it ("wipe" for "wipe out") only when that word alone
# has at most this many senses: "take" (42 senses) never stands for "take away".
HEAD_MAX_SENSES = 2
NEGATIONS = frozenset({"not", "never", "no", "without", "cannot", "doesn", "don", "won", "isn"})
NEGATION_WINDOW = 3

# Seed senses per danger class, by WordNet 3.0 sense (lemma.pos.N = the lemma's Nth sense,
# most frequent first). Each is a generic concept of danger; docs/architecture.md says why.
SEEDS: dict[str, tuple[str, ...]] = {
    "destructive": (
        "delete.v.01",  # remove or make invisible
        "delete.v.02",  # wipe out digitally or magnetically recorded information
        "erase.v.01",  # remove from memory or existence
        "destroy.v.01",  # do away with, cause the destruction or undoing of
        "destroy.v.02",  # damage irreparably
        "kill.v.12",  # mark for deletion, rub off, or erase
        "remove.v.03",  # get rid of, dispose of
        "cancel.v.01",  # annul something that was scheduled
        "cancel.v.03",  # declare null and void; make ineffective
        "overwrite.v.01",  # write new data on top of existing data, erasing it
    ),
    "money": (
        "pay.v.01",  # give money
        "charge.v.03",  # demand payment
        "charge.v.12",  # pay with a credit card
        "buy.v.01",  # obtain by purchase
        "sell.v.01",  # exchange or deliver for money
        "spend.v.02",  # pay out
        "withdraw.v.09",  # remove (money) from a supply source
    ),
    "external": (
        "send.v.02",  # cause to be taken, directed or transmitted to another place
        "send.v.03",  # mail, post
        "send.v.04",  # transport, ship (goods sent on, forwarded)
        "send.v.06",  # transfer (information) off to someone
        "email.v.01",  # communicate electronically on the computer
        "export.v.02",  # transfer electronic data out
    ),
    "public": (
        "publicize.v.01",  # make public
        "publish.v.02",  # issue for public distribution
        "disclose.v.01",  # make known to the public information known to few
        "share.v.05",  # communicate, share with others
    ),
    "permissions": (
        "grant.v.01",  # let have ("grant permission")
        "grant.v.04",  # allow to have ("grant a privilege")
        "authorize.v.02",  # give or delegate power or authority
        "delegate.v.01",  # transfer power to someone
    ),
    "modification": (
        "write.v.08",  # record data on a computer
        "save.v.11",  # the same sense: write, save
        "update.v.01",  # bring up to date
        "update.v.03",  # bring to the latest state
        "edit.v.01",  # prepare by correcting, revising
        "create.v.02",  # bring into existence
    ),
}
CLASS_LEVEL = {
    "destructive": "high",
    "money": "high",
    "external": "high",
    "public": "high",
    "permissions": "high",
    "modification": "medium",
}
TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# Words that name an identifier rather than a thing: "payment_id" is about a payment.
IDENTIFIER_WORDS = frozenset({"id", "ids", "url", "uri", "key", "ref", "number", "at", "time"})


def words(text: str) -> list[str]:
    """Lower-case words of a name or text: snake_case, dotted, camelCase and kebab-case alike."""
    return [word.lower() for word in TOKEN.findall(text)]


@dataclass(frozen=True)
class Sense:
    danger: str  # the class
    via: str  # how the word was reached, for the evidence
    # Is the dangerous sense one of the word's most frequent? Words reached through WordNet
    # always are (others are left out); a seed word may not be ("charge" is first an attack),
    # and then it counts in a name, an effect or a permission but not in running text.
    dominant: bool = True


@dataclass
class Lexicon:
    """Danger words by class: verbs (with the sense that makes them dangerous), act nouns,
    and phrases (multi-word verbs, matched as consecutive words)."""

    verbs: dict[str, list[Sense]] = field(default_factory=dict)
    nouns: dict[str, list[Sense]] = field(default_factory=dict)
    phrases: dict[tuple[str, ...], list[Sense]] = field(default_factory=dict)
    wordnet: WordNet | None = None

    def add(self, table: dict, key: object, sense: Sense) -> None:
        senses = table.setdefault(key, [])
        for index, existing in enumerate(senses):
            if existing.danger == sense.danger:
                if sense.dominant and not existing.dominant:
                    senses[index] = sense
                return
        senses.append(sense)

    def verb(self, word: str) -> list[Sense]:
        assert self.wordnet is not None
        for form in self.wordnet.base_forms(word, "v"):
            if form in self.verbs:
                return self.verbs[form]
        return []

    def noun(self, word: str) -> list[Sense]:
        assert self.wordnet is not None
        for form in self.wordnet.base_forms(word, "n"):
            if form in self.nouns:
                return self.nouns[form]
        return []

    def is_verb_like(self, word: str, *, first: bool = False) -> bool:
        """Is the word used as a verb here? A past or progressive form ("deleted", "sent",
        "wiping") always is; otherwise a word that is mostly a verb ("send", "delete" but not
        "email" or "invoice"), or, first in a name, one at least as often a verb as a noun
        ("forward_email")."""
        return self.verbness(word, first=first) is not None

    def verbness(self, word: str, *, first: bool = False) -> int | None:
        """How much more often the word is a verb than a noun (tagged senses), or None."""
        assert self.wordnet is not None
        wn = self.wordnet
        forms = [form for form in wn.base_forms(word, "v") if wn.senses(form, "v")]
        if not forms:
            return None
        base = forms[0]
        irregular = (
            base != word and word not in wn.base_forms(base, "v")[:1] and not (word.endswith("s"))
        )
        if (word.endswith(("ed", "ing")) and base != word) or irregular:
            return wn.tagged(base, "v")
        nouns = [noun for noun in wn.base_forms(word, "n") if wn.senses(noun, "n")]
        margin = wn.tagged(base, "v") - (wn.tagged(nouns[0], "n") if nouns else 0)
        if not nouns or margin > 0 or (first and margin == 0):
            return margin
        return None


def lexicon_build(wn: WordNet, seeds: dict[str, tuple[str, ...]] = SEEDS) -> Lexicon:
    """Grow the seed senses through WordNet: synonyms, hyponyms, derived act nouns."""
    lexicon = Lexicon(wordnet=wn)
    for danger, names in seeds.items():
        for name in names:
            lemma, pos, number = name.rsplit(".", 2)
            offsets = wn.senses(lemma, pos)
            if int(number) > len(offsets):
                raise ValueError(f"seed {name}: {lemma} has {len(offsets)} senses")
            seed = wn.synset(offsets[int(number) - 1], pos)
            gloss = seed.gloss.split(";")[0]
            lexicon.add(
                lexicon.verbs,
                lemma,
                Sense(danger, f"seed: {lemma} ({gloss})", int(number) <= DOMINANT_SENSES),
            )
            frontier = [(seed, f"WordNet synonym of {lemma}")]
            seen = {seed.offset}
            for depth in range(HYPONYM_DEPTH + 1):
                following = []
                for synset, via in frontier:
                    _add_synset(lexicon, wn, synset, danger, via)
                    for offset, target_pos, _ in synset.related("~"):
                        if offset not in seen:
                            seen.add(offset)
                            hyponym = wn.synset(offset, target_pos)
                            following.append((hyponym, f"WordNet hyponym of {synset.words[0]}"))
                if depth == HYPONYM_DEPTH:
                    break
                frontier = following
    return lexicon


def _add_synset(lexicon: Lexicon, wn: WordNet, synset: Synset, danger: str, via: str) -> None:
    for lemma in synset.words:
        senses = wn.senses(lemma, "v")
        # A word counts only where this sense is one of its most frequent.
        if synset.offset not in senses[:DOMINANT_SENSES]:
            continue
        if "_" in lemma or "-" in lemma:
            parts = tuple(re.split(r"[_-]", lemma))
            lexicon.add(lexicon.phrases, parts, Sense(danger, via))
            head = parts[0]
            if 0 < len(wn.senses(head, "v")) <= HEAD_MAX_SENSES:
                lexicon.add(lexicon.verbs, head, Sense(danger, f"head of {lemma}, {via}"))
            continue
        lexicon.add(lexicon.verbs, lemma, Sense(danger, via))
    for offset, target_pos, _ in synset.related("+"):
        if target_pos != "n":
            continue
        noun = wn.synset(offset, "n")
        if noun.lexfile not in ACTION_NOUN_FILES:
            continue
        for lemma in noun.words:
            if "_" not in lemma:
                lexicon.add(lexicon.nouns, lemma, Sense(danger, f"act noun of {synset.words[0]}"))


@cache
def lexicon() -> Lexicon:
    """Built once per process on first use (about 300 synsets read; see docs/benchmarks.md)."""
    return lexicon_build(wordnet())


class RiskSuggestion(NamedTuple):
    risk: str
    confidence: float
    evidence: list[dict]


def danger_evidence(
    *, name: str, description: str, produces: Iterable[str], permissions: Iterable[str],
    lex: Lexicon | None = None,
) -> list[dict]:  # fmt: skip
    """Every word of danger, where it was found and how it was recognised."""
    lex = lex or lexicon()
    found: list[dict] = []
    seen: set[tuple[str, str, str]] = set()

    def note(kind: str, word: str, senses: list[Sense], **extra: object) -> None:
        for sense in senses:
            if (kind, word, sense.danger) not in seen:
                seen.add((kind, word, sense.danger))
                found.append(
                    {"kind": kind, "word": word, "class": sense.danger, "via": sense.via, **extra}
                )

    # The name: its last dotted part is the action ("payments.refund"); the rest is a domain.
    action = words(name.rsplit(".", 1)[-1])
    # Verb-first names put the action first ("send_invoice"); noun-first names, whose first
    # word is no verb, put it last ("invoiceSend", "account_deletion").
    noun_first = bool(action) and not lex.is_verb_like(action[0], first=True)
    for index, word in enumerate(action):
        last = index == len(action) - 1
        if lex.is_verb_like(word, first=index == 0) or (noun_first and last and len(action) > 1):
            note("verb", word, lex.verb(word))
        if index == len(action) - 1 or all(w.isdigit() for w in action[index + 1 :]):
            note("verb", word, lex.noun(word))  # noun-first names: "account_deletion"
    note_phrases(lex, action, lambda word, senses: note("verb", word, senses))
    for variable in produces:
        parts = words(variable)
        for index, word in enumerate(parts):
            if lex.is_verb_like(word):
                note("effect", word, lex.verb(word), variable=variable)
            if all(later in IDENTIFIER_WORDS for later in parts[index + 1 :]):
                # A noun names the thing, which may be made or only computed ("payment").
                note("effect", word, lex.noun(word), variable=variable, noun=True)
    for permission in permissions:
        for word in words(permission):
            note("permission", word, lex.verb(word) or lex.noun(word), permission=permission)
    text = words(description)
    for index, word in enumerate(text):
        if not lex.is_verb_like(word):
            continue
        senses = [sense for sense in lex.verb(word) if sense.dominant]
        if senses:
            negated = bool(NEGATIONS & set(text[max(0, index - NEGATION_WINDOW) : index]))
            note("description", word, senses, **({"negated": True} if negated else {}))
    note_phrases(lex, text, lambda word, senses: note("description", word, senses))
    return found


def note_phrases(lex: Lexicon, text: list[str], note: Callable[[str, list[Sense]], None]) -> None:
    """Multi-word verbs (\"wipe out\") as consecutive words."""
    for parts, senses in lex.phrases.items():
        size = len(parts)
        for start in range(len(text) - size + 1):
            if tuple(text[start : start + size]) == parts:
                note(" ".join(parts), senses)


def prepare_labels(labelled: Iterable[dict], lex: Lexicon | None = None) -> list[dict]:
    """Read the labelled tools once, for many suggestions (a refresh of a whole registry)."""
    prepared = []
    for tool in labelled:
        if tool.get("risk") not in RISK_ORDER:
            continue
        if "tokens" in tool and "classes" in tool:  # prepared already
            prepared.append(tool)
            continue
        name = tool.get("name", "")
        produces = tool.get("produces") or []
        permissions = tool.get("permissions") or []
        description = tool.get("description", "")
        evidence = danger_evidence(
            name=name, description=description, produces=produces, permissions=permissions,
            lex=lex,
        )  # fmt: skip
        prepared.append(
            {
                "name": name,
                "risk": tool["risk"],
                "tokens": _tokens(name, description, produces, permissions),
                "verb": action_verb(name, lex),
                "classes": {item["class"] for item in evidence if not item.get("negated")},
            }
        )
    return prepared


def action_verb(name: str, lex: Lexicon | None = None) -> str | None:
    """The action word of a name: its most verb-like word (``maps_read_x`` -> ``read``)."""
    lex = lex or lexicon()
    best: tuple[int, str] | None = None
    for index, word in enumerate(words(name.rsplit(".", 1)[-1])):
        verbness = lex.verbness(word, first=index == 0)
        if verbness is not None and (best is None or verbness > best[0]):
            best = (verbness, word)
    return best[1] if best else None


def suggest_risk(
    *, name: str, description: str, produces: list[str], permissions: list[str],
    labelled: Iterable[dict], lex: Lexicon | None = None,
) -> RiskSuggestion:  # fmt: skip
    """The suggested level, its confidence and the evidence behind it (see the module doc)."""
    lex = lex or lexicon()
    evidence = danger_evidence(
        name=name, description=description, produces=produces, permissions=permissions, lex=lex
    )
    classes = {item["class"] for item in evidence if not item.get("negated")}
    own = _tokens(name, description, produces, permissions)
    candidates = [tool for tool in prepare_labels(labelled, lex) if tool["name"] != name]
    if evidence:
        pool = [tool for tool in candidates if tool["classes"] & classes]
        if pool:
            voted, confidence, neighbours = _vote(own, pool, same_kind=True)
            evidence.append(
                {"kind": "neighbours", "basis": "share a danger class", "vote": voted,
                 "tools": neighbours}
            )  # fmt: skip
            risk = _max(voted, FLOOR)
        else:
            # What the tool does is its name, the verbs of its effects and its permissions; a
            # description may mention what it does not do and an effect's noun may only be
            # computed, so alone they set the floor, not the class level.
            strong = {
                item["class"] for item in evidence
                if item["kind"] != "description" and not item.get("negated")
                and not item.get("noun")
            }  # fmt: skip
            risk = max((CLASS_LEVEL[danger] for danger in strong), key=RISK_ORDER.index,
                       default=FLOOR)  # fmt: skip
            confidence = 0.6 if strong else 0.3
            detail = (
                f"no labelled tool shares its danger class; the class says {risk}"
                if strong
                else "danger named only in the description: at least medium"
            )
            evidence.append({"kind": "rule", "detail": detail})
        return RiskSuggestion(risk, round(confidence, 3), evidence)
    verb = action_verb(name, lex)
    same_verb = [tool for tool in candidates if verb and tool["verb"] == verb]
    # Else the labelled tools that show no danger either: how reviewers rate tools like it.
    harmless = [tool for tool in candidates if not tool["classes"]]
    pool = same_verb or harmless or candidates
    if not pool:
        return RiskSuggestion(
            FLOOR, 0.0, [{"kind": "rule", "detail": "no danger evidence and no labelled tool"}]
        )
    voted, confidence, neighbours = _vote(own, pool, same_kind=bool(same_verb))
    basis = (
        f"same action word '{verb}'" if same_verb
        else "closest labelled tools without danger" if harmless
        else "closest labelled tools"
    )  # fmt: skip
    evidence.append({"kind": "neighbours", "basis": basis, "vote": voted, "tools": neighbours})
    return RiskSuggestion(voted, round(confidence, 3), evidence)


def _vote(own: set[str], pool: list[dict], *, same_kind: bool) -> tuple[str, float, list[dict]]:
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
    neighbours = [
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


def _max(left: str, right: str) -> str:
    return max(left, right, key=RISK_ORDER.index)


def _tokens(
    name: str, description: str, produces: Iterable[str], permissions: Iterable[str]
) -> set[str]:
    found = set()
    for text in (name, description, *produces, *permissions):
        for word in words(text):
            if len(word) > 2 and word not in STOP_WORDS:
                found.add(word[:-1] if word.endswith("s") and len(word) > 4 else word)
    return found


# Words too common to make two tools alike.
STOP_WORDS = frozenset(
    "the and for with from into onto this that these those its their your our any all only "
    "one are was were has have had not can will may use used using via per a an of to in on "
    "by or as at is it be".split()
)


def _similarity(own: set[str], other: set[str]) -> float:
    return len(own & other) / len(own | other) if own | other else 0.0
