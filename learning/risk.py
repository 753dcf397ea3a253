"""Risk suggestions: a level, how sure, and the evidence (pure: no Django, no network).

The rules are written once, in docs/learning.md (*Risk suggestions*); the reviewed verb
lexicon is ``learning/data/verbs.toml``; WordNet is read by ``learning.lexicon``.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple, TypedDict

from .lexicon import ACTION_NOUN_FILES, Synset, WordNet, wordnet

RISK_ORDER = ("low", "medium", "high")
NEIGHBOURS = 3
HYPONYM_DEPTH = 1
DOMINANT_SENSES = 3
# Upward walks from a word's dominant senses (hypernym levels). Danger: two levels reach
# "reimburse" (→ refund → pay) and "disburse" (→ pay); at three, "remit" and every way of
# paying are reached too; beyond, the chains reach "give" and "transfer", which most verbs
# of possession share. Change: ``verb.change`` is deep ("truncate" is four levels below
# "change"), and its root says nothing else, so the walk goes as far as the chains go.
# Information: perception, cognition and the few seeds below are near the word or not at all.
DANGER_DEPTH = 3
CHANGE_DEPTH = 8
INFORMATION_DEPTH = 3
# A phrasal verb's first word stands for it ("wipe" for "wipe out") only when that word alone
# has at most this many senses: "take" (42 senses) never stands for "take away".
HEAD_MAX_SENSES = 2
# Closed compounds of phrasal verbs ("lookup", "writeoff", "payout") are tried split at each
# letter; the longest such phrase in WordNet has 17 letters.
COMPOUND_MAX = 20
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
}
# Senses that change what exists: every word below them, at any depth, changes things.
CHANGE_SEEDS = (
    "change.v.01",  # cause to change; make different
    "change.v.02",  # undergo a change; become different
    "create.v.01",  # make or cause to be or to become
    "create.v.02",  # bring into existence
    "record.v.01",  # make a record of; set down in permanent form
    "write.v.08",  # record data on a computer
    "save.v.11",  # the same sense: write, save
    "edit.v.01",  # prepare for publication by correcting, revising
)
CHANGE_FILES = {30: "verb.change"}
# Senses that only take in or work out information, and what lies just below them.
INFORMATION_SEEDS = (
    "search.v.01",  # try to locate or discover
    "look_up.v.01",  # seek information from (consult, refer)
    "determine.v.01",  # establish after a calculation, investigation (find out)
    "state.v.01",  # express in words (say, tell, summarize, answer, explain)
    "examine.v.02",  # observe, check out, look over carefully
    "interpret.v.01",  # make sense of; assign a meaning to (construe, deduce)
    "identify.v.02",  # give the name or identifying characteristics of (list, enumerate)
)
INFORMATION_FILES = {31: "verb.cognition", 39: "verb.perception"}
# How the action word reads, from the lowest risk floor to the highest.
INFORMS, ACTS, CHANGES, UNKNOWN, DANGER = "informs", "acts", "changes", "unknown", "danger"
NEUTRAL = "neutral"  # runs something: the other words say what (lexicon group "neutral")
KIND_ORDER = (INFORMS, NEUTRAL, ACTS, UNKNOWN, CHANGES, DANGER)
VERBS_FILE = Path(__file__).resolve().parent / "data" / "verbs.toml"
GROUP_KINDS = {"read": INFORMS, "neutral": NEUTRAL, "change": CHANGES}
# Lists of words that say something of a word rather than place it (verbs.toml says what).
ATTRIBUTES = ("scope", "nouns", "alters")
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


@dataclass(frozen=True)
class SenseReading:
    """What one verb sense does: the danger classes above it, whether it changes things,
    whether it informs, each with the chain that shows it."""

    dangers: tuple[tuple[str, str], ...]  # (class, chain)
    change: str | None
    information: str | None


@dataclass(frozen=True)
class WordReading:
    """How an action word reads over its dominant senses."""

    word: str
    lemma: str | None  # the WordNet verb it was read as (a base form or a phrasal verb)
    kind: str  # INFORMS, ACTS, CHANGES, UNKNOWN or DANGER
    # For INFORMS: is the first (most frequent) sense the information one? If not, the
    # reviewers' labels of tools with the same action word decide (rule 1).
    first: bool
    via: str


@dataclass(frozen=True)
class Entry:
    """A word of the reviewed verb lexicon: its group, the danger class (for danger groups)."""

    group: str
    danger: str | None
    reason: str


@dataclass(frozen=True)
class Vocabulary:
    """The reviewed lexicon of software verbs (``learning/data/verbs.toml``) and scope phrases."""

    words: dict[str, Entry]
    scope: tuple[tuple[str, ...], ...]
    scope_reason: str = ""
    nouns: frozenset[str] = frozenset()
    alters: frozenset[str] = frozenset()


class VocabularyInvalid(ValueError):
    """A verb lexicon file that cannot be read: which file and why."""


def vocabulary_load(*paths: Path) -> Vocabulary:
    """Read the lexicon files in order: a word in a later file replaces its entry."""
    known: dict[str, Entry] = {}
    scope: list[tuple[str, ...]] = []
    scope_reason = ""
    nouns: set[str] = set()
    alters: set[str] = set()
    for path in paths:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise VocabularyInvalid(f"risk verb lexicon {path}: {exc}") from exc
        for group, table in data.items():
            if not isinstance(table, dict) or not isinstance(table.get("words"), list):
                raise VocabularyInvalid(f"risk verb lexicon {path}: [{group}] needs a words list")
            if group not in (*GROUP_KINDS, *SEEDS, *ATTRIBUTES):
                raise VocabularyInvalid(
                    f"risk verb lexicon {path}: unknown group [{group}] (one of "
                    f"{', '.join((*GROUP_KINDS, *SEEDS, *ATTRIBUTES))})"
                )
            reason = str(table.get("reason", group))
            for word in table["words"]:
                if not isinstance(word, str) or not word.strip():
                    raise VocabularyInvalid(f"risk verb lexicon {path}: [{group}] {word!r}")
                if group == "scope":
                    scope.append(tuple(words(word)))
                    scope_reason = reason
                elif group == "nouns":
                    nouns.add(word.lower().strip())
                elif group == "alters":
                    alters.add(word.lower().strip())
                else:
                    danger = None if group in GROUP_KINDS else group
                    known[word.lower().strip()] = Entry(group, danger, reason)
    return Vocabulary(
        known, tuple(dict.fromkeys(scope)), scope_reason, frozenset(nouns), frozenset(alters)
    )


@dataclass
class Lexicon:
    """Danger words by class: verbs (with the sense that makes them dangerous), act nouns,
    and phrases (multi-word verbs, matched as consecutive words); and the seed senses, for
    reading any other verb by walking up from its senses."""

    verbs: dict[str, list[Sense]] = field(default_factory=dict)
    nouns: dict[str, list[Sense]] = field(default_factory=dict)
    phrases: dict[tuple[str, ...], list[Sense]] = field(default_factory=dict)
    wordnet: WordNet | None = None
    vocabulary: Vocabulary = field(default_factory=lambda: Vocabulary({}, ()))
    # offset -> [(class or kind, seed name)]
    danger_seeds: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    change_seeds: dict[int, str] = field(default_factory=dict)
    information_seeds: dict[int, str] = field(default_factory=dict)
    # Bounded by WordNet's vocabulary (about 13,800 verb senses), not by the input.
    _senses: dict[int, SenseReading] = field(default_factory=dict)
    _climbed: dict[str, list[Sense]] = field(default_factory=dict)
    _words: dict[str, WordReading] = field(default_factory=dict)

    def add(self, table: dict, key: object, sense: Sense) -> None:
        senses = table.setdefault(key, [])
        for index, existing in enumerate(senses):
            if existing.danger == sense.danger:
                if sense.dominant and not existing.dominant:
                    senses[index] = sense
                return
        senses.append(sense)

    def verb(self, word: str) -> list[Sense]:
        """The danger senses of a verb: the reviewed lexicon's, else grown from the seeds,
        else found walking up WordNet."""
        listed = self.entry(word)
        if listed is not None:
            base, reviewed = listed
            if reviewed.danger is None:
                return []
            return [Sense(reviewed.danger, f"lexicon: {base} ({reviewed.reason})")]
        wn = self._wn()
        grown = next((self.verbs[form] for form in wn.base_forms(word, "v") if form in self.verbs),
                     [])  # fmt: skip
        lemma = next((form for form in wn.base_forms(word, "v") if wn.senses(form, "v")), None)
        if lemma is None:
            return grown
        known = {sense.danger for sense in grown}
        return grown + [sense for sense in self.climbed(lemma) if sense.danger not in known]

    def entry(self, word: str) -> tuple[str, Entry] | None:
        """The reviewed lexicon's entry for a word or its base form."""
        known = self.vocabulary.words
        if word in known:
            return word, known[word]
        for form in self._wn().base_forms(word, "v"):
            if form in known:
                return form, known[form]
        return None

    def noun_capable(self, word: str) -> bool:
        """Is this software verb as often a noun in a name ("log", "commits")?"""
        entry = self.entry(word)
        return word in self.vocabulary.nouns or (
            entry is not None and entry[0] in self.vocabulary.nouns
        )

    def climbed(self, lemma: str) -> list[Sense]:
        """Danger classes above the lemma's dominant senses, within ``DANGER_DEPTH``."""
        if lemma not in self._climbed:
            found: list[Sense] = []
            for number, offset in enumerate(self._wn().senses(lemma, "v")[:DOMINANT_SENSES], 1):
                for danger, chain in self.sense_reading(offset).dangers:
                    if all(sense.danger != danger for sense in found):
                        found.append(Sense(danger, f"WordNet: {lemma}, sense {number}: {chain}"))
            self._climbed[lemma] = found
        return self._climbed[lemma]

    def verb_compound(self, word: str) -> list[Sense]:
        """The danger senses of a closed compound of a phrasal verb ("writeoff")."""
        if self.has_verb(word):
            return []
        phrase = self.compound(word)
        if phrase is None:
            return []
        return self.phrases.get(tuple(phrase.split("_"))) or self.verb(phrase)

    def noun(self, word: str) -> list[Sense]:
        wn = self._wn()
        for form in wn.base_forms(word, "n"):
            if form in self.nouns:
                return self.nouns[form]
        return []

    def sense_reading(self, offset: int) -> SenseReading:
        """Walk up the hypernyms of one verb sense: which seeds and files lie above it."""
        if offset in self._senses:
            return self._senses[offset]
        wn = self._wn()
        start = wn.synset(offset, "v")
        dangers: list[tuple[str, str]] = []
        change = information = None
        frontier: list[tuple[Synset, tuple[str, ...]]] = [(start, (start.words[0],))]
        seen = {offset}
        for depth in range(max(DANGER_DEPTH, CHANGE_DEPTH, INFORMATION_DEPTH) + 1):
            following = []
            for synset, chain in frontier:
                path = " → ".join(chain)
                if depth <= DANGER_DEPTH:
                    for danger, seed in self.danger_seeds.get(synset.offset, ()):
                        if all(danger != known for known, _ in dangers):
                            dangers.append((danger, f"{path} (seed {seed})"))
                if change is None and depth <= CHANGE_DEPTH:
                    if synset.offset in self.change_seeds:
                        change = f"{path} (seed {self.change_seeds[synset.offset]})"
                    elif depth == 0 and synset.lexfile in CHANGE_FILES:
                        change = f"{path} ({CHANGE_FILES[synset.lexfile]})"
                if information is None and depth <= INFORMATION_DEPTH:
                    if synset.offset in self.information_seeds:
                        information = f"{path} (seed {self.information_seeds[synset.offset]})"
                    elif depth == 0 and synset.lexfile in INFORMATION_FILES:
                        information = f"{path} ({INFORMATION_FILES[synset.lexfile]})"
                for symbol in ("@", "@i"):
                    for target, target_pos, _ in synset.related(symbol):
                        if target_pos == "v" and target not in seen:
                            seen.add(target)
                            hypernym = wn.synset(target, "v")
                            following.append((hypernym, (*chain, hypernym.words[0])))
            frontier = following
        reading = SenseReading(tuple(dangers), change, information)
        self._senses[offset] = reading
        return reading

    def word_reading(self, word: str) -> WordReading:
        """Read an action word over its dominant senses (see the module doc)."""
        if word in self._words:
            return self._words[word]
        wn = self._wn()
        entry = self.entry(word)
        if entry is not None:
            base, known = entry
            kind = GROUP_KINDS.get(known.group, DANGER)
            return WordReading(word, base, kind, True, f"lexicon: {known.group} ({known.reason})")
        lemma = next((form for form in wn.base_forms(word, "v") if wn.senses(form, "v")), None)
        lemma = lemma or self.compound(word)
        if lemma is None:
            reading = WordReading(word, None, UNKNOWN, False, "not a verb WordNet knows")
        else:
            offsets = wn.senses(lemma, "v")[:DOMINANT_SENSES]
            dominant = [(number, self.sense_reading(offset)) for number, offset in
                        enumerate(offsets, 1)]  # fmt: skip
            danger = next(((n, r) for n, r in dominant if r.dangers), None)
            change = next(((n, r) for n, r in dominant if r.change), None)
            informing = next(((n, r) for n, r in dominant if r.information), None)
            if danger is not None:
                via = f"{lemma}, sense {danger[0]}: {danger[1].dangers[0][1]}"
                reading = WordReading(word, lemma, DANGER, False, via)
            elif change is not None:
                via = f"{lemma}, sense {change[0]}: {change[1].change}"
                reading = WordReading(word, lemma, CHANGES, False, via)
            elif informing is not None:
                via = f"{lemma}, sense {informing[0]}: {informing[1].information}"
                reading = WordReading(word, lemma, INFORMS, informing[0] == 1, via)
            else:
                first_sense = wn.synset(wn.senses(lemma, "v")[0], "v")
                reading = WordReading(
                    word, lemma, ACTS, False,
                    f"{first_sense.words[0]}: {first_sense.gloss.split(';')[0]}",
                )  # fmt: skip
        if lemma is not None:  # words WordNet lacks are not kept (they come from the input)
            self._words[word] = reading
        return reading

    def compound(self, word: str) -> str | None:
        """A closed compound of a phrasal verb ("lookup" → look_up, "writeoff" → write_off)."""
        wn = self._wn()
        if len(word) > COMPOUND_MAX:
            return None
        for split in range(2, len(word) - 1):
            phrase = f"{word[:split]}_{word[split:]}"
            if wn.senses(phrase, "v"):
                return phrase
        return None

    def is_verb_like(self, word: str, *, first: bool = False) -> bool:
        """Is the word used as a verb here? A past or progressive form ("deleted", "sent",
        "wiping") always is; otherwise a word that is mostly a verb ("send", "delete" but not
        "email" or "invoice"), or, first in a name, one at least as often a verb as a noun
        ("forward_email")."""
        return self.verbness(word, first=first) is not None

    def verbness(self, word: str, *, first: bool = False) -> int | None:
        """How much more often the word is a verb than a noun (tagged senses), or None."""
        wn = self._wn()
        forms = [form for form in wn.base_forms(word, "v") if wn.senses(form, "v")]
        if not forms:
            # A software verb WordNet lacks ("unstage", "gzip"): a verb where a verb leads.
            return 0 if first and self.entry(word) is not None else None
        base = forms[0]
        irregular = (
            base != word and word not in wn.base_forms(base, "v")[:1] and not (word.endswith("s"))
        )
        if (word.endswith(("ed", "ing")) and base != word) or irregular:
            return wn.tagged(base, "v")
        nouns = [noun for noun in wn.base_forms(word, "n") if wn.senses(noun, "n")]
        if not first and wn.tagged(word, "a") > wn.tagged(base, "v"):
            return None  # mostly an adjective: "may be empty"
        margin = wn.tagged(base, "v") - (wn.tagged(nouns[0], "n") if nouns else 0)
        if not nouns or margin > 0 or (first and margin == 0):
            return margin
        return None

    def nominalised(self, word: str) -> str | None:
        """The software verb a noun names the act of ("retrieval" → retrieve, "deletion" →
        delete), through WordNet's derivational links; None for a word that is a verb itself."""
        wn = self._wn()
        if self.has_verb(word):
            return None
        for noun in [form for form in wn.base_forms(word, "n") if wn.senses(form, "n")][:1]:
            for offset in wn.senses(noun, "n")[:DOMINANT_SENSES]:
                synset = wn.synset(offset, "n")
                position = synset.words.index(noun) + 1 if noun in synset.words else 0
                for target, pos, source in synset.related("+"):
                    if pos != "v" or source not in (0, position):
                        continue
                    for verb in wn.synset(target, "v").words:
                        stem = min(4, len(verb) - 1)
                        if verb[:stem] == noun[:stem] and self.entry(verb) is not None:
                            return verb
        return None

    def has_verb(self, word: str) -> bool:
        wn = self._wn()
        return self.entry(word) is not None or any(
            wn.senses(form, "v") for form in wn.base_forms(word, "v")
        )

    def _wn(self) -> WordNet:
        assert self.wordnet is not None
        return self.wordnet


