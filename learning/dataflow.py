"""Data flow found in the values of one trace (pure: no Django).

A runtime rarely says what the task state is. It sends calls: a tool, its arguments, its
output, whether it failed, and sometimes the conversation. ``trace_reconstruct`` reads one
trace's steps in order and finds where each argument value came from:

- values seen earlier in the same trace are indexed by a normalised key (a hash lookup): the
  outputs of earlier successful calls at any depth (objects, lists, a bare string answer,
  identifier-like tokens inside text), the user's messages (words, identifier-like tokens and
  two- and three-word phrases), the state a runtime sent, and earlier calls' arguments;
- an argument value (at any depth) whose key was seen before the call *flowed*: its variable is
  a requirement of the tool. The variable is named from the argument that receives the value
  (``variable_name``: camelCase to snake_case, a list's items singular, the vocabulary's
  aliases), or is the state variable the runtime named;
- a value is a value of every variable it flowed into, and the output path it came from
  (``reservations[]``, ``flights[].flight_number``) names the variable for every value at that
  path in the trace: the producer's effect is the variable, and the path a candidate alias. An
  output field already named as a known variable (the vocabulary, or a name that flowed in this
  trace) holds values of it too, where a name alone can say so (``_field_variable``): not an
  object's key, a number outside an id-named field, text beside a flag or below the output's
  top, nor, by the vocabulary alone, a field of a report (an output repeating the call's
  arguments). So a declared vocabulary names what an empty one would find, and adds little;
- a variable holds every value known so far in the trace (a set). A step *produces* a variable
  when its output brings a value of it that the trace did not know (so a second search that
  finds new flights produces ``flight_number`` again, merge ``append``); an output repeating the
  call's own argument values (an echo) brings nothing; a quantity (a JSON number outside an
  id-named field) is an effect only of the variable its own field names: one passed on under
  another name (an exchanged value set as a budget) is the caller's choice. A state the
  runtime sent brings a variable absent before the call and present after it, unless it holds
  the call's own arguments, and one holding a value the trace did not know; a variable the
  state after sets to the output's field of that name (what the OTLP receiver assembles) is
  judged as that field.

Values too common to mean anything are never matched (``trivial``): null, booleans, empty
values, numbers of fewer than ``MIN_DIGITS`` digits, strings shorter than ``MIN_LENGTH``, and a
single word of at most ``COMMON_WORD_LENGTH`` letters that an English dictionary (WordNet's
lemmas, regular endings stripped) or the short list of English function words knows. Values
of a state the runtime sent, words the user put in quotes (``'temp'``) or capitalised inside a
sentence (a name: ``Michael``) and the items of an output's listing (``["document", "temp"]``)
are matched by the looser rule inference always had (three characters, four digits): the
runtime, the user or the listing named them. A whole number of two or three digits an argument
takes matches a number the user wrote (``30 gallons``) or an earlier output's field of the same
name (``distance: 980`` into ``distance``), never another output's or another call's: the user
said it, or name and value agree. An identifier is never too common: a small whole number in a
field named as an id (``id``, ``ticket_id``, ``tweetId``) matches the same number in another
id-named field only.

Work and memory are linear in the trace and capped per trace: at most ``MAX_VALUES`` distinct
values are indexed, ``MAX_LEAVES`` leaves read, containers followed ``MAX_DEPTH`` deep, strings
read up to ``MAX_STRING`` characters and ``MAX_VARIABLES`` variables named; past a cap, what
was found stands and the rest is not read.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any, TypedDict

from .risk import LexiconMissing, data_directory

MIN_LENGTH = 3
MIN_DIGITS = 4
COMMON_WORD_LENGTH = 8
MAX_VALUES = 5_000
MAX_LEAVES = 50_000
MAX_DEPTH = 20
MAX_STRING = 2_000
MAX_VARIABLES = 200
MAX_PHRASE = 3  # words in a phrase of a user message that an argument may repeat
MAX_PHRASES = 20_000  # words and phrases of the user's messages indexed per trace
MAX_NEW_PATHS = 50  # output paths per step said to have brought new values
# English function words WordNet does not list (it holds nouns, verbs, adjectives, adverbs).
FUNCTION_WORDS = frozenset(
    "a an the and or but nor not no yes none all any some each every both either neither this "
    "that these those it its he she they them their his her our your my we you me us i of to in "
    "on at by for from with without into onto over under about as than then so if else when "
    "where which who whom whose what why how there here is are was were be been being do does "
    "did done has have had can could may might must shall should will would ok okay null nil "
    "true false n/a na".split()
)
IDENTIFIER = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_.@#:/+-]*[A-Za-z0-9]")
WORD = re.compile(r"[^\W_]+(?:[-'.@_][^\W_]+)*")
# A word that may begin with a capital (not a digit nor a-z): the few a name can be.
CAPITALISED = re.compile(r"(?<![\w'.@-])[^\W\d_a-z][^\W_]*(?:[-'.@_][^\W_]+)*")
# An object key holding a run of three digits is data (``credit_card_4421``), not a field name:
# it is a value too, and its path is written ``{}``, like a list's ``[]``.
DATA_KEY = re.compile(r"[0-9]{3}")
# Text between quotes; an apostrophe inside a word (Kelly's) opens nothing.
QUOTED = re.compile(
    r"(?<!\w)'([^'\n]{1,200})'(?!\w)|\"([^\"\n]{1,200})\"|`([^`\n]{1,200})`|“([^”\n]{1,200})”"
)
OPENING = " \t\"'([“‘-"  # what may stand between a sentence's end and its first word
ID_KEY = "id#"  # a small number in an id-named field: its key, which no other value can take
SAID_KEY = "said#"  # a small number in an argument: matched only by a number the user wrote
# A small number in an output's field: its key holds the field's name, so only an argument of
# the same name matches it (``named#distance#980``).
NAMED_KEY = "named#"
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
USER = "user message"


class StepFlow(TypedDict):
    """What one step's reconstruction says, read by ``learning.aggregates.aggregate_add``."""

    present: list[str]  # variables with a value known before the call
    flows: list[tuple[str, str, str]]  # (variable, argument path, origin)
    effects: list[tuple[str, str]]  # (variable, output path) brought new values
    # Output paths that brought a value the trace did not know, whatever variable it is: a
    # path that fed a variable in other traces brought that variable here too (inference).
    new_paths: list[str]


