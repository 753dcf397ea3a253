"""Tool-poisoning checks on the texts a model reads in a contract.

Pure Python (no Django). Texts an LLM reads (a tool's description, invariant rules, schema
``description``/``title`` keywords, config-param descriptions) are attack surface: a proposal
can hide instructions in them that a reviewer skims past. ``poisoning_flags`` looks for the
known tricks (invisible characters, look-alike letters, instructions addressed to the model,
in English or another language, in leetspeak or in base64, markup that hides text, new links,
a sudden jump in length), and only counts problems the base text did not already have, so an
old, reviewed quirk does not block every later change. ``contract_flags`` reads a contract as
a whole: an instruction split between the description and a parameter, and annotations that
contradict what the description says the tool does.

Every flag has a severity: ``alarm`` (a sign of an attack: the ticket needs a person's look)
or ``information`` (a new link, a long text: worth knowing, no sign of an attack on its own).
Every check is linear in the text's length; the texts are capped before they get here.

Nothing here escapes HTML (the template does); what it does do is spell invisible characters
out as ``<U+200B>`` (``visible``), because a reviewer cannot judge what they cannot see.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, NamedTuple, TypedDict


class Severity(StrEnum):
    """How loud a flag is: an alarm is a sign of an attack; information is worth a look."""

    ALARM = "alarm"
    INFORMATION = "information"


class Flag(TypedDict):
    """One sign of poisoning in one text: what kind (``CODE_ORDER``), how loud
    (``Severity``), why it matters, and the passage, hidden characters spelled out."""

    code: str
    severity: str
    message: str
    excerpt: str


class LocatedFlag(Flag):
    """A flag with where it was found in a contract: the field and the path inside it
    (``input_schema.city.enum.2``; ``(name)`` marks a property or key name)."""

    field: str
    where: str


# --- Thresholds ------------------------------------------------------------------------------
# A tool description is usually one paragraph of a few hundred characters; past 2,000, with no
# base to compare with, it is long enough to bury a payload and worth a look.
EXCESSIVE_LENGTH = 2000
# With a base: flag when the text more than triples *and* gains at least this many characters,
# so a 40-character description growing to 150 is not flagged but a payload appended is.
EXCESSIVE_GROWTH_FACTOR = 3
EXCESSIVE_GROWTH_MIN_CHARS = 500
EXCERPT_CONTEXT = 30
EXCERPT_SPAN = 120
HIDDEN_RUN_SHOWN = 8


# === Invisible characters ======================================================================

_TAG_BLOCK_START = 0xE0000
_TAG_PRINTABLE = range(0xE0020, 0xE007F)
_VARIATION_SELECTORS = frozenset(
    [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x1810)]
)
# Blank letters, marks and symbols that render as nothing though Unicode does not class them
# as format characters: COMBINING GRAPHEME JOINER, Hangul fillers, Khmer inherent vowels,
# BRAILLE PATTERN BLANK.
_BLANK_NON_FORMAT = frozenset({0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5, 0x2800})
_EMOJI_PRESENTATION = frozenset({0xFE0E, 0xFE0F})
_ZERO_WIDTH_JOINER = 0x200D
_BIDI_CONTROLS = frozenset([0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])
# Subdivision flags (England, Scotland, Wales) are the one ordinary use of tag characters.
_SUBDIVISION_FLAG = re.compile(
    "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f"
)


def hidden_positions(text: str) -> set[int]:
    """Indexes of characters a reader does not see: format (Cf) and control characters,
    variation selectors and blank fillers; emoji sequences keep their joiners and selectors."""
    if text.isascii():
        # Of ASCII only the control characters hide: most texts are read in one pass.
        return {
            index
            for index, char in enumerate(text)
            if (char < " " or char == "\x7f") and char not in "\t\n\r"
        }
    exempt = {
        index
        for match in _SUBDIVISION_FLAG.finditer(text)
        for index in range(match.start() + 1, match.end())
    }
    hidden: set[int] = set()
    for index, char in enumerate(text):
        if index in exempt or char in "\t\n\r":
            continue
        codepoint = ord(char)
        if (
            codepoint in _EMOJI_PRESENTATION
            and index > 0
            and _may_take_emoji_style(text[index - 1])
        ):
            continue
        if (
            codepoint == _ZERO_WIDTH_JOINER
            and 0 < index < len(text) - 1
            and _is_emoji_part(text[index - 1])
            and _is_emoji_part(text[index + 1])
        ):
            continue
        if (
            unicodedata.category(char) in ("Cf", "Cc")
            or codepoint in _VARIATION_SELECTORS
            or codepoint in _BLANK_NON_FORMAT
        ):
            hidden.add(index)
    return hidden


def _may_take_emoji_style(previous: str) -> bool:
    # One selector after a symbol, digit or '#' is how "❤️" and keycaps are spelled; after a
    # letter, a space or another selector it only carries smuggled data.
    return (
        unicodedata.category(previous)[0] not in "LZMC"
        and ord(previous) not in _VARIATION_SELECTORS
    )


def _is_emoji_part(char: str) -> bool:
    return unicodedata.category(char) in ("So", "Sk") or ord(char) in _EMOJI_PRESENTATION


def visible(text: str) -> str:
    """``text`` with every hidden character spelled out as ``<U+XXXX>``."""
    return _visible(text, 0, len(text), hidden_positions(text))


def _visible(text: str, start: int, end: int, hidden: set[int]) -> str:
    parts: list[str] = []
    index = start
    while index < end:
        if index not in hidden:
            parts.append(text[index])
            index += 1
            continue
        run_end = index
        while run_end < end and run_end in hidden:
            run_end += 1
        run = text[index:run_end]
        # A smuggled message can be thousands of tag characters; a few show what is there.
        shown = run if len(run) <= HIDDEN_RUN_SHOWN + 2 else run[:HIDDEN_RUN_SHOWN]
        parts.extend(f"<U+{ord(char):04X}>" for char in shown)
        if len(shown) < len(run):
            parts.append(f"<+{len(run) - len(shown)} more hidden>")
        index = run_end
    return "".join(parts)


def _runs(positions: Iterable[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for position in sorted(positions):
        if runs and runs[-1][1] == position:
            runs[-1] = (runs[-1][0], position + 1)
        else:
            runs.append((position, position + 1))
    return runs


def _decode_tags(run: str) -> str:
    """Tag characters mirror ASCII (U+E0041 is 'A'): the text someone hid in them."""
    return "".join(chr(ord(char) - _TAG_BLOCK_START) for char in run if ord(char) in _TAG_PRINTABLE)


# === Normalised views ==========================================================================
# Patterns run on a normalised copy of the text so that the usual evasions (a zero-width space
# inside "ig<U+200B>nore", Cyrillic letters, fullwidth letters, instructions written in tag
# characters) do not defeat them; ``origin`` maps each normalised character back to the
# original index so excerpts quote what was really written.

_PUNCTUATION = {"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'}

# Letters of other scripts that look like Latin ones (after Unicode's confusables.txt,
# keeping only the pairs that are indistinguishable in common fonts).
CONFUSABLE_WITH_LATIN = {
    # Cyrillic
    "а": "a", "е": "e", "һ": "h", "і": "i", "ј": "j", "о": "o", "р": "p", "с": "c",
    "ѕ": "s", "у": "y", "х": "x", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ү": "Y", "Ԛ": "Q", "Ԝ": "W",
    "Ӏ": "I",
    # Greek
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "κ": "k", "υ": "u", "χ": "x", "γ": "y",
    "ϲ": "c", "ϳ": "j",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C", "Ϳ": "J",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n", "զ": "q", "ց": "g", "Տ": "S", "Օ": "O", "Ս": "U",
    "Լ": "L",
    # Cherokee
    "\u13aa": "A", "\u13f4": "B", "\u13df": "C", "\u13a0": "D", "\u13ac": "E", "\u13bb": "H",
    "\u13ab": "J", "\u13e6": "K", "\u13de": "L", "\u13b7": "M", "\u13e2": "P", "\u13da": "S",
    "\u13a2": "T", "\u13d9": "V", "\u13b3": "W", "\u13c3": "Z",
}  # fmt: skip


@functools.lru_cache(maxsize=8192)
def _skeleton_of(char: str) -> str:
    """A character's skeleton, remembered: texts repeat their few distinct characters."""
    char = _PUNCTUATION.get(char, char)
    folded = []
    for part in unicodedata.normalize("NFKD", char):
        if unicodedata.category(part) == "Mn":
            continue
        folded.append(CONFUSABLE_WITH_LATIN.get(part, part))
    return "".join(folded)