def lexicon_build(
    wn: WordNet, seeds: dict[str, tuple[str, ...]] = SEEDS, vocabulary: Vocabulary | None = None
) -> Lexicon:
    """Grow the seed senses through WordNet: synonyms, hyponyms, derived act nouns."""
    lexicon = Lexicon(wordnet=wn, vocabulary=vocabulary or vocabulary_load(VERBS_FILE))
    tables: tuple[tuple[tuple[str, ...], dict[int, str]], ...] = (
        (CHANGE_SEEDS, lexicon.change_seeds),
        (INFORMATION_SEEDS, lexicon.information_seeds),
    )
    for kinds, table in tables:
        for name in kinds:
            table[_seed(wn, name).offset] = name
    for danger, names in seeds.items():
        for name in names:
            lemma, pos, number = name.rsplit(".", 2)
            seed = _seed(wn, name)
            lexicon.danger_seeds.setdefault(seed.offset, []).append((danger, name))
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


def _seed(wn: WordNet, name: str) -> Synset:
    lemma, pos, number = name.rsplit(".", 2)
    offsets = wn.senses(lemma, pos)
    if int(number) > len(offsets):
        raise ValueError(f"seed {name}: {lemma} has {len(offsets)} senses")
    return wn.synset(offsets[int(number) - 1], pos)


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


