"""Risk suggestions that never under-rate danger (pure: no Django, no network).

A suggestion reads the evidence a reviewer would read, and returns it:

- **Words of danger** in the tool's name, its description, its effects (produced variables)
  and its permissions, found through WordNet (``learning.lexicon``): a few seed senses per
  danger class, chosen by meaning (``SEEDS``). A word is dangerous when one of its
  ``DOMINANT_SENSES`` most frequent senses is a seed or lies at most ``DANGER_DEPTH`` hypernym
  levels below one (``reimburse`` → ``refund`` → ``pay``), or is a synonym, a hyponym or an act
  noun of a seed sense (``wipe out``, ``revoke``, ``payment``).
- **What the action word is**: the tool's action (``ACTION``: from the name, else the first
  word of the description) read through its most frequent senses. It *informs* when its first
  sense perceives, thinks, searches or looks up (``INFORMATION_SEEDS``, the lexicographer files
  ``verb.perception`` and ``verb.cognition``); it *changes* things when any dominant sense lies
  under ``change``/``create``/``record`` (``CHANGE_SEEDS``) or in ``verb.change``
  (``truncate`` → ``shorten`` → ``reduce`` → ``decrease`` → ``change``); else it *acts* on
  something (moves, tears, joins: ``shred``, ``flip``), or the lexicon cannot place it.
- **The labels reviewers gave similar tools**: the closest ``NEIGHBOURS`` labelled tools vote,
  weighted by likeness (Jaccard of name, description, effect and permission words), among the
  tools with the same action word, else the tools of the same kind.

The rules (docs/architecture.md, *Risk suggestions*, says why they generalise):

1. The evidence sets a floor. Danger in the name, an effect's verb or a permission: the
   class's level (``high``). Danger only in the description, a negation or an effect's noun:
   ``medium``. No danger: ``low`` only when the action word informs (its first sense, or,
   when an information sense is dominant but not first, when reviewers labelled most tools
   with the same action word ``low``); an action word that changes or acts on things, or
   one the lexicon cannot place, is at least ``medium``.
2. The neighbours vote, and their vote can only raise the floor: ``max(floor, vote)``.
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
CLASS_LEVEL = dict.fromkeys(SEEDS, "high")
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
KIND_ORDER = (INFORMS, ACTS, UNKNOWN, CHANGES, DANGER)
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


@dataclass
class Lexicon:
    """Danger words by class: verbs (with the sense that makes them dangerous), act nouns,
    and phrases (multi-word verbs, matched as consecutive words); and the seed senses, for
    reading any other verb by walking up from its senses."""

    verbs: dict[str, list[Sense]] = field(default_factory=dict)
    nouns: dict[str, list[Sense]] = field(default_factory=dict)
    phrases: dict[tuple[str, ...], list[Sense]] = field(default_factory=dict)
    wordnet: WordNet | None = None
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
        """The danger senses of a verb: grown from the seeds, else found walking up."""
        wn = self._wn()
        grown = next((self.verbs[form] for form in wn.base_forms(word, "v") if form in self.verbs),
                     [])  # fmt: skip
        lemma = next((form for form in wn.base_forms(word, "v") if wn.senses(form, "v")), None)
        if lemma is None:
            return grown
        known = {sense.danger for sense in grown}
        return grown + [sense for sense in self.climbed(lemma) if sense.danger not in known]

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

    def has_verb(self, word: str) -> bool:
        wn = self._wn()
        return any(wn.senses(form, "v") for form in wn.base_forms(word, "v"))

    def _wn(self) -> WordNet:
        assert self.wordnet is not None
        return self.wordnet


def lexicon_build(wn: WordNet, seeds: dict[str, tuple[str, ...]] = SEEDS) -> Lexicon:
    """Grow the seed senses through WordNet: synonyms, hyponyms, derived act nouns."""
    lexicon = Lexicon(wordnet=wn)
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
            note("verb", word, lex.verb(word) or lex.verb_compound(word))
        else:
            note("verb", word, lex.verb_compound(word))  # "writeoff": write off
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
    if confirmed:
        chosen = (confirmed[0], "name")
    elif parts and _leads(lex, parts[0]):
        chosen = (parts[0], "name")
    elif len(parts) > 1 and (lex.is_verb_like(parts[-1]) or lex.compound(parts[-1])):
        chosen = (parts[-1], "name")
    else:
        scored = [(lex.verbness(word), word) for word in parts[1:-1]]
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


def _leads(lex: Lexicon, word: str) -> bool:
    """Does a name start with this verb? Verb-first names use the base form: a first word in
    -ing or -ed modifies the noun after it ("shopping_cart", "billing_address")."""
    if word.endswith(("ing", "ed")) and not lex._wn().senses(word, "v"):
        return False
    verbness = lex.verbness(word, first=True)
    return (verbness is not None and verbness > 0) or lex.compound(word) is not None


def action_verb(name: str, lex: Lexicon | None = None) -> str | None:
    """The action word of a name alone (``maps_read_x`` -> ``read``)."""
    action = action_of(name, "", lex)
    return action.word if action.source == "name" else None


def prepare_labels(labelled: Iterable[dict], lex: Lexicon | None = None) -> list[dict]:
    """Read the labelled tools once, for many suggestions (a refresh of a whole registry)."""
    lex = lex or lexicon()
    prepared = []
    for tool in labelled:
        if tool.get("risk") not in RISK_ORDER:
            continue
        if "tokens" in tool and "classes" in tool and "kind" in tool:  # prepared already
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
        action = action_of(name, description, lex)
        prepared.append(
            {
                "name": name,
                "risk": tool["risk"],
                "tokens": _tokens(name, description, produces, permissions),
                "verb": action.word,
                "kind": _kind(action, description_lead(description, action, lex)),
                "classes": {item["class"] for item in evidence if not item.get("negated")},
            }
        )
    return prepared


def _kind(*actions: Action) -> str:
    """What the tool's action words say together: it informs only if every one informs."""
    kinds = [action.reading.kind for action in actions if action.reading is not None]
    if not kinds:
        return UNKNOWN
    return max(kinds, key=KIND_ORDER.index)


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
    # What the tool does is its name, the verbs of its effects and its permissions; a
    # description may mention what it does not do and an effect's noun may only be computed
    # ("mortgage_payment"), so alone they set the floor, not the class level.
    strong = {
        item["class"] for item in evidence
        if item["kind"] != "description" and not item.get("negated") and not item.get("noun")
    }  # fmt: skip
    action = action_of(name, description, lex)
    lead = description_lead(description, action, lex)
    actions = [item for item in (action, lead) if item.reading is not None]
    for item in actions:
        assert item.reading is not None
        evidence.append(
            {"kind": "action", "word": item.word, "source": item.source,
             "reading": item.reading.kind, "via": item.reading.via}
        )  # fmt: skip
    own = _tokens(name, description, produces, permissions)
    candidates = [tool for tool in prepare_labels(labelled, lex) if tool["name"] != name]
    same_verb = [tool for tool in candidates if action.word and tool["verb"] == action.word]

    def benign(item: Action) -> bool:
        """Rule 1: informs in its first sense, or in a dominant one that reviewers' labels of
        tools with the same action word pick out."""
        reading = item.reading
        if reading is None or reading.kind != INFORMS:
            return False
        return reading.first or (item is action and bool(same_verb) and _mostly_low(same_verb))

    if strong:
        floor = max((CLASS_LEVEL[danger] for danger in strong), key=RISK_ORDER.index)
        detail = f"danger ({', '.join(sorted(strong))}) in what the tool does: {floor}"
    elif classes or any(item.get("class") for item in evidence):
        floor = FLOOR
        detail = "danger named only in the description or an effect's noun: at least medium"
    elif actions and all(benign(item) for item in actions):
        floor = "low"
        if all(item.reading is not None and item.reading.first for item in actions):
            detail = f"'{action.word}' takes in or works out information: low is allowed"
        else:
            detail = (
                f"'{action.word}' can take in information, and reviewers rated "
                f"{sum(tool['risk'] == 'low' for tool in same_verb)} of {len(same_verb)} "
                f"tools with it low: low is allowed"
            )
    else:
        floor = FLOOR
        blocking = next((item for item in actions if not benign(item)), None)
        reading = blocking.reading if blocking is not None else None
        detail = (
            "no action word the lexicon can place: at least medium"
            if blocking is None or reading is None
            else {
                INFORMS: f"'{blocking.word}' informs only in a rarer sense: at least medium",
                CHANGES: f"'{blocking.word}' changes things: at least medium",
                ACTS: f"'{blocking.word}' acts on something: at least medium",
                DANGER: f"'{blocking.word}' can be dangerous: at least medium",
            }.get(reading.kind, f"'{blocking.word}' is not a verb WordNet knows: at least medium")
        )
    evidence.append({"kind": "rule", "detail": detail, "floor": floor})
    if floor == RISK_ORDER[-1]:
        return RiskSuggestion(floor, 0.6, evidence)

    # The reviewers' labels of similar tools: the same action word, else the same kind.
    if same_verb:
        pool, basis = same_verb, f"same action word '{action.word}'"
    elif classes:
        pool = [tool for tool in candidates if tool["classes"] & classes]
        basis = "share a danger class"
    elif _kind(action, lead) == INFORMS:
        pool = [tool for tool in candidates if not tool["classes"] and tool["kind"] == INFORMS]
        basis = "take in or work out information, no danger"
    else:
        # A tool that changes or acts on things is like the other tools that do something:
        # those that change, act, or show danger (a deletion is a change too).
        pool = [tool for tool in candidates if tool["classes"] or tool["kind"] != INFORMS]
        basis = "change or act on things"
    if not pool:
        pool, basis = candidates, "closest labelled tools"
    if not pool:
        evidence.append({"kind": "rule", "detail": "no labelled tool to compare with"})
        return RiskSuggestion(floor, 0.3 if floor == FLOOR else 0.0, evidence)
    voted, confidence, neighbours = _vote(own, pool, same_kind=pool is not candidates)
    evidence.append({"kind": "neighbours", "basis": basis, "vote": voted, "tools": neighbours})
    risk = _max(voted, floor)
    return RiskSuggestion(risk, round(confidence if risk == voted else 0.3, 3), evidence)


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