@functools.lru_cache(maxsize=8192)
def _nfkc_of(char: str) -> str:
    return unicodedata.normalize("NFKC", char)


def _view(
    text: str, hidden: set[int], *, skeleton: bool, worded: bool = False
) -> tuple[str, list[int]]:
    """Hidden characters dropped (tag text decoded in place), then NFKC, or, for the
    skeleton, NFKD without accents and with look-alike letters read as Latin. ``worded``
    also reads a name as the words a model sees in it: ``_`` and ``-`` as spaces, and a
    space where camelCase starts a word ("ignore_previous_instructions", "ignorePrevious")."""
    if not hidden and text.isascii():
        # Most texts: an ASCII character is its own skeleton and NFKC form, one for one.
        return _ascii_view(text) if worded else (text, list(range(len(text))))
    return _view_by_character(text, hidden, skeleton=skeleton, worded=worded)


def _view_by_character(
    text: str, hidden: set[int], *, skeleton: bool, worded: bool
) -> tuple[str, list[int]]:
    """``_view`` of any text, character by character."""
    chars: list[str] = []
    origin: list[int] = []

    def emit(value: str, index: int) -> None:
        chars.extend(value)
        origin.extend([index] * len(value))

    index = 0
    while index < len(text):
        if index in hidden:
            run_end = index
            while run_end < len(text) and run_end in hidden:
                run_end += 1
            if _decode_tags(text[index:run_end]):
                # Spaces keep the hidden words from gluing onto their visible neighbours.
                emit(" ", index)
                for tag_index in range(index, run_end):
                    emit(_decode_tags(text[tag_index]), tag_index)
                emit(" ", run_end - 1)
            index = run_end
            continue
        char = text[index]
        if worded and char in "_-":
            emit(" ", index)
            index += 1
            continue
        if worded and char.isupper() and chars and chars[-1].islower():
            emit(" ", index)
        emit(_skeleton_of(char) if skeleton else _nfkc_of(char), index)
        index += 1
    return "".join(chars), origin