_EXTRA_VERBS: list[Path] = []


def lexicon_configure(*, extra: str | Path | None) -> None:
    """Add an operator's verb lexicon file (the ``RISK_VERBS_FILE`` setting) over the
    reviewed one; read at once, so a bad file fails at start-up with its reason."""
    paths = [Path(extra)] if extra else []
    vocabulary_load(VERBS_FILE, *paths)
    if paths != _EXTRA_VERBS:
        _EXTRA_VERBS[:] = paths
        lexicon.cache_clear()


@cache
def lexicon() -> Lexicon:
    """Built once per process on first use (about 300 synsets read; see docs/benchmarks.md)."""
    return lexicon_build(wordnet(), vocabulary=vocabulary_load(VERBS_FILE, *_EXTRA_VERBS))


RiskEvidence = TypedDict(
    "RiskEvidence",
    {
        # "verb" (the action), "object" (another word of the name), "effect", "permission",
        # "description", "scope", "signal", "action", "hint", "contradiction", "rule",
        # "neighbours", "model", "observed"
        "kind": str,
        "signal": str,  # of "observed": "consumed" or "gated"
        "word": str,
        "class": str,
        "via": str,
        "variable": str,
        "permission": str,
        "negated": bool,
        "subordinate": bool,
        "noun": bool,
        "source": str,
        "reading": str,
        "detail": str,
        "floor": str,
        "hint": str,
        "value": bool,
        "basis": str,
        "vote": str,
        "tools": list[dict],
        "probability": float,
        "labels": int,
    },
    total=False,
)


