"""The lexicon of danger: seed senses, the reviewed verb lexicon and WordNet read together.

The reviewed lexicon is ``learning/data/verbs.toml`` (an operator's file may go over it); the
seeds are grown through WordNet (``._wordnet``) into danger verbs, act nouns and phrases, and
any other verb is read by walking up its senses to the seeds.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ._names import words
from ._wordnet import ACTION_NOUN_FILES, Synset, WordNet, wordnet

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
VERBS_FILE = Path(__file__).resolve().parent.parent / "data" / "verbs.toml"
GROUP_KINDS = {"read": INFORMS, "neutral": NEUTRAL, "change": CHANGES}
# Lists of words that say something of a word rather than place it (verbs.toml says what).
ATTRIBUTES = ("scope", "nouns", "alters")


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

    def add(self, table: dict[Any, list[Sense]], key: Any, sense: Sense) -> None:
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
        wn = self.wn()
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
        for form in self.wn().base_forms(word, "v"):
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
            for number, offset in enumerate(self.wn().senses(lemma, "v")[:DOMINANT_SENSES], 1):
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
        wn = self.wn()
        for form in wn.base_forms(word, "n"):
            if form in self.nouns:
                return self.nouns[form]
        return []

    def sense_reading(self, offset: int) -> SenseReading:
        """Walk up the hypernyms of one verb sense: which seeds and files lie above it."""
        if offset in self._senses:
            return self._senses[offset]
        wn = self.wn()
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
        wn = self.wn()
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
        wn = self.wn()
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
        wn = self.wn()
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
        wn = self.wn()
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
        wn = self.wn()
        return self.entry(word) is not None or any(
            wn.senses(form, "v") for form in wn.base_forms(word, "v")
        )

    def wn(self) -> WordNet:
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
            table[seed_synset(wn, name).offset] = name
    for danger, names in seeds.items():
        for name in names:
            lemma, pos, number = name.rsplit(".", 2)
            seed = seed_synset(wn, name)
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


def seed_synset(wn: WordNet, name: str) -> Synset:
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


def lexicon(extra: Path | None = None) -> Lexicon:
    """The reviewed lexicon, with an operator's file over it when one is named (the
    ``RISK_VERBS_FILE`` setting, passed by ``learning.selectors.risk_lexicon``): built once
    per process and file, on first use (about 300 synsets read; see docs/benchmarks.md)."""
    return _lexicon_of((extra,) if extra is not None else ())


@cache
def _lexicon_of(extras: tuple[Path, ...]) -> Lexicon:
    return lexicon_build(wordnet(), vocabulary=vocabulary_load(VERBS_FILE, *extras))
