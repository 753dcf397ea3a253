"""Words of danger and where they were found (``learning.risk._evidence``)."""

import pytest

from learning.tests.risk import suggest


def test_danger_from_effects_only():
    risk, _, evidence = suggest("billing.reconcile", "Reconcile an account.",
                                produces=["funds_withdrawn"])  # fmt: skip
    assert risk == "high"
    assert [item["kind"] for item in evidence if item.get("class")] == ["effect"]
    assert evidence[0]["variable"] == "funds_withdrawn" and evidence[0]["class"] == "money"


def test_danger_from_permissions_only():
    risk, _, evidence = suggest("ops.housekeeping", "Routine housekeeping job.",
                                permissions=["delete"])  # fmt: skip
    assert risk == "high"
    assert evidence[0]["kind"] == "permission" and evidence[0]["class"] == "destructive"


def test_a_negated_description_sets_the_floor_not_the_class():
    risk, _, evidence = suggest("drafts.prepare", "Prepare a draft. Does not send it.")
    assert risk == "medium"
    assert any(item.get("negated") for item in evidence)


@pytest.mark.parametrize(
    ("description", "risk"),
    [("Summarize the notes before anything is sent.", "medium"),  # subordinate: medium
     ("Summarize the notes and send them.", "high"),  # a main clause: high
     ("Summarize the notes. Does not send them.", "low"),  # negated, said of a read
     ("Summarize the notes (which may be empty).", "low"),  # an adjective in an aside
     # A sentence naming another tool is about that tool: in passing, medium at most.
     ("Summarize the notes. Send them with mail.send_message.", "medium")],
)  # fmt: skip
def test_clauses_of_the_description(description, risk):
    assert suggest("notes.summarize", description).risk == risk


def test_a_main_clause_joined_by_or_is_what_the_tool_does():
    risk, _, evidence = suggest(
        "files.write_file", "Create a new file or completely overwrite an existing file."
    )
    assert risk == "high"
    assert any(item["word"] == "overwrite" and not item.get("subordinate") for item in evidence
               if item["kind"] == "description")  # fmt: skip
    assert suggest("files.read_file", "Only works within allowed directories.").risk == "low"


@pytest.mark.parametrize(
    ("name", "description", "risk"),
    [("docs.move_folder", "Move a folder to the public site.", "high"),
     ("docs.move_folder", "Move a folder to another folder.", "medium"),
     ("web.search", "Search the public web.", "low"),
     ("ledger.reverse_entry", "Reverse a ledger entry permanently.", "high")],
)  # fmt: skip
def test_scope_words_raise_a_change_not_a_read(name, description, risk):
    assert suggest(name, description).risk == risk


def test_a_past_participle_effect_is_danger_a_participle_in_a_name_is_an_object():
    risk, _, evidence = suggest("files.tidy", "Tidy a folder.", produces=["deleted_file_id"])
    assert risk == "high"
    assert next(item for item in evidence if item["kind"] == "effect")["word"] == "deleted"
    assert suggest("files.list_deleted_files", "List the deleted files.").risk == "low"
    # A noun in an effect is what was made or computed: no danger by itself.
    assert suggest("loans.compute_mortgage", "Calculate a mortgage.",
                   produces=["mortgage_payment"]).risk == "low"  # fmt: skip