class RiskSuggestion(NamedTuple):
    risk: str
    confidence: float
    evidence: list[RiskEvidence]


# Words that open a subordinate or conditional clause: what follows them may happen, or is
# said about something else, so it raises to medium at most ("…before anything is sent").
SUBORDINATORS = frozenset(
    "if when whenever before after unless until while once because whether although though "
    "that which who whose where so as than".split()
)
DETERMINERS = frozenset(
    "a an the its their his her our your my this these those each every all any no".split()
)
BE = frozenset("be is are was were been being".split())
AUXILIARIES = frozenset("is are was were be been being get gets got has have had".split())
TOOL_NAME = re.compile(r"\b[a-z][\w-]*\.[a-z][\w-]*[a-z_]\b")
SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
# Argument names that say what a call can reach (features of the labels model, and evidence).
SIGNALS = {
    "recipient": "external", "recipients": "external", "to": "external", "cc": "external",
    "bcc": "external", "email": "external", "phone": "external", "notify": "external",
    "amount": "money", "price": "money", "total": "money", "currency": "money",
    "force": "destructive", "overwrite": "destructive", "permanent": "destructive",
    "recursive": "destructive", "visibility": "public", "public": "public",
    "role": "permissions", "permission": "permissions", "permissions": "permissions",
    "scope": "permissions",
}  # fmt: skip