def _ascii_view(text: str) -> tuple[str, list[int]]:
    """``_view(text, set(), skeleton=True, worded=True)`` of an ASCII text, in one loop."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char in "_-":
            char = " "
        elif char.isupper() and chars and chars[-1].islower():
            chars.append(" ")
            origin.append(index)
        chars.append(char)
        origin.append(index)
    return "".join(chars), origin


# === Patterns ==================================================================================
# Each entry: (id, what it means for the reviewer, regex). Matched case-insensitively against
# the skeleton (instructions) or NFKC (markup) view of the text. Extend these lists rather
# than special-casing callers; every pattern needs a positive and a negative test.

INSTRUCTION_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        "ignore_instructions",
        "tells the model to ignore or override the instructions it was given",
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?"
        r"(?:the\s+|your\s+|my\s+|these\s+|those\s+)?"
        r"(?:previous|prior|above|earlier|preceding|other|system|original|existing|safety"
        r"|developer|former)?\s*(?:instructions?|prompts?|rules|guidelines|directives|guardrails)\b"
        r"|\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+(?:above|before|previously"
        r"|prior|you\s+(?:were|have\s+been)\s+told)\b",
    ),
    (
        "replacement_instructions",
        "claims to give the model new or real instructions",
        r"\b(?:your|the)\s+(?:new|real|actual|true|updated|secret)\s+instructions\b"
        r"|\bnew\s+instructions\s*:",
    ),
    (
        "system_prompt",
        "talks about the system or developer prompt",
        r"\b(?:system|developer)\s+(?:prompt|message|instructions)\b"
        r"|\bhidden\s+(?:prompt|instructions)\b",
    ),
    (
        "role_markup",
        "uses chat-role or emphasis tags addressed to the model",
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|tool_call"
        r"|sys)\s*>|<\|\s*(?:im_start|im_end|system|endoftext|assistant)\s*\|>|\[/?INST\]"
        r"|<<\s*/?SYS\s*>>|^[ \t]*(?:system|assistant)[ \t]*:",
    ),
    (
        "addresses_model",
        "speaks to the AI reading it rather than describing the tool",
        r"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?(?:ai|assistant|llm|model"
        r"|agent|claude|gpt|chatgpt)\b|\b(?:dear|hey|attention)\s*,?\s+(?:ai|assistant|llm"
        r"|model|agent|claude|gpt|chatgpt)\b|\bif\s+you\s+are\s+an?\s+(?:ai|llm|language\s+model"
        r"|assistant|agent)\b",
    ),
    (
        "always_call",
        "tells the model to always call a tool",
        r"\b(?:must|should|shall|need\s+to|have\s+to)\s+always\s+(?:call|invoke|use|run|execute"
        r"|trigger)\b|\balways\s+(?:call|invoke|run|execute)\s+(?:this|the|it)\b",
    ),
    (
        "call_before_others",
        "tells the model to call this tool before, or instead of, other tools",
        r"\bbefore\s+(?:using|calling|invoking|running)\s+(?:any|every|all|each|another)\s+"
        r"(?:other\s+)?(?:tools?|functions?)\b"
        r"|\b(?:instead\s+of|rather\s+than)\s+(?:using|calling|invoking)\s+(?:the\s+|any\s+)?"
        r"[\w.`'\"-]*\s*(?:tool|function)s?\b"
        r"|\b(?:do\s+not|don't|never)\s+(?:use|call|invoke)\s+(?:any\s+)?(?:other|another"
        r"|the\s+other)\s+(?:tools?|functions?)\b",
    ),
    (
        "conceal_from_user",
        "tells the model to hide something from the user",
        r"\b(?:do\s+not|don't|never|must\s+not|should\s+not|without)\s+(?:tell|telling|inform"
        r"|informing|mention|mentioning|notify|notifying|reveal|revealing|alert|alerting"
        r"|disclose|disclosing)\b[^.!?\n]{0,30}?\b(?:user|human|customer|operator)s?\b"
        r"|\bwithout\s+the\s+(?:user|human)(?:'s)?\s+(?:knowledge|knowing|noticing|consent)\b"
        r"|\b(?:the\s+)?(?:user|human)\s+(?:must|should)\s+(?:not|never)\s+(?:know|see|notice"
        r"|find\s+out|be\s+told)\b|\b(?:keep|this\s+is)\s+(?:this|it)\s+(?:a\s+)?secret\b"
        r"|\b(?:do\s+not|don't|never)\s+(?:mention|reveal|disclose|explain)\s+(?:this|that|these"
        r"|it|why)(?:\s+(?:change|step|instruction|modification|call|action|requirement)s?)?"
        r"\s*(?:[.!]|\Z)"
        r"|\b(?:silently|secretly|quietly|covertly)\s+(?:send|call|include|add|forward|copy"
        r"|upload|read|invoke|append)\b",
    ),
    (
        "exfiltration",
        "tells the model to send data to an outside address",
        r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|e-?mail|copy|report|submit)\w*"
        r"\b[^\n]{0,80}?\b(?:to|at|via|into)\s+[`'\"(<]?(?:https?://|ftps?://|wss?://|www\."
        r"|//[a-z0-9-]+\.|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:[a-z0-9-]+\.)+[a-z][a-z0-9-]{1,62}/"
        r"|(?:\d{1,3}\.){3}\d{1,3}\b)",
    ),
    (
        "sensitive_files",
        "asks to read or send files that hold keys, passwords or agent configuration",
        r"\b(?:read|open|cat|include|attach|send|upload|pass|copy|print|output|load|access"
        r"|fetch|extract|dump|paste|share|leak|exfiltrate|forward|post)\w*\b[^.!?\n]{0,60}?"
        r"(?:~/?\.(?:ssh|aws|gnupg|netrc|npmrc|pypirc|docker|kube|cursor)\b"
        r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|/etc/(?:passwd|shadow|sudoers)\b"
        r"|\.aws/credentials\b|\.git-credentials\b|\bmcp\.json\b"
        r"|\bclaude_desktop_config\.json\b|(?<![\w.])\.env\b)",
    ),
    (
        "secret_harvesting",
        "asks the model to put secrets or the conversation into a call",
        r"\b(?:include|attach|append|embed|paste|insert|send|output|print|reveal|leak|upload"
        r"|forward|copy|share|exfiltrate)\w*\b[^.!?\n]{0,60}?\b(?:contents?\s+of\s+[~/.]"
        r"|(?:private|secret|ssh|signing)\s+keys?\b|passwords?\b(?!\s+reset)|credentials\b"
        r"|api[\s_-]?keys?\b|access[\s_-]?tokens?\b|session\s+(?:cookies?|tokens?)\b"
        r"|(?:entire|full|whole|previous|prior|earlier)\s+(?:conversation|chat|messages?"
        r"|context)\b|(?:conversation|chat|message)\s+history\b|system\s+prompt\b)",
    ),
    (
        "persona_override",
        "tries to change who the model is or lift its limits",
        r"\byou\s+are\s+now\b|\bpretend\s+(?:to\s+be|you\s+are)\b|\bfrom\s+now\s+on,?\s+you\b"
        r"|\bjailbr(?:ea|o)k|\b(?:developer|god|dan)\s+mode\b"
        r"|\bno\s+(?:longer\s+)?(?:bound|restricted)\s+by\b",
    ),
    (
        "run_command",
        "tells the model to run a shell command, or to change shell start-up files",
        r"\b(?:execute|run)\s+(?:the\s+)?following\s+(?:[\w-]+\s+){0,3}?(?:command|script"
        r"|check|code)\b"
        r"|\b(?:must|should|need\s+to|have\s+to|please)\s+(?:also\s+|first\s+)?(?:execute|run)"
        r"\s*:?\s*[`'\"]"
        r"|\b(?:add|append|write|insert|modify|update|edit|echo)\w*\b[^.!?\n]{0,80}?"
        r"(?:~/)?\.(?:bashrc|zshrc|bash_profile|zprofile|profile)\b"
        r"|\b(?:sudo\s+)?rm\s+-(?:[a-z]*r[a-z]*f|[a-z]*f[a-z]*r)[a-z]*\s+[/~*$]"
        r"|\b(?:curl|wget)\b[^|\n]{0,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b",
    ),
    (
        "tamper_arguments",
        "tells the model to change what the user asked for",
        r"\bregardless\s+of\s+(?:what\s+)?(?:the\s+)?user(?:'s)?\s+(?:input|request|asks?|says"
        r"|wants?|query|choice|specified|entered|instructions?)"
        r"|\b(?:even\s+if|whatever)\s+the\s+user\s+(?:asks|says|requests|wants|specifies|enters)"
        r"|\b(?:must|always|automatically|silently|secretly)\s+(?:\w+\s+)?(?:modify|change"
        r"|replace|alter|rewrite|swap|override)\s+(?:the\s+|any\s+|all\s+)?\b[^.!?\n]{0,40}?"
        r"\b(?:parameter|argument|field|destination|recipient|address|amount|query|url|ticker"
        r"|symbol)s?\b"
        r"|\b(?:query|quer(?:y|ies)|parameters?|arguments?|input|request|url|address|recipients?)"
        r"\s+(?:is|are)\s+(?:automatically|silently|secretly|always)\s+(?:modified|changed"
        r"|altered|rewritten|replaced)\b"
        r"|\bignore\s+(?:any\s+|all\s+|the\s+)?user(?:-specified|'s|\s+specified|\s+supplied)",
    ),
    (
        "dictated_message",
        "dictates what the model must tell the user",
        r"\b(?:state|say|announce|(?:tell|inform|notify|warn)\s+(?:the\s+)?users?"
        r"|report\s+to\s+(?:the\s+)?users?|present\s+(?:it|them|this|its\s+\w+)\s+as)"
        r"\s*(?:that\s+)?:?\s*['\"\u2018\u201c]"
        r"|\b(?:halt|stop|abort|refuse)\s+(?:the\s+)?(?:operation|request|task|call)\s+and\s+"
        r"(?:inform|tell|notify)\s+the\s+user\b"
        r"|\bpromotional\s+message\b",
    ),
    (
        "destroy_files",
        "tells the model to delete files or data outside what the tool is for",
        r"\b(?:must|should|always|need\s+to)\s+(?:also\s+|first\s+)?(?:delete|remove|clean\s+up"
        r"|wipe|erase|purge|empty)\b[^.!?\n]{0,60}?\b(?:files|contents|director(?:y|ies)"
        r"|folders?|/tmp\b|home\b)",
    ),
    (
        "false_authority",
        "invokes compliance or an audit to make an instruction look mandatory",
        r"\b(?:compliance|regulatory|regulations|audit(?:ing)?\s+(?:trail|compliance|purposes)"
        r"|security\s+(?:verification|checkpoint|protocol|audit))\b[^.!?\n]{0,80}?\byou\s+must\b"
        r"|\byou\s+must\b[^.!?\n]{0,120}?\b(?:for|to\s+(?:ensure|maintain))\s+(?:\w+\s+){0,3}?"
        r"(?:compliance|regulatory|audit(?:ing)?)\b",
    ),
    (
        "forced_endpoint",
        "tells the model it must reach an outside address",
        r"\b(?:must|always)\s+(?:\w+\s+){0,2}?(?:access|visit|contact|ping|notify|call|fetch"
        r"|request|open|navigate\s+to|connect\s+to|log\s+to|report\s+to"
        r"|make\s+an?\s+(?:[\w-]+\s+)?(?:request|call)\s+to)\b[^.!?\n]{0,60}?"
        r"(?:https?://|//[a-z0-9-]+\.)",
    ),
    (
        "redirect_to_other_tool",
        "claims a tool is disabled or deprecated and sends the model to another",
        r"\b(?:tool|function|endpoint|api)\s+(?:has\s+been\s+|is\s+(?:now\s+)?|was\s+)(?:temporarily\s+"
        r"|permanently\s+)?(?:disabled|deprecated|retired|discontinued|unavailable|replaced)\b"
        r"[^\n]{0,160}?\b(?:use|call|redirect\s+to|switch\s+to)\b"
        r"|\b(?:must|should)\s+(?:\w+\s+)?redirect\s+(?:all\s+\w+\s+)?to\b",
    ),
)

HIDDEN_MARKUP_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        "html_comment",
        "an HTML comment: renderers hide it, the model reads it",
        r"<!--.*?(?:-->|\Z)",
    ),
    (
        "hiding_tag",
        "a tag styled or marked to hide its text",
        r"<\s*[a-z][\w:-]{0,40}\b[^<>]{0,400}?(?:\bhidden\b|display\s*:\s*none"
        r"|visibility\s*:\s*(?:hidden|collapse)|font-size\s*:\s*0(?![\d.]*[1-9])"
        r"|opacity\s*:\s*0(?![\d.]*[1-9])"
        r"|(?:max-)?(?:width|height)\s*:\s*0(?![\d.]*[1-9])|color\s*:\s*(?:white|transparent"
        r"|#fff(?:fff)?\b))[^<>]{0,400}>",
    ),
    (
        "non_rendered_element",
        "an element whose content is not displayed (script, style, template, collapsed details)",
        r"<\s*(?:script|style|template|noscript|iframe|object|embed|details|meta)\b[^<>]{0,400}>",
    ),
    (
        "markdown_comment",
        "a Markdown reference-link comment, which renderers hide",
        r"^[ \t]*\[[^\]\n]*\]:\s*(?:#|<>)[ \t]*[(\"']",
    ),
    (
        "whitespace_flood",
        "a long run of blank space that pushes the text after it out of view",
        r"[ \t]{40,}|(?:[ \t]*\n){8,}",
    ),
)

# "Ignore previous instructions" in the languages models read best after English. Matched
# against the NFKC view (the skeleton would read Cyrillic words as Latin), case-insensitively.
TRANSLATED_OVERRIDE_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        "ignore_instructions_translated",
        "tells the model, in another language, to ignore the instructions it was given",
        # Spanish, Portuguese, Italian
        r"\b(?:ignora|ignore|ignoren|ignorad|ignorar|ignorate|olvida|olvide|olviden|descarta"
        r"|esque[çc]a|dimentica|dimenticate)\s+(?:todas?\s+|tutte\s+)?(?:las\s+|los\s+|as\s+"
        r"|le\s+|tus\s+|sus\s+)?(?:(?:anteriores|previas|precedentes)\s+)?(?:instrucciones"
        r"|indicaciones|[óo]rdenes|instru[çc][õo]es|istruzioni)\b"
        # French
        r"|\b(?:ignore[zs]?|oublie[zs]?)\s+(?:toutes\s+|tous\s+)?(?:les\s+|tes\s+|vos\s+)?"
        r"(?:instructions|consignes|directives|r[èe]gles)\s+(?:pr[ée]c[ée]dentes|ant[ée]rieures"
        r"|ci-dessus|donn[ée]es)"
        # German
        r"|\b(?:ignorier(?:e|en|t)?|vergiss|vergessen|missachte)\s+(?:sie\s+)?(?:alle\s+)?"
        r"(?:bisherigen\s+|vorherigen\s+|vorigen\s+|fr[üu]heren\s+|obigen\s+)?(?:anweisungen"
        r"|instruktionen|befehle|vorgaben|regeln)\b"
        # Russian
        r"|(?<!\w)(?:игнорируй|игнорируйте|проигнорируй|проигнорируйте|забудь|забудьте"
        r"|не\s+обращай\s+внимания\s+на)\s+(?:все\s+)?(?:(?:предыдущие|прежние|прошлые"
        r"|вышеуказанные|предшествующие|данные\s+тебе)\s+)?(?:инструкции|указания|правила"
        r"|команды)(?!\w)"
        # Chinese, Japanese
        r"|(?:忽略|无视|忽视|無視|忘记|忘掉|不要理会)[^。！？\n]{0,10}?(?:之前|以前|先前|上面|以上"
        r"|前面|此前|原来|原有|所有|全部)[^。！？\n]{0,8}?(?:指令|指示|说明|提示|规则|命令)"
        r"|(?:以前|前|上記|これまで)の(?:すべての)?(?:指示|命令|指令)を(?:すべて)?(?:無視|忘れ)",
    ),
)

# Tool descriptions are written for models, and vendors address them ("Note to LLM: use the
# collection-indexes tool"); speaking to the model is worth a reviewer's glance under a code of
# its own, information, while what the note asks for raises the alarm.
PATTERN_CODES = {"addresses_model": "note_to_model"}

# Patterns a negation in front of them turns into advice: "do not include API keys" protects
# the secrets that "include the API keys" would leak.
NEGATABLE = frozenset({"secret_harvesting", "exfiltration", "sensitive_files"})
_NEGATION = re.compile(r"\b(?:not|never|no|nor|avoid|without|don'?t|doesn'?t|won'?t|cannot)\b")
# ...unless the negation is itself negated: "don't forget to include the API keys".
_NEGATED_NEGATION = re.compile(
    r"\b(?:forget|fail|hesitate|neglect|omit|skip|miss)\w*\b|\bwithout\s+fail\b"
)
_NEGATION_REACH = 40

_PATTERN_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL
_INSTRUCTIONS = [
    (pid, meaning, re.compile(rx, _PATTERN_FLAGS)) for pid, meaning, rx in INSTRUCTION_PATTERNS
]
_TRANSLATED = [
    (pid, meaning, re.compile(rx, _PATTERN_FLAGS))
    for pid, meaning, rx in TRANSLATED_OVERRIDE_PATTERNS
]
_MARKUP = [
    (pid, meaning, re.compile(rx, _PATTERN_FLAGS)) for pid, meaning, rx in HIDDEN_MARKUP_PATTERNS
]

# Links with a scheme or scheme-relative ("//host.any-tld/..."), "www." hosts, hosts under any
# TLD followed by a path, script/data URIs, and bare hosts under common TLDs (a model follows
# "evil.example.zz/collect" as readily as a full URL). File-like endings
# such as .sh or .zip are left out: they are names of files far more often than of hosts.
_URL = re.compile(
    r"\b(?:https?|ftps?|wss?|file|ipfs)://[^\s<>\"'`]+"
    r"|(?<![\w:/])//(?:[a-z0-9-]+\.)+[a-z][a-z0-9-]{1,62}\b[^\s<>\"'`]*"
    r"|\bwww\.[^\s<>\"'`]+"
    r"|\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,8}[a-z][a-z0-9-]{1,62}/[^\s<>\"'`]*"
    r"|\b(?:javascript|vbscript):[^\s<>\"'`]*"
    r"|\bdata:[a-z]+/[\w.+-]+[;,][^\s<>\"'`]*"
    r"|\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,8}"
    r"(?:com|net|org|io|ai|dev|app|xyz|top|info|biz|ru|cn|site|online|me|cc|tk|ly|gg|link|click)"
    r"\b(?:/[^\s<>\"'`]*)?",
    re.IGNORECASE,
)
_URL_TRAILING = ".,;:!?'\""

# === Scripts and homoglyphs ====================================================================

# Names whose first word is not a script ("MODIFIER LETTER APOSTROPHE", ordinal indicators).
_NOT_A_SCRIPT = frozenset({"MODIFIER", "FEMININE", "MASCULINE", "COMBINING"})
# Japanese, Chinese and Korean text mixes these scripts inside one word as a matter of course.
_CJK_FAMILY = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC")
# Greek letters that English text uses as symbols glued to Latin ones ("μs", "kΩ", "Δt");
# none of them passes for a Latin letter.
GREEK_SYMBOLS = frozenset("μΩΔπλθσΣΦ")
# Whole-word confusables only mean something inside text that is otherwise Latin.
_MOSTLY_LATIN_SHARE = 0.8
_WHOLE_WORD_CONFUSABLE_MIN_LETTERS = 3


def _script(char: str) -> str | None:
    """The script a letter belongs to, judged by its compatibility form (so '𝐢' is LATIN)."""
    folded = unicodedata.normalize("NFKC", char)
    name = unicodedata.name(folded[0] if folded else char, "")
    first_word = name.split(" ", 1)[0]
    if not first_word or first_word in _NOT_A_SCRIPT:
        return None
    if first_word.startswith(_CJK_FAMILY):
        return "CJK"
    return first_word


# Only scripts whose letters can pass for one another make a mixed word suspicious. Japanese
# or Thai text glues Latin words to its own letters without spaces ("IDで指定"), and no kana
# passes for a Latin letter.
LOOK_ALIKE_SCRIPTS = frozenset(
    {"LATIN", "COPTIC", "LISU"}
    | {script for char in CONFUSABLE_WITH_LATIN if (script := _script(char))}
)


def _is_styled(char: str, *, text_has_cjk: bool) -> bool:
    """Fullwidth, mathematical and letterlike look-alikes of ASCII letters ('ｉ', '𝐢', and
    KELVIN SIGN for 'K')."""
    if char.isascii() or char in "ªº":
        return False
    folded = unicodedata.normalize("NFKC", char)
    if folded == char or not (folded.isascii() and folded.isalpha()):
        return False
    name = unicodedata.name(char, "")
    if "LIGATURE" in name:
        return False  # 'ﬁ' comes from copy-pasted PDFs, not from attackers
    # Fullwidth Latin letters are ordinary in Japanese and Chinese text.
    return not (text_has_cjk and name.startswith("FULLWIDTH"))


def _words(text: str, hidden: set[int]) -> list[tuple[int, int]]:
    """Spans of letters and combining marks; hidden characters and everything else split."""
    spans: list[tuple[int, int]] = []
    start = None
    for index, char in enumerate(text):
        inside = index not in hidden and unicodedata.category(char)[0] in "LM"
        if inside and start is None:
            start = index
        elif not inside and start is not None:
            spans.append((start, index))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _describe_char(char: str) -> str:
    return f"'{char}' ({unicodedata.name(char, 'unnamed')}, U+{ord(char):04X})"


# === Findings ==================================================================================


class _Finding(NamedTuple):
    start: int
    end: int
    code: str
    message: str
    # What makes two findings "the same problem" across base and proposed text; compared as
    # a multiset, so a second zero-width space is new even when the base had one.
    signature: tuple[str, ...]


def _invisible_findings(text: str, hidden: set[int]) -> list[_Finding]:
    findings = []
    for start, end in _runs(hidden):
        run = text[start:end]
        notes = []
        if any(ord(char) in _BIDI_CONTROLS for char in run):
            notes.append("bidirectional controls that reorder what the reader sees")
        names = []
        for char in dict.fromkeys(run):
            if _TAG_BLOCK_START <= ord(char) < _TAG_BLOCK_START + 0x80:
                label = "TAG characters (U+E0000 block)"
            else:
                label = f"{unicodedata.name(char, 'control character')} (U+{ord(char):04X})"
            if label not in names:
                names.append(label)
        message = f"{len(run)} invisible character{'s' if len(run) > 1 else ''}: " + ", ".join(
            names[:4]
        )
        if len(names) > 4:
            message += f" and {len(names) - 4} more kinds"
        if notes:
            message += "; " + "; ".join(notes)
        hidden_text = _decode_tags(run)
        if hidden_text:
            shown = hidden_text if len(hidden_text) <= 200 else hidden_text[:200] + "…"
            message += f"; they spell out hidden text: {shown!r}"
        signature = ("invisible_character", *(f"{ord(char):X}" for char in run))
        findings.append(_Finding(start, end, "invisible_character", message, signature))
    return findings


def _homoglyph_findings(text: str, hidden: set[int]) -> list[_Finding]:
    if text.isascii():
        return []  # every ASCII letter is Latin and unstyled: no word mixes or disguises
    return _homoglyph_words(text, hidden)


def _homoglyph_words(text: str, hidden: set[int]) -> list[_Finding]:
    """``_homoglyph_findings`` of any text, word by word."""
    spans = _words(text, hidden)
    scripted = [
        script
        for start, end in spans
        for char in text[start:end]
        if unicodedata.category(char)[0] == "L" and (script := _script(char))
    ]
    text_has_cjk = "CJK" in scripted
    latin_share = scripted.count("LATIN") / len(scripted) if scripted else 0.0
    findings = []
    for start, end in spans:
        word = text[start:end]
        word_letters = [char for char in word if unicodedata.category(char)[0] == "L"]
        scripts = Counter(script for char in word_letters if (script := _script(char)))
        reads_as = "".join(_skeleton_of(char) for char in word)
        message = None
        styled = [char for char in word_letters if _is_styled(char, text_has_cjk=text_has_cjk)]
        look_alike_scripts = Counter(
            {script: count for script, count in scripts.items() if script in LOOK_ALIKE_SCRIPTS}
        )
        if len(look_alike_scripts) > 1 and not _is_latin_with_greek_symbols(
            word_letters, look_alike_scripts
        ):
            # Name the letters that do not belong: the non-Latin ones when Latin is involved,
            # since a Latin reading is what the disguise is after.
            usual = "LATIN" if "LATIN" in scripts else look_alike_scripts.most_common(1)[0][0]
            odd = [
                char
                for char in dict.fromkeys(word_letters)
                if _script(char) != usual and _script(char) in LOOK_ALIKE_SCRIPTS
            ]
            message = (
                f"'{word}' mixes {' and '.join(s.title() for s in look_alike_scripts)} letters "
                f"({', '.join(_describe_char(char) for char in odd[:3])}); it reads as '{reads_as}'"
            )
        elif styled:
            message = (
                f"'{word}' uses look-alike styled letters "
                f"({', '.join(_describe_char(char) for char in dict.fromkeys(styled[:3]))}) "
                f"that read as '{reads_as}' but slip past text filters"
            )
        elif (
            len(scripts) == 1
            and next(iter(scripts)) not in ("LATIN", "CJK")
            and len(word_letters) >= _WHOLE_WORD_CONFUSABLE_MIN_LETTERS
            and all(char in CONFUSABLE_WITH_LATIN for char in word_letters)
            and latin_share >= _MOSTLY_LATIN_SHARE
        ):
            # A Russian word in Russian text is fine; "рор" spelled only with Cyrillic
            # look-alikes inside an English paragraph exists to be misread.
            script = next(iter(scripts)).title()
            message = (
                f"'{word}' is written in {script} letters that all look Latin: "
                f"it reads as '{reads_as}'"
            )
        if message:
            findings.append(_Finding(start, end, "homoglyph", message, ("homoglyph", word)))
    return findings


def _is_latin_with_greek_symbols(letters: list[str], scripts: Counter[str]) -> bool:
    if set(scripts) != {"LATIN", "GREEK"}:
        return False
    greek = [unicodedata.normalize("NFKC", char) for char in letters if _script(char) == "GREEK"]
    return all(char in GREEK_SYMBOLS for char in greek)


def _pattern_findings(
    view: tuple[str, list[int]],
    patterns: list[tuple[str, str, re.Pattern[str]]],
    code: str,
) -> list[_Finding]:
    normalised, origin = view
    findings = []
    seen_spans: set[tuple[int, int]] = set()
    for pattern_id, meaning, regex in patterns:
        for match in regex.finditer(normalised):
            if match.end() <= match.start():
                continue
            if pattern_id in NEGATABLE and _negated(normalised, match.start()):
                continue
            start, end = origin[match.start()], origin[match.end() - 1] + 1
            if (start, end) in seen_spans:
                continue
            seen_spans.add((start, end))
            matched = " ".join(match.group().lower().split())
            own_code = PATTERN_CODES.get(pattern_id, code)
            signature = (own_code, pattern_id, matched[:80])
            findings.append(_Finding(start, end, own_code, meaning, signature))
    return findings


def _negated(text: str, start: int) -> bool:
    """Whether the clause before ``start`` says not to: "Do not include API keys"."""
    before = text[max(0, start - _NEGATION_REACH) : start]
    clause = re.split(r"[.!?;:\n]", before)[-1].lower()
    negation = _NEGATION.search(clause)
    return negation is not None and not _NEGATED_NEGATION.search(clause, negation.end())


# Leetspeak: digits and symbols standing for letters inside a word that has letters too
# ("IMP0RTANT", "1gn0r3"); "v2", "k8s" and "utf-8" read as nothing worse.
_LEET = str.maketrans("0134578@$", "oieastbas")
_LEET_WORD = re.compile(r"[a-z0-9@$]+", re.IGNORECASE)
_LEET_SIGNS = frozenset("0134578@$")


def _leet(view: tuple[str, list[int]]) -> tuple[str, list[int]] | None:
    """The view with leetspeak words read as letters (one character for one, so the origins
    stay), or None when there is no such word."""
    normalised, origin = view
    parts = []
    last = 0
    for match in _LEET_WORD.finditer(normalised):
        word = match.group()
        if not (any(char.isalpha() for char in word) and _LEET_SIGNS.intersection(word)):
            continue
        parts.append(normalised[last : match.start()])
        parts.append(match.group().translate(_LEET))
        last = match.end()
    if not parts:
        return None
    parts.append(normalised[last:])
    return "".join(parts), origin


# Runs of base64 long enough to carry a sentence; what they decode to is read like any text.
_BASE64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{24,}={0,2}(?![\w+/=-])")
_PRINTABLE_SHARE = 0.9


def _decoded_base64(run: str) -> str | None:
    """The text a base64 (or base64url) run spells, or None when it is no readable text."""
    padded = run.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = (
            base64.urlsafe_b64decode(padded)
            if "-" in run or "_" in run
            else base64.b64decode(padded, validate=True)
        )
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(char.isprintable() or char in "\n\t" for char in decoded)
    if " " not in decoded or printable < _PRINTABLE_SHARE * len(decoded):
        return None
    return decoded


def _encoded_findings(text: str, view: tuple[str, list[int]]) -> list[_Finding]:
    normalised, origin = view
    findings = []
    for match in _BASE64_RUN.finditer(normalised):
        decoded = _decoded_base64(match.group())
        if decoded is None:
            continue
        inner = _view(decoded, hidden_positions(decoded), skeleton=True)
        found = _pattern_findings(inner, _INSTRUCTIONS, "instruction_to_model")
        found += _pattern_findings(
            _view(decoded, set(), skeleton=False), _TRANSLATED, "instruction_to_model"
        )
        if not found and not _urls(_view(decoded, set(), skeleton=False)):
            continue
        meanings = "; ".join(dict.fromkeys(finding.message for finding in found)) or "a link"
        shown = decoded if len(decoded) <= 200 else decoded[:200] + "…"
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        findings.append(
            _Finding(
                start,
                end,
                "encoded_instruction",
                f"base64 text that decodes to {shown!r}: {meanings}",
                ("encoded_instruction", match.group()[:80]),
            )
        )
    return findings


def _urls(view: tuple[str, list[int]]) -> list[tuple[int, int, str]]:
    normalised, origin = view
    found = []
    for match in _URL.finditer(normalised):
        url = match.group()
        while url and (
            url[-1] in _URL_TRAILING
            or (
                url[-1] in ")]}"
                and url.count(url[-1]) > url.count({")": "(", "]": "[", "}": "{"}[url[-1]])
            )
        ):
            url = url[:-1]
        if not url:
            continue
        last = match.start() + len(url) - 1
        found.append((origin[match.start()], origin[last] + 1, url))
    return found


def _url_key(url: str) -> str:
    return url.lower().rstrip("/")


def _findings(text: str, hidden: set[int]) -> list[_Finding]:
    skeleton = _view(text, hidden, skeleton=True)
    revealed = _view(text, hidden, skeleton=False)
    instructions = _pattern_findings(skeleton, _INSTRUCTIONS, "instruction_to_model")
    instructions += _pattern_findings(revealed, _TRANSLATED, "instruction_to_model")
    # Names (a property, an enum value, a rule id) spell instructions without spaces, and
    # leetspeak spells them with digits; what these views add is kept where the plain view
    # found nothing ("id_rsa" stays a file).
    worded = _view(text, hidden, skeleton=True, worded=True)
    others = [worded, *(view for view in (_leet(skeleton), _leet(worded)) if view)]
    for view in others:
        found = [(finding.start, finding.end) for finding in instructions]
        for finding in _pattern_findings(view, _INSTRUCTIONS, "instruction_to_model"):
            if not any(finding.start < end and start < finding.end for start, end in found):
                instructions.append(finding)
    return [
        *_invisible_findings(text, hidden),
        *_homoglyph_findings(text, hidden),
        *instructions,
        *_encoded_findings(text, revealed),
        *_pattern_findings(revealed, _MARKUP, "hidden_markup"),
    ]


def _excerpt(text: str, start: int, end: int, hidden: set[int]) -> str:
    left = max(0, start - EXCERPT_CONTEXT)
    right = min(len(text), end + EXCERPT_CONTEXT)
    if end - start > EXCERPT_SPAN:
        half = EXCERPT_SPAN // 2
        middle = (
            _visible(text, start, start + half, hidden)
            + " … "
            + _visible(text, end - half, end, hidden)
        )
    else:
        middle = _visible(text, start, end, hidden)
    return (
        ("…" if left > 0 else "")
        + _visible(text, left, start, hidden)
        + middle
        + _visible(text, end, right, hidden)
        + ("…" if right < len(text) else "")
    )


# What a reviewer should know but that is no sign of an attack on its own: a link (documentation
# and schema defaults carry them), a long text and a note addressed to the model. The other codes
# are alarms.
INFORMATION_CODES = frozenset({"url_added", "excessive_length", "note_to_model"})

CODE_ORDER = (
    "invisible_character",
    "homoglyph",
    "instruction_to_model",
    "encoded_instruction",
    "hidden_markup",
    "note_to_model",
    "url_added",
    "excessive_length",
    "split_instruction",
    "hint_contradiction",
)


def severity_of(flag: Mapping[str, Any]) -> Severity:
    """A flag's severity: the one it carries, else the one its code has."""
    stated = flag.get("severity")
    if stated in (Severity.ALARM, Severity.INFORMATION):
        return Severity(stated)
    return Severity.INFORMATION if flag.get("code") in INFORMATION_CODES else Severity.ALARM