@dataclass
class Reconstruction:
    steps: list[StepFlow] = field(default_factory=list)
    # (step, tool, output field name, variable, example value): output fields that fed a
    # variable under another name, candidate aliases for a person to accept
    candidates: list[tuple[int, str, str, str, Any]] = field(default_factory=list)
    # caps reached while reading this trace (empty: it was read whole)
    capped: set[str] = field(default_factory=set)


@lru_cache(maxsize=1)
def _english_words() -> frozenset[str]:
    """WordNet's one-word lemmas of at most ``COMMON_WORD_LENGTH`` letters, read once: a set
    lookup per word, so a trace full of made-up words costs no file reads."""
    try:
        directory = data_directory()
    except LexiconMissing:  # without WordNet, only function words count as everyday
        return frozenset()
    words: set[str] = set()
    for pos in ("noun", "verb", "adj", "adv"):
        with open(directory / f"index.{pos}", encoding="utf-8") as handle:
            for line in handle:
                lemma = line.split(" ", 1)[0]
                if len(lemma) <= COMMON_WORD_LENGTH and lemma.isalpha():
                    words.add(lemma)
    return frozenset(words)


# Inflections stripped to find a word's base form: flights, cancelled, booking, cheaper.
SUFFIXES = (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""),
            ("ing", "e"), ("er", ""), ("est", ""))  # fmt: skip


def common_word(word: str) -> bool:
    """Whether a lowercase word is everyday English: a function word or a WordNet lemma, or
    one inflected by a regular ending."""
    if word in FUNCTION_WORDS:
        return True
    words = _english_words()
    if word in words:
        return True
    for suffix, ending in SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            base = word[: -len(suffix)] + ending
            if base in words or (ending == "" and base[-1:] == base[-2:-1] and base[:-1] in words):
                return True
    return False


