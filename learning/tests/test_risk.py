import socket

import pytest

from learning.aggregates import new_aggregate
from learning.inference import infer_contract
from learning.lexicon import WordNet, data_directory, wordnet
from learning.risk import SEEDS, lexicon_build, suggest_risk

SEED_WORDS = {name.rsplit(".", 2)[0] for names in SEEDS.values() for name in names}
READS = [
    {"name": "catalogue.browse_items", "description": "Browse the items of a catalogue",
     "risk": "low"},
    {"name": "catalogue.show_item", "description": "Show one catalogue item", "risk": "low"},
    {"name": "records.show_record", "description": "Show one stored record", "risk": "low"},
]  # fmt: skip


def suggest(name, description="", produces=(), permissions=(), labelled=READS):
    return suggest_risk(
        name=name,
        description=description,
        produces=list(produces),
        permissions=list(permissions),
        labelled=labelled,
    )


@pytest.mark.parametrize(
    ("name", "word"),
    [("disk.wipe", "wipe"), ("records.obliterate", "obliterate"), ("badges.revoke", "revoke")],
)
def test_a_synonym_outside_the_seeds_is_high_with_read_neighbours(name, word):
    assert word not in SEED_WORDS
    risk, _, evidence = suggest(name, f"{word.capitalize()} the thing")
    assert risk == "high"
    verb = next(item for item in evidence if item["kind"] == "verb")
    assert verb["word"] == word and verb["class"] == "destructive"
    assert "WordNet" in verb["via"] or "head of" in verb["via"]


def test_read_neighbours_never_pull_a_destructive_tool_below_medium():
    labelled = [
        *READS,
        {"name": "records.erase_record", "description": "Erase one stored record", "risk": "low"},
    ]
    risk, _, evidence = suggest("records.obliterate_record", "Obliterate a stored record",
                                labelled=labelled)  # fmt: skip
    assert risk == "medium"  # the only destructive neighbour says low: the floor holds
    assert any(item["kind"] == "neighbours" for item in evidence)


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


def test_benign_reads_stay_low():
    risk, _, evidence = suggest("catalogue.browse_offers", "Browse the offers of a catalogue")
    assert risk == "low"
    assert not [item for item in evidence if item.get("class")]


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


def test_a_negated_description_sets_the_floor_not_the_class():
    risk, _, evidence = suggest("drafts.prepare", "Prepare a draft. Does not send it.")
    assert risk == "medium"
    assert any(item.get("negated") for item in evidence)


def test_ties_go_up():
    labelled = [
        {"name": "vault.erase_blob", "description": "Erase a blob", "risk": "low"},
        {"name": "vault.erase_file", "description": "Erase a file", "risk": "high"},
    ]
    risk, confidence, _ = suggest("vault.erase_item", "Erase an item", labelled=labelled)
    assert (risk, confidence) == ("high", 0.5)
    labelled = [
        {"name": "shelf.browse_a", "description": "Browse shelf", "risk": "low"},
        {"name": "shelf.browse_b", "description": "Browse shelf", "risk": "medium"},
    ]
    assert suggest("shelf.browse_c", "Browse shelf", labelled=labelled).risk == "medium"


def test_a_labelled_class_can_raise_but_never_lower_below_the_floor():
    labelled = [
        {"name": "invoices.void_invoice", "description": "Void an invoice", "risk": "medium"},
        {"name": "invoices.void_credit", "description": "Void a credit note", "risk": "medium"},
    ]
    assert suggest("invoices.void_order", "Void an order", labelled=labelled).risk == "medium"


def test_with_nothing_known_the_suggestion_is_medium():
    assert suggest("thing.frobnicate", "Frobnicate.", labelled=[]).risk == "medium"


def test_the_inferred_contract_carries_the_risk_evidence():
    document = infer_contract(
        name="disk.wipe", description="Wipe a disk", input_schema=None, aggregate=new_aggregate(),
        labelled=READS,
    )  # fmt: skip
    assert document["risk"] == "high"
    assert document["evidence"]["risk"][0]["word"] == "wipe"


def test_the_lexicon_loads_with_the_network_disabled(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the lexicon tried to use the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    lexicon = lexicon_build(WordNet(data_directory()))
    assert "destructive" in {sense.danger for sense in lexicon.verbs["wipe"]}
    assert "money" in {sense.danger for sense in lexicon.nouns["payment"]}


def test_the_reader_finds_synsets_in_files_with_rewritten_line_ends():
    wn = wordnet()
    delete = wn.synset(wn.senses("delete")[0], "v")
    assert delete.words == ("delete", "cancel")
    assert wn.base_forms("sent", "v")[:2] == ["sent", "send"]
    assert wn.senses("no-such-verb") == ()