def _flag(code: str, message: str, excerpt: str) -> Flag:
    severity = Severity.INFORMATION if code in INFORMATION_CODES else Severity.ALARM
    return Flag(code=code, severity=severity.value, message=message, excerpt=excerpt)


def poisoning_flags(text: str, *, base_text: str | None = None) -> list[Flag]:
    """Signs of tool poisoning in ``text``, each ``{"code", "message", "excerpt"}``.

    With ``base_text``, only problems the base did not already have are reported: a flag
    whose signature (the same invisible run, the same mixed-script word, the same matched
    phrase) occurs as often in the base is an old, reviewed one. Codes:
    ``invisible_character``, ``homoglyph``, ``instruction_to_model``, ``encoded_instruction``,
    ``hidden_markup`` (alarms), ``note_to_model``, ``url_added``, ``excessive_length``
    (information). Flags come
    in reading order (excessive_length last); neighbouring matches of one kind are merged into
    one flag.
    """
    if not isinstance(text, str) or not text:
        return []
    base = base_text if isinstance(base_text, str) else ""
    hidden = hidden_positions(text)
    findings = _findings(text, hidden)
    if base:
        already = Counter(finding.signature for finding in _findings(base, hidden_positions(base)))
        fresh = []
        for finding in findings:
            if already[finding.signature] > 0:
                already[finding.signature] -= 1
            else:
                fresh.append(finding)
        findings = fresh

    known_urls = {
        _url_key(url) for _, _, url in _urls(_view(base, hidden_positions(base), skeleton=False))
    }
    reported_urls: set[str] = set()
    for start, end, url in _urls(_view(text, hidden, skeleton=False)):
        key = _url_key(url)
        if key in known_urls or key in reported_urls:
            continue
        reported_urls.add(key)
        message = f"a link the base text does not have: {url}" if base else f"a link: {url}"
        findings.append(_Finding(start, end, "url_added", message, ("url_added", key)))

    findings = _merge_neighbours(findings)
    findings.sort(key=lambda finding: (finding.start, CODE_ORDER.index(finding.code)))
    flags = [_flag(f.code, f.message, _excerpt(text, f.start, f.end, hidden)) for f in findings]
    length_flag = _excessive_length_flag(text, base, hidden)
    if length_flag:
        flags.append(length_flag)
    return flags


