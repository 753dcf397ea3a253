"""Words of danger in a tool's name, effects, permissions, description and arguments."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypedDict

from ._actions import participle
from ._lexicon import Lexicon, Sense, lexicon
from ._names import (
    AUXILIARIES,
    BE,
    DETERMINERS,
    IDENTIFIER_WORDS,
    NEGATION_WINDOW,
    NEGATIONS,
    SENTENCE,
    SUBORDINATORS,
    TOOL_NAME,
    main_positions,
    words,
)


class Neighbour(TypedDict):
    """A labelled tool that voted: the evidence of a ``neighbours`` item."""

    name: str
    risk: str
    similarity: float


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
        "tools": list[Neighbour],
        "probability": float,
        "labels": int,
    },
    total=False,
)


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
            if participle(lex, word):  # "deleted_file_id", "email_sent"
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
        tagged = main_positions(sentence)
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
            if participle(lex, word) and previous not in AUXILIARIES:
                continue  # an adjective: "within allowed directories"
            if not main and (
                previous in DETERMINERS
                or (previous in BE and not participle(lex, word))  # "may be empty"
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
    """Multi-word verbs (\"wipe out\") as consecutive words. A phrase whose first word the
    text lacks is passed over without sliding along the text."""
    present = set(text)
    for parts, senses in lex.phrases.items():
        if parts and parts[0] not in present:
            continue
        size = len(parts)
        for start in range(len(text) - size + 1):
            if tuple(text[start : start + size]) == parts:
                note(" ".join(parts), senses)
