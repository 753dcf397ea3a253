"""The action word of a tool: where its name puts a verb, else its description's lead."""

from __future__ import annotations

from typing import NamedTuple

from ._lexicon import Lexicon, WordReading, lexicon
from ._names import words


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
    wn = lex.wn()
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
    wn = lex.wn()
    if action.word and set(wn.base_forms(lead[0], "v")) & set(wn.base_forms(action.word, "v")):
        return NO_ACTION
    return Action(lead[0], "description", lex.word_reading(lead[0]))


def participle(lex: Lexicon, word: str) -> bool:
    """A past participle: regular ("deleted") or irregular ("sent", "written")."""
    if word.endswith("ed") and len(word) > 4:
        return True
    exceptions = lex.wn().exceptions("v").get(word, ())
    return any(base != word for base in exceptions) and not word.endswith("s")


def _modifier(word: str) -> bool:
    """A participle or gerund in a name describes a thing ("git_diff_staged", "shopping_cart",
    "list_deleted_files"): it is never the name's action."""
    return word.endswith(("ing", "ed")) and len(word) > 4


def _leads(lex: Lexicon, word: str) -> bool:
    """Does a name start with this verb? Verb-first names use the base form: a first word in
    -ing or -ed modifies the noun after it ("shopping_cart", "billing_address")."""
    if word.endswith(("ing", "ed")) and not lex.wn().senses(word, "v"):
        return False
    if word in lex.vocabulary.words:  # a software verb first in a name ("list_commits")
        return True
    verbness = lex.verbness(word, first=True)
    return (verbness is not None and verbness > 0) or lex.compound(word) is not None