def value_key(value: Any) -> str | None:
    """The key a scalar is indexed and matched by: numbers as their decimal text (so 12345
    matches "12345"), strings stripped and casefolded; None for what cannot be a value."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        text = value[:MAX_STRING].strip().casefold()
        return text or None
    return None


def trivial(key: str | None, *, declared: bool = False) -> bool:
    """Whether a value is too common for a match to mean a flow (see the module's rule);
    ``declared`` values (a state the runtime sent) need only the length and digit rules."""
    if not key:
        return True
    if key[0] in NUMBER_START:
        digits = key.lstrip("-").replace(".", "", 1)
        if digits.isdigit():
            return len(digits) < MIN_DIGITS
    if len(key) < MIN_LENGTH:
        return True
    if declared or len(key) > COMMON_WORD_LENGTH:
        return False
    return key.isalpha() and common_word(key)


NUMBER_START = frozenset("-.0123456789")


def variable_name(name: str, *, listed: bool, aliases: dict[str, str]) -> str:
    """The canonical variable an argument (or output field) named ``name`` stands for."""
    if name in aliases:
        return aliases[name]
    snake = _snake(name, listed)
    return aliases.get(snake, snake)


@lru_cache(maxsize=20_000)
def _snake(name: str, listed: bool) -> str:
    snake = CAMEL.sub("_", name).replace("-", "_").replace(" ", "_").lower().strip("_")
    return singular(snake) if listed else snake


def singular(name: str) -> str:
    """``item_ids`` → ``item_id``, ``categories`` → ``category``, ``boxes`` → ``box``."""
    head, _, last = name.rpartition("_")
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif last.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")) and len(last) > 2:
        last = last[:-1]
    return f"{head}_{last}" if head else last


def user_texts(messages: Any) -> list[str]:
    """The text of the user's messages in a conversation (``{"role", "content"}`` objects, a
    content being a string or a list of parts holding ``text`` or ``content``)."""
    texts: list[str] = []
    if not isinstance(messages, list):
        return texts
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content", message.get("parts"))
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict):
                    text = part.get("text", part.get("content"))
                    if isinstance(text, str):
                        texts.append(text)
    return texts


@dataclass(slots=True)
class _Leaf:
    key: str
    path: str
    name: str  # the field holding it ("" at the root)
    listed: bool  # an item of a list under ``name``
    keyed: bool = False  # an object's key (``USR002`` in ``messages{}``), not a value of ``name``
    flag: bool = False  # an everyday value that is a boolean
    quantity: bool = False  # a JSON number (a string of digits is a code: a zip, a card)


class _Budget:
    def __init__(self) -> None:
        self.leaves = MAX_LEAVES
        self.capped: set[str] = set()
        # Reading outputs: an everyday value is kept once per path, for its field's name
        # (``declared``: values are judged by the state's looser rule, for arguments and states)
        self.declared = True
        self.everyday_paths: set[str] = set()
        self.arguments = False  # reading a call's arguments


def _leaves(value: Any, root: str, budget: _Budget, *, text: bool) -> Iterator[_Leaf]:
    """The scalars of ``value`` with their paths; strings that are text (with spaces) also give
    their identifier-like tokens when ``text``. Iterative: depth costs no recursion. Scalars of
    a container come before the containers nested in it. Yielded one by one, so a caller that
    keeps only what matches holds no leaf it does not need: memory stays in proportion to what
    matched, not to the trace."""
    found: list[_Leaf] = []
    if not isinstance(value, dict | list):
        _scalar(value, root, "", False, budget, text, found)
        yield from found
        return
    pending: list[tuple[Any, str, str, bool, int]] = [(value, root, "", False, 0)]
    while pending:
        item, path, name, listed, depth = pending.pop()
        if depth >= MAX_DEPTH:
            budget.capped.add("depth")
            continue
        if isinstance(item, dict):
            keyed_path = f"{path}{{}}"  # one string for every id-like key of this object
            for key, child in item.items():
                if isinstance(key, str) and DATA_KEY.search(key):  # ids as keys: values too
                    child_path, child_name, child_listed = keyed_path, name, True
                    more = _scalar(key, child_path, name, True, budget, text, found)
                    for leaf in found:
                        leaf.keyed = True
                    yield from found
                    found.clear()
                    if not more:
                        return
                else:
                    child_path, child_name, child_listed = f"{path}.{key}", str(key), False
                if isinstance(child, dict | list):
                    pending.append((child, child_path, child_name, child_listed, depth + 1))
                else:
                    more = _scalar(child, child_path, child_name, child_listed, budget, text, found)
                    yield from found
                    found.clear()
                    if not more:
                        return
        else:
            child_path = f"{path}[]"
            for child in item:
                if isinstance(child, dict | list):
                    pending.append((child, child_path, name, True, depth + 1))
                else:
                    more = _scalar(child, child_path, name, True, budget, text, found)
                    yield from found
                    found.clear()
                    if not more:
                        return


def _scalar(
    item: Any, path: str, name: str, listed: bool, budget: _Budget, text: bool, found: list[_Leaf]
) -> bool:
    """Add one scalar (and its text's identifiers) to ``found``; False once the budget is spent."""
    if budget.leaves <= 0:
        budget.capped.add("leaves")
        return False
    budget.leaves -= 1
    key = item[:MAX_STRING].strip().casefold() or None if type(item) is str else value_key(item)
    if key and key.isdigit() and len(key) < MIN_DIGITS and type(item) is not str and _id_name(name):
        key = ID_KEY + key  # a small identifier, matched between id-named fields only
    elif key and _small_number(key) and type(item) is not str:
        if budget.arguments:
            key = SAID_KEY + key
        elif not budget.declared and name and not listed:
            key = _named_number(name, listed, key)
    if trivial(key, declared=budget.declared or listed):
        # Never matched; an output's flag or everyday word may still have a named field (once
        # per path: a list of 25,000 zeros is one field).
        # A number is not kept: by its field's name alone it is a measurement (see
        # ``_field_variable``).
        if (
            not budget.declared
            and name
            and item is not None
            and not (key and _numeric(key))
            and path not in budget.everyday_paths
        ):
            budget.everyday_paths.add(path)
            found.append(_Leaf("", path, name, listed, flag=type(item) is bool))
        return True
    assert key is not None
    found.append(_Leaf(key, path, name, listed, quantity=type(item) in (int, float)))
    if text and " " in key and isinstance(item, str):
        for token in IDENTIFIER.findall(item[:MAX_STRING]):
            token_key = token.casefold()
            if token_key != key and _identifier_like(token):
                found.append(_Leaf(token_key, f"{path} (in text)", name, listed))
    return True


def _id_name(name: str) -> bool:
    """Whether a field's name says it holds identifiers: ``id``, ``ids``, ``ticket_id``,
    ``tweetId``."""
    snake = _snake(name, True) if name else ""
    return snake == "id" or snake.endswith("_id")


def _quoted(text: str) -> Iterator[str]:
    """What the user put between quotes (``'temp'``, "Q3 plan", `main`), casefolded; and the
    names the user wrote as names: a capitalised word inside a sentence (``Michael``,
    ``Thompson``)."""
    text = text[: MAX_STRING * 4]
    for match in QUOTED.finditer(text):
        quoted = next(group for group in match.groups() if group is not None)
        key = quoted.strip().casefold()
        if key:
            yield key
    for match in CAPITALISED.finditer(text):
        word = match.group()
        if len(word) < MIN_LENGTH or not (word[0].isupper() and word[1:].islower()):
            continue  # a word in capitals is as often a setting (``START``) as a code
        if not _sentence_start(text, match.start()):
            yield word.casefold()


def _sentence_start(text: str, start: int) -> bool:
    """Whether only spaces and opening punctuation lie between the text's beginning or a
    sentence's end and ``start`` (a few characters looked back: bounded work per word)."""
    head = text[max(0, start - 8) : start].rstrip(OPENING)
    if head:
        return head[-1] in ".!?:;\n"
    return start <= 8


def _identifier_like(token: str) -> bool:
    """A token of free text that looks like an identifier: letters and digits mixed, a long
    number, or a word with ``_``, ``@`` or ``#`` in it."""
    has_digit = any(char.isdigit() for char in token)
    has_alpha = any(char.isalpha() for char in token)
    if has_digit and has_alpha:
        return len(token) >= 4
    if has_digit:
        return sum(char.isdigit() for char in token) >= MIN_DIGITS
    return any(char in "_@#" for char in token) and len(token) >= 4


def _phrases(text: str) -> Iterator[str]:
    """The words of a user's message, and its phrases of two and three words, casefolded."""
    words = [word.casefold() for word in WORD.findall(text[: MAX_STRING * 4])]
    for size in range(1, MAX_PHRASE + 1):
        for start in range(len(words) - size + 1):
            yield " ".join(words[start : start + size])
    for token in IDENTIFIER.findall(text[: MAX_STRING * 4]):
        yield token.casefold()


def _phrase_key(key: str) -> str:
    """An argument's key as the user's words would give it (punctuation between words gone)."""
    return " ".join(WORD.findall(key))


Origin = tuple[int, str, str]  # (known from step, tool, path)


def trace_reconstruct(
    steps: Iterable[dict[str, Any]],
    *,
    aliases: dict[str, str] | None = None,
    vocabulary: frozenset[str] | None = None,
) -> Reconstruction:
    """The data flow of one trace's steps, in order.

    Each step is a dict with ``tool``, ``args``, ``status`` (``success``/``error``), ``output``
    and optionally ``state_before``/``state_after`` (variable → value, canonical names) and
    ``user_texts`` (the user's messages so far, ``user_texts()``). ``aliases`` maps every name
    the vocabulary knows to its canonical name; ``vocabulary`` (its canonical names,
    ``vocabulary_names(aliases)``) may be given once for many traces.

    Two phases: the steps are read in order (``_Reader.read_step``: what the user said, the
    state sent, where each argument's value came from, what the output held), then the
    variables are named and each step's effects found (``_Reader.reconstruction``).
    """
    aliases = aliases or {}
    reader = _Reader(aliases, vocabulary_names(aliases) if vocabulary is None else vocabulary)
    for number, step in enumerate(steps):
        reader.read_step(number, step)
    return reader.reconstruction()


class _Reader:
    """One trace's reading: what it knew, step by step, and where each value came from."""

    def __init__(self, aliases: dict[str, str], vocabulary: frozenset[str]) -> None:
        self.aliases, self.vocabulary = aliases, vocabulary
        self.budget = _Budget()
        self.index: dict[str, Origin] = {}  # value key -> where the trace first held it
        self.said: dict[str, int] = {}  # user's words and phrases -> the step they were known at
        self.declared_as: dict[str, str] = {}  # value key -> the state variable a runtime named
        self.quoted: set[str] = set()  # what the user put in quotes: named, however everyday
        self.listed_words: set[str] = set()  # everyday words that were items of a listing
        self.seen_texts: set[int] = set()
        # Per value key, the variables it flowed into; per (tool, output path), the variables
        # its values fed.
        self.key_variables: dict[str, tuple[str, ...]] = {}  # most keys feed one variable
        self.key_known: dict[str, int] = {}  # value key -> the step it was first known at
        self.path_variables: dict[tuple[str, str], set[str]] = {}
        self.flows_by_step: list[list[tuple[str, str, str]]] = []
        self.arguments_by_step: list[set[str]] = []
        self.outputs_by_step: list[list[_Leaf]] = []
        self.reports: set[int] = set()  # steps whose output repeats one of their arguments
        self.statuses: set[int] = set()  # steps whose output holds a flag at its top
        self.vocabulary_effects: list[tuple[int, str, str]] = []  # (step, variable, path)
        # (step, variable, a value was added, only if the variable flowed in the trace)
        self.declared: list[tuple[int, str, bool, bool]] = []
        self.tools: list[str] = []
        self.flowing: set[str] = set()
        self.stated: set[str] = set()

    def remember(self, key: str, origin: Origin) -> None:
        if key in self.index:
            return
        if len(self.index) >= MAX_VALUES:
            self.budget.capped.add("values")
            return
        self.index[key] = origin

    # ---------------------------------------------------------------- reading, step by step
    def read_step(self, number: int, step: dict[str, Any]) -> None:
        tool = str(step.get("tool") or "")
        self.tools.append(tool)
        self.read_user(number, step.get("user_texts") or ())
        before = step.get("state_before") or {}
        self.read_state(before, number, None)
        args = step.get("args") or {}
        # The variables the call's own arguments are named as (the first MAX_VARIABLES).
        arguments = {
            variable_name(name, listed=isinstance(value, list), aliases=self.aliases)
            for name, value in islice(args.items() if isinstance(args, dict) else (), MAX_VARIABLES)
            if isinstance(name, str)
        }
        argument_keys = self.read_arguments(number, tool, args)
        self.arguments_by_step.append(arguments)
        outputs: list[_Leaf] = []
        if step.get("status") == "success" and step.get("output") is not None:
            outputs = self.read_output(number, tool, step["output"], argument_keys, arguments)
        self.outputs_by_step.append(outputs)
        output = step.get("output")
        shown = (
            {variable_name(name, listed=False, aliases=self.aliases): (name, value)
             for name, value in islice(output.items(), MAX_VARIABLES) if isinstance(name, str)}
            if step.get("status") == "success" and isinstance(output, dict)
            else {}
        )  # fmt: skip
        self.read_state(step.get("state_after") or {}, number + 1, before, shown, argument_keys)

    def read_user(self, number: int, texts: Iterable[str]) -> None:
        """The user's words, phrases and quotes, known from this step on."""
        for text in texts:
            digest = hash(text)
            if digest in self.seen_texts:
                continue
            self.seen_texts.add(digest)
            for phrase in _phrases(text):
                if _small_number(phrase):
                    phrase = SAID_KEY + phrase  # matches a small number an argument took
                elif phrase in self.said or _trivial_phrase(phrase):
                    continue
                if len(self.said) >= MAX_PHRASES:
                    self.budget.capped.add("phrases")
                    break
                self.said[phrase] = number
            for phrase in _quoted(text):
                if len(self.said) >= MAX_PHRASES:
                    self.budget.capped.add("phrases")
                    break
                self.said.setdefault(phrase, number)
                self.quoted.add(phrase)

    def read_state(
        self,
        state: dict[str, Any],
        number: int,
        previous: dict[str, Any] | None,
        shown: dict[str, tuple[str, Any]] | None = None,
        arguments: Collection[str] = (),
    ) -> None:
        """A state the runtime sent: its values are known under its variables' names.

        ``shown``: the call's output's top-level fields (name, value) by variable name. A
        variable the state after sets to the very value the output holds in the field of that
        name (what the OTLP receiver assembles from the vocabulary, or a runtime copying its
        results) says no more than that field's name: it is brought only where the name alone
        could say so (``_named_alone``)."""
        number_of_step = number - 1
        shown = shown or {}
        for variable, value in state.items():
            if previous is not None and variable in previous and previous[variable] == value:
                continue
            field_name, field_value = shown.get(variable, ("", None))
            repeated = bool(field_name) and field_value == value
            if variable not in self.stated:
                if len(self.stated) >= MAX_VARIABLES:  # none past it could be named
                    self.budget.capped.add("variables")
                    continue
                self.stated.add(variable)
            added = previous is not None and variable not in previous
            echoed = valued = brought = False
            keys: Iterable[str]
            if type(value) is str:  # value_key's own reading, without its type checks
                keys = (value[:MAX_STRING].strip().casefold(),)
            elif isinstance(value, dict | list):
                keys = (leaf.key for leaf in _leaves(value, "", self.budget, text=False))
            else:
                keys = (value_key(value) or "",)
            origin: Origin = (number, "", f"state {variable}")  # one tuple for all its values
            for key in keys:
                if trivial(key, declared=True):
                    continue
                if key in self.declared_as or len(self.declared_as) < MAX_VALUES:
                    self.declared_as.setdefault(key, variable)
                valued = True
                if previous is not None and not brought:
                    # New: unknown, or first held by this very call's output (not its
                    # arguments: an echo; not an earlier step: known already).
                    known = self.index.get(key)
                    brought = known is None or (known[0] == number and known[2][:6] == "output")
                    echoed = echoed or key in arguments
                self.remember(key, origin)
            # Absent before and present after: brought, unless its values are the call's own
            # arguments (an echo) or, repeating the output, are judged as the output's are: by
            # a value the trace did not know.
            brought = brought or (added and not ((echoed or repeated) and valued))
            needs_flow = False
            if brought and repeated:
                flag = type(value) is bool
                brought = variable not in self.arguments_by_step[number_of_step] and _named_alone(
                    value_key(value) or "" if not isinstance(value, dict | list) else "",
                    field_name,
                    f"output.{field_name}",
                    status=number_of_step in self.statuses,
                )
                needs_flow = number_of_step in self.reports and not flag
            self.declared.append((number, variable, brought, needs_flow))

    def read_arguments(self, number: int, tool: str, args: Any) -> set[str]:
        """Where each argument value came from (its flows); returns the values' keys."""
        argument_keys: set[str] = set()
        argument_origins: dict[str, Origin] = {}
        # (variable, argument path, origin) once each: a list of 10,000 values that came from
        # one place is one route.
        flows: dict[tuple[str, str, str], None] = {}
        self.budget.arguments = True
        for leaf in _leaves(args, "", self.budget, text=False):
            if len(argument_keys) < MAX_VALUES:  # echoes are looked for among the first ones
                argument_keys.add(leaf.key)
                if leaf.key.startswith(SAID_KEY) and not leaf.listed:  # echoed in its field
                    argument_keys.add(_named_number(leaf.name, False, leaf.key[len(SAID_KEY) :]))
            origin = self.index.get(leaf.key)
            if not trivial(leaf.key) and not leaf.key.startswith(SAID_KEY):
                # Known from the next step on (``origin[0] > number`` below reads it so); one
                # origin per argument path, shared by its values.
                if leaf.path not in argument_origins:
                    argument_origins[leaf.path] = (
                        number + 1,
                        tool,
                        "argument " + leaf.path.lstrip("."),
                    )
                self.remember(leaf.key, argument_origins[leaf.path])
            key = leaf.key
            if origin is None or origin[0] > number:
                spoken = self.said.get(key)
                if spoken is None and " " in key:
                    spoken = self.said.get(_phrase_key(key))
                origin = None if spoken is None else (spoken, "", USER)
            if origin is None and key.startswith(SAID_KEY) and not leaf.listed:
                key, origin = self._same_field(key, leaf.name, number)
            if origin is None or trivial(key, declared=self._named(key, origin)):
                continue
            variable = self.declared_as.get(key) or variable_name(
                leaf.name, listed=leaf.listed, aliases=self.aliases
            )
            if not variable:
                continue
            if variable not in self.flowing:
                # Past MAX_VARIABLES no variable could be named anyway: a trace of thousands of
                # arguments costs no more than one of MAX_VARIABLES.
                if len(self.flowing) >= MAX_VARIABLES:
                    self.budget.capped.add("variables")
                    continue
                self.flowing.add(variable)
            fed = self.key_variables.get(key, ())
            if variable not in fed:
                self.key_variables[key] = (*fed, variable)
            self.key_known[key] = min(self.key_known.get(key, origin[0]), origin[0])
            if origin[1] and origin[2].startswith("output"):
                self.path_variables.setdefault((origin[1], origin[2]), set()).add(variable)
            flows[(variable, leaf.path.lstrip("."), _origin_text(origin))] = None
        self.budget.arguments = False
        self.flows_by_step.append(list(flows))
        return argument_keys

    def _same_field(self, key: str, name: str, number: int) -> tuple[str, Origin | None]:
        """A small number an argument takes that the user did not write: it flowed from an
        earlier output's field of the same name (``distance: 980`` into ``distance``), where
        name and value agreeing say more than the number alone."""
        named = _named_number(name, False, key[len(SAID_KEY) :])
        origin = self.index.get(named)
        if origin is None or origin[0] > number:
            return key, None
        return named, origin

    def _named(self, key: str, origin: Origin) -> bool:
        """Whether someone named a value, so it is judged by the looser rule: the runtime's
        state, the user's quotes, an output's listing."""
        if key in self.declared_as:
            return True
        return key in self.quoted if origin[2] == USER else key in self.listed_words

    def read_output(
        self, number: int, tool: str, output: Any, argument_keys: set[str], arguments: set[str]
    ) -> list[_Leaf]:
        """A successful call's output: its values, known from the next step on."""
        outputs: list[_Leaf] = []
        budget = self.budget
        budget.declared, budget.everyday_paths = False, set()
        # Read as it is walked: the budget judges values by outputs' rule meanwhile.
        everyday: list[_Leaf] = []
        for leaf in _leaves(output, "output", budget, text=True):
            if leaf.key and leaf.key in argument_keys:
                # A small number read back (an order's amount) is a confirmation; a report
                # repeats what it was asked about.
                if "(in text)" not in leaf.path and not leaf.key.startswith(NAMED_KEY):
                    self.reports.add(number)
                continue  # an echo of the call's own arguments
            if leaf.listed and not trivial(leaf.key, declared=True):
                self.listed_words.add(leaf.key)  # an item of a listing names something
            elif trivial(leaf.key):
                if leaf.flag and leaf.path == f"output.{leaf.name}":
                    self.statuses.add(number)
                if self.vocabulary and leaf.name and "(in text)" not in leaf.path:
                    everyday.append(leaf)
                continue
            outputs.append(leaf)
            self.remember(leaf.key, (number + 1, tool, leaf.path))
        budget.declared = True
        # An everyday value says nothing by itself, but a field the vocabulary names
        # (``event_updated: true``) is that variable's effect; judged once the whole output is
        # read, as an echo anywhere in it makes it a report.
        report = number in self.reports
        for leaf in everyday:
            named = _field_variable(
                leaf, self.aliases, self.vocabulary, (), report=report, status=False
            )
            if named and named not in arguments:
                self.vocabulary_effects.append((number, named, leaf.path))
        return outputs

    # ------------------------------------------------- naming the variables and their effects
    def reconstruction(self) -> Reconstruction:
        reconstruction = Reconstruction(capped=self.budget.capped)
        first_known: dict[str, int] = {}
        effects_by_step: list[dict[str, str]] = [{} for _ in self.tools]

        def name(variable: str, step: int) -> bool:
            if variable in first_known:
                first_known[variable] = min(first_known[variable], step)
                return True
            if len(first_known) >= MAX_VARIABLES:
                self.budget.capped.add("variables")
                return False
            first_known[variable] = step
            return True

        flowed = {variable for variables in self.key_variables.values() for variable in variables}
        for known_at, variable, brought, needs_flow in self.declared:
            if needs_flow and variable not in flowed:
                brought = False
            if name(variable, known_at) and brought and known_at >= 1:
                effects_by_step[known_at - 1].setdefault(variable, f"state.{variable}")
        for key, fed in self.key_variables.items():
            for variable in fed:
                name(variable, self.key_known[key])
        for number, variable, path in self.vocabulary_effects:
            if name(variable, number + 1):
                effects_by_step[number].setdefault(variable, path)
        self._output_effects(reconstruction, name, effects_by_step, flowed)
        order = sorted((first, variable) for variable, first in first_known.items())
        firsts = [first for first, _ in order]
        for number in range(len(self.tools)):
            known = bisect_right(firsts, number)
            reconstruction.steps.append(
                {
                    "present": sorted(variable for _, variable in order[:known]),
                    "flows": self.flows_by_step[number],
                    "effects": sorted(effects_by_step[number].items()),
                    "new_paths": self._new_paths(number),
                }
            )
        reconstruction.capped = self.budget.capped
        return reconstruction

    def _new_paths(self, number: int) -> list[str]:
        """The output paths where this step's output first held a value of the trace, a value
        that names something (no text: a file's content sent as a message is, like a quantity
        renamed, the caller's choice, and a token inside text is no field of its own), at most
        ``MAX_NEW_PATHS``."""
        tool, paths = self.tools[number], set[str]()
        for leaf in self.outputs_by_step[number]:
            if leaf.path in paths or "(in text)" in leaf.path or " " in leaf.key:
                continue
            if self.index.get(leaf.key) == (number + 1, tool, leaf.path):
                if len(paths) >= MAX_NEW_PATHS:
                    self.budget.capped.add("paths")
                    break
                paths.add(leaf.path)
        return sorted(paths)

    def _output_effects(
        self,
        reconstruction: Reconstruction,
        name: Callable[[str, int], bool],
        effects_by_step: list[dict[str, str]],
        flowed: set[str],
    ) -> None:
        """Each output value that is a variable's (it flowed into it, its path fed it, or its
        field is named so) and new in the trace: that step's effect, and a candidate alias.
        ``flowed``: every variable a value flowed into."""
        proposals: set[tuple[str, str, str]] = set()
        for number, outputs in enumerate(self.outputs_by_step):
            tool = self.tools[number]
            for leaf in outputs:
                variables = set(self.key_variables.get(leaf.key, ()))
                variables |= self.path_variables.get((tool, leaf.path), set())
                field_name = _field_variable(
                    leaf,
                    self.aliases,
                    self.vocabulary,
                    flowed,
                    report=number in self.reports,
                    status=number in self.statuses,
                )
                if field_name in self.arguments_by_step[number]:
                    # Named as one of the call's own arguments: a report on it (an order placed
                    # answers with its price), not a new value of it.
                    field_name = None
                if field_name:
                    variables.add(field_name)
                if variables and leaf.quantity and not _id_name(leaf.name):
                    # A quantity passed on under another name is the caller's choice.
                    own = variable_name(leaf.name, listed=leaf.listed, aliases=self.aliases)
                    variables &= {own}
                if not variables:
                    continue
                # New in the trace: this very output is where the trace first held the value.
                new = self.index.get(leaf.key) == (number + 1, tool, leaf.path)
                for variable in sorted(variables):
                    if not name(variable, number + 1) or not new:
                        continue
                    effects_by_step[number].setdefault(variable, leaf.path)
                    proposed = (tool, leaf.name, variable)
                    if (
                        leaf.name
                        and variable_name(leaf.name, listed=leaf.listed, aliases=self.aliases)
                        != variable
                        and "(in text)" not in leaf.path
                        and proposed not in proposals
                    ):
                        proposals.add(proposed)
                        reconstruction.candidates.append(
                            (number, tool, leaf.name, variable, leaf.key)
                        )


def _field_variable(
    leaf: _Leaf,
    aliases: dict[str, str],
    vocabulary: frozenset[str],
    flowed: Collection[str],
    *,
    report: bool,
    status: bool,
) -> str | None:
    """The known variable an output field's name alone says it holds (no value of it flowed):
    its own name, at any depth, when that is a variable (the vocabulary's, or one that flowed in
    the trace); an alias only for a field at the top of the output (``summary`` inside
    ``forecast`` is not the vocabulary's ``summary_text``). A name says less than a flow, so:

    - an object's key is an entry's identifier, not a value of the field it is under;
    - an output that repeats one of the call's own argument values is a report on them (an
      order read by its id, a message deleted for its receiver, a greeting naming who logged
      in): its fields hold values only by flowing, except a flag (``event_updated: true``);
    - a number is a measurement (a price read back, a converted quantity), except in a field
      named as an identifier;
    - text (a value with spaces) only in a field at the top of the output, whose answer it is,
      and of a variable of the vocabulary: a variable that merely flowed in the trace is not
      one a status ``message`` holds.
    """
    if not leaf.name or leaf.keyed or "(in text)" in leaf.path:
        return None
    if not _named_alone(leaf.key, leaf.name, leaf.path, status=status):
        return None
    if report and not leaf.flag:
        vocabulary = frozenset()
    if " " in leaf.key:
        flowed = ()
    plain = _snake(leaf.name, leaf.listed)
    if plain in vocabulary or plain in flowed:
        return plain
    named = variable_name(leaf.name, listed=leaf.listed, aliases=aliases)
    if named in vocabulary and leaf.path.count(".") <= 1:
        return named
    return None


def _named_alone(key: str, name: str, path: str, *, status: bool) -> bool:
    """Whether an output field's name alone may say its value (``key``; "" for an everyday
    value or a container) is a variable's: not a number but in an id-named field, text only
    at the top of an output that is no status (``_field_variable``)."""
    if key and _numeric(key) and not _id_name(name):
        return False
    return " " not in key or (path == f"output.{name}" and not status)


def _small_number(key: str) -> bool:
    """A whole number of two or three digits (``30``, ``567``)."""
    return 2 <= len(key) < MIN_DIGITS and key.isdigit()


def _numeric(key: str) -> bool:
    """Whether a value's key is a number's (``12446``, ``-3.5``, ``"980.0"``, a small number
    of a named field)."""
    if key.startswith(NAMED_KEY):
        return True
    return bool(key) and key[0] in NUMBER_START and key.lstrip("-").replace(".", "", 1).isdigit()


def _named_number(name: str, listed: bool, key: str) -> str:
    """The key of a small number in a field (an output's or an argument's) named ``name``:
    only a field of the same name (snake_case, a list's items singular) has it."""
    return f"{NAMED_KEY}{_snake(name, listed)}#{key}"


def vocabulary_names(aliases: dict[str, str]) -> frozenset[str]:
    """The canonical names of a vocabulary's alias map."""
    return frozenset(aliases.values())


def _trivial_phrase(phrase: str) -> bool:
    """A user's word is trivial by the values' rule; a phrase when every word is a function
    word or a short number."""
    words = phrase.split(" ")
    if len(words) == 1:
        return trivial(phrase)
    return all(word in FUNCTION_WORDS or (word.isdigit() and len(word) < 3) for word in words)


def _origin_text(origin: Origin) -> str:
    """Where a value came from, as the evidence shows it: ``search_flights output.flights[]
    .flight_number``, ``user message``, ``state reservation_id``, ``get_user argument user_id``."""
    _, tool, path = origin
    return f"{tool} {path}" if tool else path