# Matches this close together are one sentence: "the contents of ~/.ssh/id_rsa" is one
# problem for the reviewer, not three.
_MERGE_GAP = 2
_MERGED_CODES = frozenset({"instruction_to_model", "hidden_markup"})


def _merge_neighbours(findings: list[_Finding]) -> list[_Finding]:
    # Runs after the comparison with the base, which needs each match on its own.
    merged: list[_Finding] = []
    for finding in sorted(findings, key=lambda finding: (finding.code, finding.start)):
        last = merged[-1] if merged else None
        if (
            last is not None
            and finding.code in _MERGED_CODES
            and finding.code == last.code
            and finding.start <= last.end + _MERGE_GAP
        ):
            message = last.message
            if finding.message not in message.split("; "):
                message += "; " + finding.message
            merged[-1] = last._replace(
                end=max(last.end, finding.end),
                message=message,
                signature=last.signature + finding.signature,
            )
        else:
            merged.append(finding)
    return merged


def _excessive_length_flag(text: str, base: str, hidden: set[int]) -> Flag | None:
    if base:
        grew = (
            len(text) > EXCESSIVE_GROWTH_FACTOR * len(base)
            and len(text) - len(base) >= EXCESSIVE_GROWTH_MIN_CHARS
        )
        crossed = len(text) > EXCESSIVE_LENGTH >= len(base)
        if not (grew or crossed):
            return None
        message = f"the text grew from {len(base):,} to {len(text):,} characters"
    else:
        if len(text) <= EXCESSIVE_LENGTH:
            return None
        message = f"the text is {len(text):,} characters long (more than {EXCESSIVE_LENGTH:,})"
    # Show where the new material starts: payloads are usually appended to a normal text.
    common = 0
    for old, new in zip(base, text, strict=False):
        if old != new:
            break
        common += 1
    end = min(len(text), common + EXCERPT_SPAN)
    excerpt = _visible(text, common, end, hidden) + ("…" if end < len(text) else "")
    return _flag("excessive_length", message, excerpt)