def danger_evidence(
    *, name: str, description: str, produces: Iterable[str], permissions: Iterable[str],
    lex: Lexicon | None = None, action_word: str | None = None,
) -> list[RiskEvidence]:  # fmt: skip
    """Every word of danger, where it was found and how it was recognised.

    Kinds: ``verb`` (the action of the name, or a noun-first name's act noun), ``object``
    (another word of the name: what the tool is about), ``effect`` (a produced variable; a
    ``noun`` when only its noun names the danger), ``permission``, ``description`` (with
    ``negated`` or ``subordinate`` when so)."""
    lex = lex or lexicon()
    found: list[RiskEvidence] = []
    seen: set[tuple[str, str, str]] = set()

    def note(kind: str, word: str, senses: list[Sense], **extra: object) -> None:
        for sense in senses:
            if (kind, word, sense.danger) not in seen:
                seen.add((kind, word, sense.danger))
                item = {"kind": kind, "word": word, "class": sense.danger, "via": sense.via}
                found.append(RiskEvidence(**item, **extra))  # type: ignore[typeddict-item]

    # The name: its last dotted part is the action ("payments.refund"); the rest is a domain.
    action = words(name.rsplit(".", 1)[-1])
    # Verb-first names put the action first ("send_invoice"); noun-first names, whose first
    # word is no verb, put it last ("invoiceSend", "account_deletion").
    noun_first = bool(action) and not lex.is_verb_like(action[0], first=True)
    for index, word in enumerate(action):
        last = index == len(action) - 1
        acting = word == action_word
        kind = "verb" if acting else "object"
        if acting or lex.is_verb_like(word, first=index == 0):
            note(kind, word, lex.verb(word) or lex.verb_compound(word))
        else:
            note(kind, word, lex.verb_compound(word))  # "writeoff": write off
        if (last or all(w.isdigit() for w in action[index + 1 :])) and lex.entry(word) is None:
            # Noun-first names: "account_deletion" (an act noun is the action).
            # An act noun last in a noun-first name whose action is not in the name is the
            # action ("accountDeletion": "Handles accounts.").
            acting_noun = noun_first and action_word not in action
            note("verb" if acting_noun else "object", word, lex.noun(word))
    note_phrases(lex, action, lambda word, senses: note("verb", word, senses))
    for variable in produces:
        parts = words(variable)
        for index, word in enumerate(parts):
            if _participle(lex, word):  # "deleted_file_id", "email_sent"
                note("effect", word, lex.verb(word), variable=variable)
            if all(later in IDENTIFIER_WORDS for later in parts[index + 1 :]):
                # A noun names the thing, which may be made or only computed ("payment").
                note("effect", word, lex.noun(word), variable=variable, noun=True)
    for permission in permissions:
        for word in words(permission):
            # A verb is a capability ("delete", "send"); a noun names a domain or scope
            # ("payments"), which the tool may only read: medium at most.
            listed = lex.entry(word)
            capability = listed is not None and listed[1].danger is not None
            verb = (
                lex.verb(word)
                if capability or (lex.has_verb(word) and not lex.noun_capable(word))
                else []
            )
            if verb:
                note("permission", word, verb, permission=permission)
            else:
                note("permission", word, lex.noun(word), permission=permission, noun=True)
    for sentence in SENTENCE.split(description):
        tagged = _main_positions(sentence)
        text = [word for word, _ in tagged]
        # A sentence that opens with a condition ("If …, sends …") is conditional throughout;
        # one that names another tool ("Send it with mail.send_message.") is about that tool.
        subordinate = bool(text) and (text[0] in SUBORDINATORS or bool(TOOL_NAME.search(sentence)))
        for index, (word, main) in enumerate(tagged):
            if word in SUBORDINATORS:
                subordinate = True
                continue
            if not lex.is_verb_like(word, first=main):
                continue
            previous = text[index - 1] if index else ""
            if _participle(lex, word) and previous not in AUXILIARIES:
                continue  # an adjective: "within allowed directories"
            if not main and (
                previous in DETERMINERS
                or (previous in BE and not _participle(lex, word))  # "may be empty"
                or word.endswith("ing")  # a gerund: "tabulate spending"
                or lex.noun_capable(word)  # "the most recent matching charge"
            ):
                continue
            senses = [sense for sense in lex.verb(word) if sense.dominant]
            if (subordinate or not main) and lex.entry(word) is None:
                senses = []  # in passing, only the reviewed lexicon's danger verbs count
            if senses:
                negated = bool(NEGATIONS & set(text[max(0, index - NEGATION_WINDOW) : index]))
                flags = {"negated": True} if negated else {}
                if subordinate or not main:
                    flags["subordinate"] = True
                note("description", word, senses, **flags)
        note_phrases(
            lex, text, lambda word, senses: note("description", word, senses, subordinate=True)
        )
    return found


def _main_positions(sentence: str) -> list[tuple[str, bool]]:
    """The words of a sentence, each with whether it stands where a main verb of the sentence
    would: first in the sentence or after a comma, or after "and", "or" or "then" (adverbs in
    -ly skipped: "or completely overwrite"). Elsewhere a danger word is only mentioned."""
    tagged: list[tuple[str, bool]] = []
    for inside, segment in enumerate(re.split(r"[()]", sentence)):
        for clause in segment.split(","):
            part = words(clause)
            for index, word in enumerate(part):
                before = index - 1
                while before >= 0 and part[before].endswith("ly"):
                    before -= 1
                main = before < 0 or part[before] in ("and", "or", "then")
                tagged.append((word, main and inside % 2 == 0))  # a parenthesis is an aside
    return tagged


def scope_evidence(name: str, description: str, lex: Lexicon) -> list[RiskEvidence]:
    """Scope words ("public", "permanently", "cannot be undone") in the name or description."""
    found: list[RiskEvidence] = []
    for sentence in SENTENCE.split(description) + [" ".join(words(name))]:
        text = words(sentence)
        for phrase in lex.vocabulary.scope:
            size = len(phrase)
            for start in range(len(text) - size + 1):
                if tuple(text[start : start + size]) == phrase:
                    negated = bool(NEGATIONS & set(text[max(0, start - NEGATION_WINDOW) : start]))
                    if not negated and all(item["word"] != " ".join(phrase) for item in found):
                        found.append(
                            {"kind": "scope", "word": " ".join(phrase),
                             "via": f"lexicon: scope ({lex.vocabulary.scope_reason})"}
                        )  # fmt: skip
    return found


def argument_signals(arguments: Iterable[str]) -> list[RiskEvidence]:
    """Arguments that say what a call reaches: a recipient, an amount, force, a role."""
    found: list[RiskEvidence] = []
    for argument in arguments:
        parts = words(argument)
        for word in parts:
            # Short words ("to", "cc") are signals only as the whole name ("to_currency" is not).
            if word in SIGNALS and (len(word) > 3 or parts == [word]):
                found.append(
                    {"kind": "signal", "word": argument, "class": SIGNALS[word],
                     "via": f"argument '{argument}'"}
                )  # fmt: skip
                break
    return found


def note_phrases(lex: Lexicon, text: list[str], note: Callable[[str, list[Sense]], None]) -> None:
    """Multi-word verbs (\"wipe out\") as consecutive words."""
    for parts, senses in lex.phrases.items():
        size = len(parts)
        for start in range(len(text) - size + 1):
            if tuple(text[start : start + size]) == parts:
                note(" ".join(parts), senses)


