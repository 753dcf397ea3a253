"""The action word of a tool (``learning.risk._actions``)."""

import pytest

from learning.risk import lexicon
from learning.risk._actions import action_of
from learning.tests.risk import suggest


def test_a_noun_first_name_reads_its_last_word_as_the_action():
    risk, _, evidence = suggest("accountDeletion", "Handles accounts.")
    assert risk == "high" and evidence[0]["word"] == "deletion"
    risk, _, _ = suggest("invoiceSend", "Invoices.")
    assert risk == "high"


def test_an_object_noun_is_not_an_action():
    # "payments" and "email" name what the tool reads, not what it does.
    labelled = [{"name": "mail.summarize", "description": "Summarize mail", "risk": "low"}]
    assert suggest("payments_summarize", "Summarize payments", labelled=labelled).risk == "low"
    assert suggest("read_email", "Read an email", labelled=labelled).risk == "low"


def test_the_action_word_comes_from_where_the_name_puts_it():
    lex = lexicon()
    assert action_of("patch_file", "Patch a code file.", lex).word == "patch"
    assert action_of("treasury.ledgerEntryReverse", "", lex).word == "reverse"
    assert action_of("catalogue.view_item", "", lex).word == "view"
    assert action_of("clinic.chartView", "Show a patient's chart.", lex).word == "show"
    # A first word in -ing modifies the noun after it.
    assert action_of("shopping_write_records", "", lex).word == "write"


@pytest.mark.parametrize(
    ("name", "description", "word"),
    [("git_log", "Shows the commit logs", "shows"), ("log_event", "Record an event.", "record"),
     ("people.contractTerminate", "", "terminate"), ("list_commits", "", "list"),
     ("git_diff_staged", "", "diff"), ("people.leaveBalance", "Tell how many days are left.",
     "tell")],
)  # fmt: skip
def test_the_action_of_names_whose_words_are_also_nouns(name, description, word):
    assert action_of(name, description, lexicon()).word == word


@pytest.mark.parametrize(
    ("name", "description", "word"),
    [
        ("source_link_retrieval", "Turn a retrieved passage set into citable links.", "retrieve"),
        ("contractDeletion", "Handles contracts.", "delete"),
        ("invoice_payment", "Handles invoices.", "pay"),
    ],
)
def test_a_noun_first_name_ending_in_the_noun_of_its_act_reads_as_that_verb(
    name, description, word
):
    assert action_of(name, description).word == word


@pytest.mark.parametrize(
    ("name", "description", "risk", "word"),
    [
        ("search_flights", "Use this tool to search direct flights between two cities.",
         "low", "search"),
        ("get_user_details", "Use this function to get the details of a user.", "low", "get"),
        ("cancel_reservation", "Use this tool when the user wants to cancel a reservation.",
         "high", "cancel"),
    ],
)  # fmt: skip
def test_a_use_this_tool_preamble_does_not_outweigh_the_tools_name(name, description, risk, word):
    suggestion = suggest(name, description)
    assert suggestion.risk == risk
    actions = [e["word"] for e in suggestion.evidence if e["kind"] == "action"]
    assert actions == [word]