# === The contract as a whole ===================================================================
# A model reads a tool's description and its parameters' texts as one prompt, and trusts its
# annotations; two checks need more than one text.

_SCHEMA_TEXT_KEYS = ("title", "description")


def contract_flags(
    document: Mapping[str, Any], *, base: Mapping[str, Any] | None = None
) -> list[LocatedFlag]:
    """Flags only the whole contract shows: an instruction split between the description and
    the texts of the input schema (``split_instruction``), and annotations that contradict
    what the description says the tool does (``hint_contradiction``). With ``base``, only
    flags the base did not have."""
    flags = _split_flags(document) + _contradiction_flags(document)
    if base is None or not flags:
        return flags
    old = Counter(
        (flag["code"], flag["where"], flag["message"])
        for flag in _split_flags(base) + _contradiction_flags(base)
    )
    fresh = []
    for flag in flags:
        key = (flag["code"], flag["where"], flag["message"])
        if old[key] > 0:
            old[key] -= 1
        else:
            fresh.append(flag)
    return fresh


def _schema_texts(schema: Any, where: str) -> list[tuple[str, str]]:
    """The titles and descriptions of a JSON Schema, in the order a model reads them;
    iterative, so any depth is safe."""
    found: list[tuple[str, str]] = []
    pending: list[tuple[str, Any]] = [(where, schema)]
    while pending:
        path, item = pending.pop()
        children: list[tuple[str, Any]] = []
        if isinstance(item, Mapping):
            for key, value in item.items():
                if key in _SCHEMA_TEXT_KEYS and isinstance(value, str):
                    found.append((f"{path}.{key}", value))
                elif isinstance(value, Mapping | list):
                    children.append((f"{path}.{key}", value))
        elif isinstance(item, list):
            children = [(f"{path}.{index}", value) for index, value in enumerate(item)]
        pending.extend(reversed(children))
    return found