class Action(NamedTuple):
    word: str | None
    source: str  # "name", "description" or "" (none found)
    reading: WordReading | None


NO_ACTION = Action(None, "", None)


def action_of(name: str, description: str, lex: Lexicon | None = None) -> Action:
    """The tool's action word: where its name puts a verb, else the description's first word.

    A name word the description begins with is the action (``patch_file``: "Patch a code
    file."). Otherwise verb-first names put it first (``delete_file``, ``lookup_stock``),
    noun-first names last (``contractTerminate``), else the most verb-like word of the name. A
    name of nouns only (``employeeDirectory``) says what the tool is about, and its
    description, in the imperative or the third person ("Look through…"), says what it does.
    """
    lex = lex or lexicon()
    wn = lex._wn()
    parts = words(name.rsplit(".", 1)[-1])
    chosen: tuple[str, str] | None = None
    lead = words(description)[:1]
    said = {form for word in lead for form in wn.base_forms(word, "v")}
    confirmed = [word for word in parts if said & set(wn.base_forms(word, "v"))]
    known = [
        (index, word) for index, word in enumerate(parts)
        if lex.entry(word) is not None and not _modifier(word)
    ]  # fmt: skip
    lead_is_verb = bool(lead) and lex.has_verb(lead[0])
    lead_known = bool(lead) and lex.entry(lead[0]) is not None
    verbs_only = [(index, word) for index, word in known if not lex.noun_capable(word)]
    if not verbs_only and not confirmed and len(parts) > 1:
        # A noun-first name may end in the noun of its act ("source_link_retrieval").
        act = lex.nominalised(parts[-1])
        if act:
            verbs_only = [(len(parts) - 1, act)]
    if confirmed:
        chosen = (confirmed[0], "name")
    elif verbs_only:
        # A software verb that is not also a common noun: first ("send_invoice"), else last
        # ("contractTerminate").
        first = verbs_only[0]
        chosen = (first[1] if first[0] == 0 else verbs_only[-1][1], "name")
    elif (
        parts
        and lex.is_verb_like(parts[0], first=True)
        and not lex.noun_capable(parts[0])
        and not lead_known
    ):
        chosen = (parts[0], "name")  # a verb WordNet knows, first: "indemnify_claim"
    elif (known or lead_known) and lead_is_verb:
        # Only words as often nouns ("git_log", "order_status"), or none the lexicon knows:
        # the description, when it begins with a verb, says what the tool does ("leaveBalance":
        # "Tell how many days of leave…").
        chosen = (lead[0], "description")
    elif known:
        chosen = (known[0][1], "name")
    elif parts and _leads(lex, parts[0]):
        chosen = (parts[0], "name")
    elif (
        len(parts) > 1
        and not _modifier(parts[-1])
        and (
            lex.is_verb_like(parts[-1])
            or lex.compound(parts[-1])
            # A software verb that is mostly a noun ("log", "status") is the action of a
            # noun-first name only when the description does not begin with a verb.
            or (lex.entry(parts[-1]) is not None and not (lead and lex.has_verb(lead[0])))
        )
    ):
        chosen = (parts[-1], "name")
    else:
        scored = [(lex.verbness(word), word) for word in parts[1:-1] if not _modifier(word)]
        verb_like = [(score, word) for score, word in scored if score is not None]
        if verb_like:
            chosen = (max(verb_like, key=lambda pair: pair[0])[1], "name")
    if chosen is None:
        if lead and (lex.has_verb(lead[0]) or lex.compound(lead[0])):
            chosen = (lead[0], "description")
        elif parts and lex.has_verb(parts[0]):
            chosen = (parts[0], "name")
        elif parts and lex.has_verb(parts[-1]):
            chosen = (parts[-1], "name")
    if chosen is None:
        return NO_ACTION
    return Action(chosen[0], chosen[1], lex.word_reading(chosen[0]))


def description_lead(description: str, action: Action, lex: Lexicon | None = None) -> Action:
    """The verb a description begins with, when it is another word than the action."""
    lex = lex or lexicon()
    lead = words(description)[:1]
    if not lead or action.source == "description" or not lex.has_verb(lead[0]):
        return NO_ACTION
    wn = lex._wn()
    if action.word and set(wn.base_forms(lead[0], "v")) & set(wn.base_forms(action.word, "v")):
        return NO_ACTION
    return Action(lead[0], "description", lex.word_reading(lead[0]))


def _participle(lex: Lexicon, word: str) -> bool:
    """A past participle: regular ("deleted") or irregular ("sent", "written")."""
    if word.endswith("ed") and len(word) > 4:
        return True
    exceptions = lex._wn()._load_exceptions("v").get(word, ())
    return any(base != word for base in exceptions) and not word.endswith("s")


def _modifier(word: str) -> bool:
    """A participle or gerund in a name describes a thing ("git_diff_staged", "shopping_cart",
    "list_deleted_files"): it is never the name's action."""
    return word.endswith(("ing", "ed")) and len(word) > 4


def _leads(lex: Lexicon, word: str) -> bool:
    """Does a name start with this verb? Verb-first names use the base form: a first word in
    -ing or -ed modifies the noun after it ("shopping_cart", "billing_address")."""
    if word.endswith(("ing", "ed")) and not lex._wn().senses(word, "v"):
        return False
    if word in lex.vocabulary.words:  # a software verb first in a name ("list_commits")
        return True
    verbness = lex.verbness(word, first=True)
    return (verbness is not None and verbness > 0) or lex.compound(word) is not None


def arguments_of(tool: dict) -> list[str]:
    """The argument names of a tool's input schema (none where it has no properties)."""
    schema = tool.get("input_schema") or tool.get("inputSchema") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [str(key) for key in properties] if isinstance(properties, dict) else []


def namespace(name: str) -> str:
    """The part of a tool's name before its last dot ("" for a bare name)."""
    return name.rsplit(".", 1)[0] if "." in name else ""


