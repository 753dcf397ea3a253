"""Reading names and sentences: words, clauses, the words that only connect or negate.

Pure text: no lexicon, no WordNet. A tool's name is read as dotted parts whose last part is
its action ("payments.refund"); a description as sentences and clauses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

NEGATIONS = frozenset({"not", "never", "no", "without", "cannot", "doesn", "don", "won", "isn"})
NEGATION_WINDOW = 3


TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# Words that name an identifier rather than a thing: "payment_id" is about a payment.
IDENTIFIER_WORDS = frozenset({"id", "ids", "url", "uri", "key", "ref", "number", "at", "time"})


def words(text: str) -> list[str]:
    """Lower-case words of a name or text: snake_case, dotted, camelCase and kebab-case alike."""
    return [word.lower() for word in TOKEN.findall(text)]


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


def main_positions(sentence: str) -> list[tuple[str, bool]]:
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


def arguments_of(tool: Mapping[str, Any]) -> list[str]:
    """The argument names of a tool's input schema (none where it has no properties)."""
    schema = tool.get("input_schema") or tool.get("inputSchema") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [str(key) for key in properties] if isinstance(properties, dict) else []


def namespace(name: str) -> str:
    """The part of a tool's name before its last dot ("" for a bare name)."""
    return name.rsplit(".", 1)[0] if "." in name else ""


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


def object_words(name: str, description: str, action_word: str | None) -> list[str]:
    """What the action is done to: the name's other words and the description's first
    sentence."""
    first = SENTENCE.split(description.strip(), maxsplit=1)[0] if description.strip() else ""
    return [word for word in words(name.rsplit(".", 1)[-1]) + words(first) if word != action_word]


def likeness_tokens(
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