def _split_flags(document: Mapping[str, Any]) -> list[LocatedFlag]:
    description = document.get("description")
    parts = [("description", description)] if isinstance(description, str) else []
    parts += _schema_texts(document.get("input_schema"), "input_schema")
    parts = [(where, text) for where, text in parts if text.strip()]
    if len(parts) < 2:
        return []
    offsets = []
    position = 0
    for _, text in parts:
        offsets.append(position)
        position += len(text) + 1
    joined = " ".join(text for _, text in parts)
    hidden = hidden_positions(joined)
    flags = []
    for finding in _findings(joined, hidden):
        if finding.code != "instruction_to_model":
            continue
        # The texts the match touches: from the one it starts in to the one it ends in.
        first = bisect.bisect_right(offsets, finding.start) - 1
        last = bisect.bisect_left(offsets, finding.end) - 1
        inside = list(range(first, last + 1))
        if len(inside) < 2:
            continue  # within one text, where that text's own check reports it
        where = " + ".join(parts[index][0] for index in inside)
        flags.append(
            LocatedFlag(
                code="split_instruction",
                severity=Severity.ALARM.value,
                message=f"an instruction split across {where}: {finding.message}",
                excerpt=_excerpt(joined, finding.start, finding.end, hidden),
                field="description",
                where=where,
            )
        )
    return flags