# What an action word does to its object, by WordNet 3.0 sense (docs/learning.md, rule 2).
GIVE_SEED = "give.v.03"  # transfer possession of something to somebody ("return": give back)
OWNERSHIP_SEED = "transfer.v.05"  # cause to change ownership ("deliver": hand over)
MOVE_SEED = "move.v.02"  # cause to move or shift into a new position or place
PERSON_FILE = 18  # noun.person: agent, representative, customer, supervisor…
POSSESSION_FILE = 21  # noun.possession: money, funds, amount, payment, balance…
HYPERNYM_DEPTH = 8
# "Use this tool to search…": a description's preamble about the tool itself, not its act.
PREAMBLE = re.compile(
    r"^\s*(?:please\s+)?use\s+(?:this|the)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:tool|function|api|endpoint|command|method|action)\b[\s,]*(?:to\s+|for\s+)?",
    re.IGNORECASE,
)


def without_preamble(description: str) -> str:
    """The description from the words that say what the tool does: "Use this tool to search
    flights" says *search*; "Use this tool when…" leaves the condition, which names no act."""
    return PREAMBLE.sub("", description, count=1)


def _under(wn: WordNet, lemma: str, seed: str, *, pos: str = "v") -> bool:
    """Does one of the lemma's dominant senses lie under the seed sense (within
    ``HYPERNYM_DEPTH`` levels)?"""
    wanted = _seed(wn, seed).offset
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


def _object_words(name: str, description: str, action_word: str | None) -> list[str]:
    """What the action is done to: the name's other words and the description's first
    sentence."""
    first = SENTENCE.split(description.strip(), maxsplit=1)[0] if description.strip() else ""
    return [word for word in words(name.rsplit(".", 1)[-1]) + words(first) if word != action_word]


def _gives_back_bought(lex: Lexicon, item: Action, objects: list[str]) -> str | None:
    """A read word that also means *give back* ("return"), in its base form, done to what was
    delivered, bought or paid for ("return the delivered items") gives goods back for their
    money: a refund. Returns the participle that says so."""
    wn = lex._wn()
    if item.word is None or item.reading is None or item.reading.kind != INFORMS:
        return None
    if not wn.senses(item.word, "v") or not _under(wn, item.word, GIVE_SEED):
        return None  # "returns" (a description of an output) is not the base form
    for word in objects:
        if not _participle(lex, word):
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
    wn = lex._wn()
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
    annotations: dict | None = None, arguments: Iterable[str] = (), lex: Lexicon | None = None,
) -> Reading:  # fmt: skip
    """Rules 1–4 of docs/learning.md (*Risk suggestions*): the floor the words and hints set."""
    lex = lex or lexicon()
    produces, permissions, arguments = list(produces), list(permissions), list(arguments)
    description = without_preamble(description)
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
    evidence = danger_evidence(
        name=name, description=description, produces=produces, permissions=permissions,
        lex=lex, action_word=action.word,
    )  # fmt: skip
    readings, evidence = _object_senses(
        lex, readings, evidence, _object_words(name, description, action.word)
    )
    kind = _kind(*readings)
    for item in readings:
        assert item.reading is not None
        evidence.append(
            {"kind": "action", "word": item.word or "", "source": item.source,
             "reading": item.reading.kind, "via": item.reading.via}
        )  # fmt: skip
    scope = scope_evidence(name, description, lex)
    signals = argument_signals(arguments)
    evidence += scope + signals
    # What the tool does: its action, its effects' verbs, its permissions, and what its
    # description says in a main, affirmative clause.
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
    # A danger verb in a subordinate clause ("If …, sends a request"): medium at most. Words
    # of permission in passing describe the tool's own access ("grants you internet access",
    # "allowed directories"), not access it gives.
    mentioned = [
        item for item in evidence
        if item["kind"] == "description" and item.get("subordinate") and not item.get("negated")
        and item.get("class") != "permissions"
    ]  # fmt: skip
    if strong:
        floor, detail = "high", f"danger ({', '.join(strong)}) in what the tool does: high"
        confidence = 0.8
    elif scope and kind not in (INFORMS, NEUTRAL):
        floor = "high"
        detail = f"a change that reaches further ({scope[0]['word']}): high"
        confidence = 0.7
    elif kind == INFORMS and mentioned:
        floor = "medium"
        detail = f"a read whose description may also {mentioned[0]['word']}: medium"
        confidence = 0.5
    elif kind == INFORMS:
        floor, detail = "low", f"'{readings[0].word}' takes in or works out information: low"
        confidence = (
            0.8 if all(r.reading and r.reading.via.startswith("lexicon") for r in readings) else 0.6
        )
    else:
        floor = "medium"
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
    evidence.append({"kind": "rule", "detail": detail, "floor": floor})
    floor, confidence = _hints(annotations, floor, confidence, kind, evidence)
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
    return Reading(
        floor, confidence, evidence, action, kind, frozenset(features),
        _tokens(name, description, produces, permissions),
    )  # fmt: skip


def _hints(
    annotations: dict | None, floor: str, confidence: float, kind: str,
    evidence: list[RiskEvidence],
) -> tuple[str, float]:  # fmt: skip
    """Rule 3: the server author's declared hints, as evidence; contradictions are shown."""
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