_DESTRUCTIVE_VERBS = (
    "delete", "remove", "erase", "wipe", "destroy", "drop", "purge", "truncate", "overwrite",
    "uninstall", "terminate", "kill", "revoke",
)  # fmt: skip
_WRITE_VERBS = (
    "create", "write", "update", "modify", "edit", "insert", "send", "post", "upload", "move",
    "rename", "publish", "deploy", "install", "transfer", "pay", "submit",
)  # fmt: skip


def _verb_forms(verbs: Iterable[str]) -> frozenset[str]:
    forms = set()
    for verb in verbs:
        stem = verb[:-1] if verb.endswith("e") else verb
        double = verb + verb[-1] if verb in ("drop", "submit") else verb
        forms |= {verb, verb + "s", verb + "es", verb + "d", stem + "ed", stem + "ing"}
        forms |= {double + "ed", double + "ing"}
    return frozenset(forms)


_DESTRUCTIVE = _verb_forms(_DESTRUCTIVE_VERBS)
_WRITES = _verb_forms(_WRITE_VERBS) | _DESTRUCTIVE
# What the description says the tool does first: its first verb, after the usual preambles.
_LEADING_VERB = re.compile(
    r"\A\W*(?:(?:this|the)\s+tool\s+(?:will\s+|can\s+)?|tool\s+(?:to|that)\s+|it\s+"
    r"|use\s+(?:this\s+)?(?:tool\s+)?to\s+|(?:allows|lets)\s+(?:you|the\s+\w+)\s+(?:to\s+)?)?"
    r"(?P<verb>[a-z]+)",
    re.IGNORECASE,
)
_FOR_GOOD = r"(?:permanently|irreversibly|irrevocably|forever)"
_DESTROYS_FOR_GOOD = re.compile(
    rf"\b{_FOR_GOOD}\s+(?:\w+\s+){{0,2}}?(?:{'|'.join(sorted(_DESTRUCTIVE))})\b"
    rf"|\b(?:{'|'.join(sorted(_DESTRUCTIVE))})\s+(?:[\w-]+\s+){{0,5}}?{_FOR_GOOD}\b",
    re.IGNORECASE,
)


def _contradiction_flags(document: Mapping[str, Any]) -> list[LocatedFlag]:
    annotations = document.get("annotations")
    description = document.get("description")
    if not isinstance(annotations, Mapping) or not isinstance(description, str):
        return []
    if annotations.get("readOnlyHint") is True:
        hint, claim, verbs = "readOnlyHint", "read-only", _WRITES
    elif annotations.get("destructiveHint") is False:
        hint, claim, verbs = "destructiveHint", "non-destructive", _DESTRUCTIVE
    else:
        return []
    text, origin = _view(description, hidden_positions(description), skeleton=True)
    first = _LEADING_VERB.match(text)
    if first and first.group("verb").lower() in verbs:
        span = first.span("verb")
    elif (found := _DESTROYS_FOR_GOOD.search(text)) is not None:
        span = found.span()
    else:
        return []
    start, end = origin[span[0]], origin[span[1] - 1] + 1
    said = description[start:end]
    return [
        LocatedFlag(
            code="hint_contradiction",
            severity=Severity.ALARM.value,
            message=(
                f"{hint}: {json.dumps(annotations[hint])} claims the tool is {claim}, but its "
                f"description says {said!r}"
            ),
            excerpt=_excerpt(description, start, end, hidden_positions(description)),
            field="annotations",
            where=f"annotations.{hint}",
        )
    ]