def prepare_labels(labelled: Iterable[dict], lex: Lexicon | None = None) -> list[dict]:
    """Read the labelled tools once, for many suggestions (a refresh of a whole registry)."""
    lex = lex or lexicon()
    prepared, fresh = [], []
    for tool in labelled:
        if tool.get("risk") not in RISK_ORDER:
            continue
        if "features" in tool and "tokens" in tool:  # prepared already
            prepared.append(tool)
            continue
        name = tool.get("name", "")
        reading = read_tool(
            name=name, description=tool.get("description", ""),
            produces=tool.get("produces") or [], permissions=tool.get("permissions") or [],
            annotations=tool.get("annotations"), arguments=arguments_of(tool), lex=lex,
        )  # fmt: skip
        entry = {
            "name": name, "risk": tool["risk"], "tokens": reading.tokens,
            "verb": reading.action.word, "kind": reading.kind, "features": reading.features,
            "produces": list(tool.get("produces") or []),
            "requires": list(tool.get("requires") or []), "gated": list(tool.get("gated") or []),
        }  # fmt: skip
        prepared.append(entry)
        fresh.append(entry)
    # What the traces and the other contracts say of each tool read here (rule 5): outputs
    # other tools need, and preconditions calls failed without.
    required_by = _required_by(prepared) if fresh else {}
    for tool in fresh:
        tool["features"] = tool["features"] | _observed(
            tool["name"], tool["produces"], tool["gated"], required_by, []
        )
    return prepared


def _required_by(tools: Iterable[dict]) -> dict[str, set[str]]:
    """Which tools require each state variable."""
    found: dict[str, set[str]] = defaultdict(set)
    for tool in tools:
        for variable in tool.get("requires") or []:
            found[variable].add(tool["name"])
    return found


def _observed(
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


# The labels model (rule 5): naive Bayes over the readings' features, trained on the labels
# of the same namespace (or, with fewer than MODEL_MIN_LABELS there, of every labelled tool).
MODEL_MIN_LABELS = 4
MODEL_MIN_LEVEL = 2
MODEL_RAISE = 0.6
MODEL_MARGIN = 0.1
SMOOTHING = 1.0


def labels_model(tools: list[dict]) -> dict:
    """Per level: how many tools, and how many have each feature."""
    counts: dict[str, int] = dict.fromkeys(RISK_ORDER, 0)
    features: dict[str, dict[str, int]] = {risk: defaultdict(int) for risk in RISK_ORDER}
    for tool in tools:
        counts[tool["risk"]] += 1
        for feature in tool["features"]:
            features[tool["risk"]][feature] += 1
    seen = {feature for table in features.values() for feature in table}
    return {"counts": counts, "features": features, "seen": seen, "size": len(tools)}


def model_probabilities(model: dict, features: Iterable[str]) -> dict[str, float]:
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


def suggest_risk(
    *, name: str, description: str, produces: list[str], permissions: list[str],
    labelled: Iterable[dict], lex: Lexicon | None = None, annotations: dict | None = None,
    arguments: Iterable[str] = (), gated: Iterable[str] = (),
) -> RiskSuggestion:  # fmt: skip
    """The suggested level, its confidence and the evidence behind it (docs/learning.md).

    ``gated``: state variables the tool's calls failed without (``learning.inference``): a
    precondition guards it. Whether other labelled tools require what it ``produces`` is read
    from ``labelled``. Both are features of the labels model only (rule 5)."""
    lex = lex or lexicon()
    reading = read_tool(
        name=name, description=description, produces=produces, permissions=permissions,
        annotations=annotations, arguments=arguments, lex=lex,
    )  # fmt: skip
    floor, confidence, evidence = reading.floor, reading.confidence, reading.evidence
    if floor == RISK_ORDER[-1]:
        return RiskSuggestion(floor, round(confidence, 3), evidence)
    candidates = [tool for tool in prepare_labels(labelled, lex) if tool["name"] != name]
    observed = _observed(name, produces, gated, _required_by(candidates), evidence)
    reading = reading._replace(features=reading.features | observed)
    own_space = [tool for tool in candidates if namespace(tool["name"]) == namespace(name)]
    if len(own_space) >= MODEL_MIN_LABELS:
        candidates, scope = own_space, f"namespace '{namespace(name)}'" if namespace(name) else ""
    else:
        scope = ""
    scope = scope or "every labelled tool"
    risk = floor
    # The reviewers' labels of tools with the same action word: the closest few vote.
    word = reading.action.word
    same_verb = [tool for tool in candidates if word and tool["verb"] == word]
    declared_write = any(
        item["kind"] == "hint" and item["hint"] == "readOnlyHint" and not item["value"]
        for item in evidence
    )
    if reading.kind == NEUTRAL and same_verb and _mostly_low(same_verb) and not declared_write:
        risk = "low"
        evidence.append(
            {"kind": "rule", "floor": "low",
             "detail": f"'{word}' runs something, and reviewers rated "
                       f"{sum(tool['risk'] == 'low' for tool in same_verb)} of {len(same_verb)} "
                       f"tools with it low: low"}
        )  # fmt: skip
    if same_verb:
        voted, vote_confidence, neighbours = _vote(reading.tokens, same_verb, same_kind=True)
        evidence.append(
            {"kind": "neighbours", "basis": f"same action word '{word}'", "vote": voted,
             "tools": neighbours}
        )  # fmt: skip
        if RISK_ORDER.index(voted) > RISK_ORDER.index(risk):
            risk, confidence = voted, vote_confidence
    # Without such tools, the model over every feature, trained on the namespace's labels.
    if not same_verb and len(candidates) >= MODEL_MIN_LABELS and risk != RISK_ORDER[-1]:
        model = labels_model(candidates)
        probabilities = model_probabilities(model, reading.features)
        for index in reversed(range(RISK_ORDER.index(risk) + 1, len(RISK_ORDER))):
            level = RISK_ORDER[index]
            # Reviewers here gave tools of the same kind (reads, changes…) this level or above.
            alike = sum(
                1 for tool in candidates
                if tool["kind"] == reading.kind and tool["risk"] in RISK_ORDER[index:]
            )  # fmt: skip
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


def _mostly_low(tools: list[dict]) -> bool:
    """More than half rated low (a tie goes up)."""
    return sum(tool["risk"] == "low" for tool in tools) * 2 > len(tools)


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
