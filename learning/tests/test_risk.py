import socket

import pytest

from learning.aggregates import new_aggregate
from learning.inference import infer_contract
from learning.lexicon import MISSING_BOUND, WordNet, data_directory, wordnet
from learning.risk import (
    SEEDS,
    VERBS_FILE,
    VocabularyInvalid,
    action_of,
    lexicon,
    lexicon_build,
    lexicon_configure,
    suggest_risk,
    vocabulary_load,
)

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
    [("records.efface", "efface"), ("records.nullify", "nullify"), ("deals.rescind", "rescind")],
)
def test_a_synonym_outside_the_seeds_and_the_lexicon_is_high_with_read_neighbours(name, word):
    assert word not in SEED_WORDS and lexicon().entry(word) is None
    risk, _, evidence = suggest(name, f"{word.capitalize()} the thing")
    assert risk == "high"
    verb = next(item for item in evidence if item["kind"] == "verb")
    assert verb["word"] == word and verb["class"] == "destructive"
    assert "WordNet" in verb["via"]


def test_read_neighbours_never_lower_a_destructive_action():
    labelled = [
        *READS,
        {"name": "records.erase_record", "description": "Erase one stored record", "risk": "low"},
    ]
    risk, _, evidence = suggest("records.obliterate_record", "Obliterate a stored record",
                                labelled=labelled)  # fmt: skip
    assert risk == "high"  # the only destructive neighbour says low: neighbours only raise
    rule = next(item for item in evidence if item["kind"] == "rule")
    assert rule["floor"] == "high"


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
    # "tweak" changes things (floor medium); its two neighbours split low and high.
    labelled = [
        {"name": "vault.tweak_blob", "description": "Tweak a blob", "risk": "low"},
        {"name": "vault.tweak_file", "description": "Tweak a file", "risk": "high"},
    ]
    risk, confidence, evidence = suggest("vault.tweak_item", "Tweak an item", labelled=labelled)
    assert (risk, confidence) == ("high", 0.5)
    assert evidence[-1]["kind"] == "neighbours" and evidence[-1]["vote"] == "high"
    labelled = [
        {"name": "shelf.browse_a", "description": "Browse shelf", "risk": "low"},
        {"name": "shelf.browse_b", "description": "Browse shelf", "risk": "medium"},
    ]
    assert suggest("shelf.browse_c", "Browse shelf", labelled=labelled).risk == "medium"


def test_neighbours_never_lower_a_dangerous_action_but_may_raise_a_weak_one():
    labelled = [
        {"name": "invoices.void_invoice", "description": "Void an invoice", "risk": "medium"},
        {"name": "invoices.void_credit", "description": "Void a credit note", "risk": "medium"},
    ]
    assert suggest("invoices.void_order", "Void an order", labelled=labelled).risk == "high"
    # A negated danger word sets the floor (medium); a neighbour rated high raises it.
    labelled = [{"name": "drafts.prepare_note", "description": "Prepare a note. Does not send it.",
                 "risk": "high"}]  # fmt: skip
    risk, _, evidence = suggest("drafts.prepare", "Prepare a draft. Does not send it.",
                                labelled=labelled)  # fmt: skip
    assert risk == "high"
    assert evidence[-1]["vote"] == "high"


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


def floor_of(evidence):
    return next(item for item in evidence if item["kind"] == "rule")


@pytest.mark.parametrize(
    ("name", "description"),
    [("widgets.frobnicate", "Frobnicate a widget."), ("widgets.zorble", ""),
     ("people.employeeRecord", "")],
)  # fmt: skip
def test_an_action_word_the_lexicon_cannot_place_is_at_least_medium(name, description):
    # Every labelled tool is a read rated low: nothing shows the action is benign.
    risk, _, evidence = suggest(name, description)
    assert risk == "medium"
    assert floor_of(evidence)["floor"] == "medium"


@pytest.mark.parametrize(
    ("name", "word", "reading"),
    [("ledger.abridge_table", "abridge", "changes"), ("ledger.reverse_entry", "reverse",
     "changes"), ("archive.crumple_record", "crumple", "changes"), ("repo.flip_visibility",
     "flip", "informs"), ("config.tweak_setting", "tweak", "changes")],
)  # fmt: skip
def test_a_verb_that_changes_or_acts_on_things_is_never_low(name, word, reading):
    risk, _, evidence = suggest(name, f"{word.capitalize()} it.")
    assert risk in ("medium", "high")
    action = next(item for item in evidence if item["kind"] == "action")
    assert (action["word"], action["reading"]) == (word, reading)
    assert floor_of(evidence)["floor"] == "medium"


def test_a_change_is_read_through_the_hypernym_chain():
    _, _, evidence = suggest("things.scrunch_item", "Scrunch an item.")
    action = next(item for item in evidence if item["kind"] == "action")
    assert "scrunch" in action["via"] and "change" in action["via"]


@pytest.mark.parametrize(
    ("name", "word", "danger"),
    [("treasury.indemnify_claim", "indemnify", "money"),
     ("people.defray_cost", "defray", "money"),
     ("vendors.recompense_vendor", "recompense", "money"),
     ("stock.writeoff_item", "writeoff", "destructive"),
     ("people.empower_user", "empower", "permissions")],
)  # fmt: skip
def test_synonyms_and_kinds_of_dangerous_verbs_are_high(name, word, danger):
    assert word not in SEED_WORDS
    risk, _, evidence = suggest(name, "")
    assert risk == "high"
    found = {(item["word"], item["class"]) for item in evidence if item["kind"] == "verb"}
    assert (word, danger) in found  # "remit" is also a kind of cancelling (of a debt)


def test_a_kind_of_payment_two_levels_down_shows_its_chain():
    _, _, evidence = suggest("treasury.restitute_deposit", "")
    verb = next(item for item in evidence if item["kind"] == "verb")
    assert "refund" in verb["via"] and "pay" in verb["via"]


@pytest.mark.parametrize(
    "name",
    ["catalogue.read_item", "catalogue.search_items", "catalogue.inspect_item",
     "catalogue.compare_items", "catalogue.view_item", "access.lookup_user",
     "catalogue.calculate_total"],
)  # fmt: skip
def test_reads_lookups_and_computations_stay_low(name):
    risk, _, evidence = suggest(name, "")
    assert risk == "low"
    assert floor_of(evidence)["floor"] == "low"
    assert not [item for item in evidence if item.get("class")]


def test_a_description_that_changes_things_keeps_a_read_name_from_low():
    risk, _, evidence = suggest("catalogue.read_items", "Update the stock count of each item.")
    assert risk == "medium"
    readings = {item["word"]: item["reading"] for item in evidence if item["kind"] == "action"}
    assert readings == {"read": "informs", "update": "changes"}
    assert "'update' changes things" in floor_of(evidence)["detail"]


def test_an_action_that_informs_only_in_a_less_frequent_sense_acts():
    # WordNet's "flip" informs only in its third sense ("flick" through): it acts on things.
    assert lexicon().entry("flip") is None
    risk, _, evidence = suggest("repo.flip_pages", "Flip the pages.")
    assert risk == "medium"
    assert "'flip' acts on something" in floor_of(evidence)["detail"]


def test_a_verb_that_runs_something_is_read_through_what_it_runs_or_the_labels():
    assert suggest("ci.run_tests", "Run the tests.").risk == "low"  # "tests": test, a read
    assert suggest("ci.run_linter", "Run the linter.").risk == "medium"  # nothing says what
    labelled = [
        *READS,
        {"name": "ci.run_checks", "description": "Run the checks.", "risk": "low"},
        {"name": "ci.run_audit", "description": "Run the audit.", "risk": "low"},
    ]
    risk, _, evidence = suggest("ci.run_linter", "Run the linter.", labelled=labelled)
    assert risk == "low"
    assert "2 of 2" in evidence[-2]["detail"] or "2 of 2" in evidence[-1].get("detail", "")
    labelled[-1] = {**labelled[-1], "risk": "medium"}  # one low, one medium: a tie goes up
    assert suggest("ci.run_linter", "Run the linter.", labelled=labelled).risk == "medium"


def test_neighbour_labels_raise_a_read():
    labelled = [
        *READS,
        {"name": "mail.read_message", "description": "Read a mail message", "risk": "medium"},
        {"name": "mail.read_thread", "description": "Read a mail thread", "risk": "medium"},
    ]
    risk, _, evidence = suggest("mail.read_draft", "Read a mail draft", labelled=labelled)
    assert risk == "medium"
    assert floor_of(evidence)["floor"] == "low"
    assert evidence[-1]["basis"] == "same action word 'read'"


def test_tools_that_merely_change_things_do_not_raise_a_change():
    # A deletion elsewhere is no reason to rate an update high: no broad pool of "changes".
    labelled = [
        {"name": "calendar.delete_event", "description": "Delete an existing calendar event",
         "risk": "high"},
        {"name": "notes.create_note", "description": "Create a note", "risk": "medium"},
    ]  # fmt: skip
    risk, _, evidence = suggest("calendar.update_event", "Update an existing calendar event",
                                labelled=labelled)  # fmt: skip
    assert risk == "medium"
    assert not [item for item in evidence if item["kind"] in ("neighbours", "model")]


def test_the_action_word_comes_from_where_the_name_puts_it():
    lex = lexicon()
    assert action_of("patch_file", "Patch a code file.", lex).word == "patch"
    assert action_of("treasury.ledgerEntryReverse", "", lex).word == "reverse"
    assert action_of("catalogue.view_item", "", lex).word == "view"
    assert action_of("clinic.chartView", "Show a patient's chart.", lex).word == "show"
    # A first word in -ing modifies the noun after it.
    assert action_of("shopping_write_records", "", lex).word == "write"


def test_made_up_words_do_not_grow_the_lexicon():
    lex = lexicon()
    wn = lex.wordnet
    before = len(lex._words), len(wn._index)
    for index in range(MISSING_BOUND + 50):
        suggest(f"junk.qz{index}x_qv{index}", f"Qz{index}x the thing.", labelled=[])
    assert (len(lex._words), len(wn._index)) == before
    assert len(wn._missing) <= MISSING_BOUND


# Rule 3: danger from what the tool does, not from the object it names.
@pytest.mark.parametrize(
    ("name", "description", "risk"),
    [("billing.read_bill", "Read a bill.", "low"), ("billing.pay_bill", "Pay a bill.", "high"),
     ("access.list_permissions", "List a user's permissions.", "low"),
     ("access.grant_permission", "Grant a user a permission.", "high"),
     ("payments_summarize", "Summarize payments.", "low")],
)  # fmt: skip
def test_an_object_names_what_is_read_the_action_what_is_done(name, description, risk):
    assert suggest(name, description).risk == risk


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


@pytest.mark.parametrize(
    ("name", "description", "word"),
    [("git_log", "Shows the commit logs", "shows"), ("log_event", "Record an event.", "record"),
     ("people.contractTerminate", "", "terminate"), ("list_commits", "", "list"),
     ("git_diff_staged", "", "diff"), ("people.leaveBalance", "Tell how many days are left.",
     "tell")],
)  # fmt: skip
def test_the_action_of_names_whose_words_are_also_nouns(name, description, word):
    assert action_of(name, description, lexicon()).word == word


# Rule 4: declared hints.
def test_a_read_only_hint_allows_low_for_words_that_do_not_say_otherwise():
    assert suggest("widgets.frobnicate", "Frobnicate a widget.").risk == "medium"
    risk, _, evidence = suggest_risk(
        name="widgets.frobnicate", description="Frobnicate a widget.", produces=[],
        permissions=[], labelled=[], annotations={"readOnlyHint": True},
    )  # fmt: skip
    assert risk == "low"
    assert {"kind": "hint", "hint": "readOnlyHint", "value": True} in evidence


def test_a_read_only_hint_the_words_contradict_is_shown_and_the_words_stand():
    risk, confidence, evidence = suggest_risk(
        name="records.delete_record", description="Delete a record.", produces=[],
        permissions=[], labelled=[], annotations={"readOnlyHint": True},
    )  # fmt: skip
    assert risk == "high" and confidence == 0.5
    contradiction = next(item for item in evidence if item["kind"] == "contradiction")
    assert contradiction["hint"] == "readOnlyHint" and "high" in contradiction["detail"]


def test_destructive_and_write_hints_raise_never_lower():
    def hinted(name, description, annotations):
        return suggest_risk(name=name, description=description, produces=[], permissions=[],
                            labelled=[], annotations=annotations)  # fmt: skip

    assert hinted("files.move_file", "Move a file.", {"destructiveHint": True}).risk == "high"
    risk, _, evidence = hinted("notes.read_note", "Read a note.", {"readOnlyHint": False})
    assert risk == "medium"
    assert any(item["kind"] == "contradiction" for item in evidence)
    # Declared not destructive: a deletion is still high, and the claim is shown.
    risk, _, evidence = hinted("notes.delete_note", "Delete a note.", {"destructiveHint": False,
                               "readOnlyHint": False})  # fmt: skip
    assert risk == "high"
    assert [item["hint"] for item in evidence if item["kind"] == "contradiction"] == [
        "destructiveHint"
    ]


# Rule 5: the application's own labels.
SPACE = [
    {"name": "vault.write_blob", "description": "Write a blob.", "risk": "high"},
    {"name": "vault.edit_blob", "description": "Edit a blob.", "risk": "high"},
    {"name": "vault.create_folder", "description": "Create a folder.", "risk": "medium"},
    {"name": "vault.read_blob", "description": "Read a blob.", "risk": "low"},
    {"name": "vault.list_blobs", "description": "List the blobs.", "risk": "low"},
    {"name": "vault.search_blobs", "description": "Search the blobs.", "risk": "low"},
]


def test_the_namespace_labels_raise_a_change_with_the_model():
    risk, confidence, evidence = suggest("vault.move_blob", "Move a blob.", labelled=SPACE)
    assert risk == "high"
    model = next(item for item in evidence if item["kind"] == "model")
    assert model["basis"] == "namespace 'vault'" and model["labels"] == 6
    assert confidence == model["probability"] >= 0.6
    # The same labels in another namespace say nothing about this one, once it has its own.
    elsewhere = [{**tool, "name": tool["name"].replace("vault.", "depot.")} for tool in SPACE]
    own = [
        {"name": f"shelf.{verb}_box", "description": f"{verb.capitalize()} a box.",
         "risk": risk} for verb, risk in
        (("read", "low"), ("list", "low"), ("create", "medium"), ("update", "medium"))
    ]  # fmt: skip
    assert suggest("shelf.move_box", "Move a box.", labelled=elsewhere + own).risk == "medium"


def test_the_model_needs_labelled_tools_of_the_same_reading_and_never_lowers():
    # Reads are all low here: no label says a read is rated higher, whatever the prior.
    reads_low = [*SPACE[:2], {**SPACE[2], "risk": "high"}, *SPACE[3:]]
    assert suggest("vault.view_blob", "View a blob.", labelled=reads_low).risk == "low"
    lowered = [{**tool, "risk": "low"} for tool in SPACE]
    assert suggest("vault.delete_blob", "Delete a blob.", labelled=lowered).risk == "high"


def test_the_verb_lexicon_has_a_reason_for_every_group_and_operators_extend_it(tmp_path):
    vocabulary = vocabulary_load(VERBS_FILE)
    assert all(entry.reason for entry in vocabulary.words.values())
    assert vocabulary.words["delete"].danger == "destructive"
    assert vocabulary.words["get"].group == "read"
    extra = tmp_path / "verbs.toml"
    extra.write_text('[destructive]\nreason = "our policy"\nwords = ["archive", "zorble"]\n')
    combined = vocabulary_load(VERBS_FILE, extra)
    assert combined.words["archive"].danger == "destructive"  # replaces "change"
    assert combined.words["zorble"].reason == "our policy"
    extra.write_text('[dangerous]\nwords = ["x"]\n')
    with pytest.raises(VocabularyInvalid, match=r"verbs\.toml: unknown group \[dangerous\]"):
        vocabulary_load(extra)
    extra.write_text("[read\n")
    with pytest.raises(VocabularyInvalid, match=r"verbs\.toml"):
        vocabulary_load(extra)


def test_an_operator_lexicon_changes_suggestions(tmp_path):
    extra = tmp_path / "verbs.toml"
    extra.write_text('[money]\nreason = "moves credits"\nwords = ["zorble"]\n')
    try:
        lexicon_configure(extra=extra)
        risk, _, evidence = suggest("credits.zorble_points", "")
        assert risk == "high"
        assert "moves credits" in next(i for i in evidence if i["kind"] == "verb")["via"]
    finally:
        lexicon_configure(extra=None)
    assert suggest("credits.zorble_points", "").risk == "medium"


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


@pytest.mark.parametrize("word", ["transfer", "directory", "balance", "status"])
def test_a_word_that_is_a_verb_or_names_no_act_is_not_nominalised(word):
    assert lexicon().nominalised(word) is None


def test_a_description_verb_only_wordnet_reads_does_not_overrule_the_reviewed_name():
    # "turn" reads as a change in WordNet; "geocode" is a read of the reviewed lexicon.
    risk, _, evidence = suggest("maps.geocode", "Turn a street address into coordinates.")
    assert risk == "low"
    assert [item["word"] for item in evidence if item["kind"] == "action"] == ["geocode"]


def test_a_dangerous_description_verb_still_counts_beside_a_reviewed_read_name():
    risk, _, _ = suggest("records.show_record", "Obliterate the record after showing it.")
    assert risk == "high"


ALTERATIONS_HIGH = [
    {"name": f"ledger.{verb}_{thing}", "description": f"{verb.capitalize()} an existing {thing}.",
     "risk": "high"}
    for verb, thing in [("update", "entry"), ("patch", "account"), ("edit", "posting")]
] + [
    {"name": "ledger.create_entry", "description": "Create a new entry.", "risk": "medium"},
    {"name": "ledger.add_note", "description": "Add a note to the ledger.", "risk": "medium"},
    {"name": "ledger.append_line", "description": "Append a line.", "risk": "medium"},
    {"name": "ledger.attach_receipt", "description": "Attach a receipt.", "risk": "medium"},
    {"name": "ledger.show_entry", "description": "Show one entry.", "risk": "low"},
]  # fmt: skip


def test_an_application_that_rates_alterations_high_gets_them_suggested_high():
    risk, _, evidence = suggest(
        "ledger.modify_posting", "Modify an existing posting.", labelled=ALTERATIONS_HIGH
    )
    assert risk == "high"
    assert next(item for item in evidence if item["kind"] == "model")["vote"] == "high"


def test_additions_are_not_raised_by_an_application_that_rates_alterations_high():
    risk, _, _ = suggest("ledger.insert_line", "Insert a new line.", labelled=ALTERATIONS_HIGH)
    assert risk == "medium"


def test_alterations_stay_medium_where_the_application_rates_them_medium():
    labelled = [{**tool, "risk": "medium"} if tool["risk"] == "high" else tool
                for tool in ALTERATIONS_HIGH]  # fmt: skip
    risk, _, _ = suggest("ledger.modify_posting", "Modify an existing posting.", labelled=labelled)
    assert risk == "medium"


def test_the_object_a_tool_names_never_carries_the_labels_model_to_high():
    # Reviewers here rated three changes to invoices high; labelling one is no more than any
    # other change, which they rated medium as often.
    labelled = [
        {"name": "billing.attach_invoice", "description": "Attach an invoice.", "risk": "high"},
        {"name": "billing.merge_invoice", "description": "Merge an invoice.", "risk": "high"},
        {"name": "billing.archive_invoice", "description": "Archive an invoice.", "risk": "high"},
        {"name": "billing.create_note", "description": "Create a note.", "risk": "medium"},
        {"name": "billing.tag_customer", "description": "Tag a customer.", "risk": "medium"},
        {"name": "billing.add_contact", "description": "Add a contact.", "risk": "medium"},
    ]
    risk, _, _ = suggest("billing.label_invoice", "Label an invoice.", labelled=labelled)
    assert risk == "medium"


def ops(name, risk, *, produces=(), requires=(), gated=()):
    return {"name": f"ops.{name}", "description": "", "produces": list(produces),
            "requires": list(requires), "gated": list(gated), "risk": risk}  # fmt: skip


GATED_HIGH = [
    ops("submit_batch", "high", gated=["approval_id"]),
    ops("attach_key", "high", gated=["approval_id"]),
    ops("insert_rule", "high", gated=["approval_id"]),
    ops("add_note", "medium"),
    ops("tag_item", "medium"),
    ops("append_line", "medium"),
]


def test_calls_failing_without_a_precondition_raise_where_reviewers_rate_guarded_tools_high():
    guarded = suggest_risk(name="ops.queue_job", description="", produces=[], permissions=[],
                           labelled=GATED_HIGH, gated=["approval_id"])  # fmt: skip
    assert guarded.risk == "high"
    assert any(item["kind"] == "observed" and item["signal"] == "gated"
               for item in guarded.evidence)  # fmt: skip
    unguarded = suggest_risk(name="ops.queue_job", description="", produces=[], permissions=[],
                             labelled=GATED_HIGH)  # fmt: skip
    assert unguarded.risk == "medium"


CONSUMED_HIGH = [
    ops("submit_batch", "high", produces=["batch_id"]),
    ops("attach_key", "high", produces=["key_id"]),
    ops("insert_rule", "high", produces=["rule_id"]),
    ops("show_batch", "low", requires=["batch_id"]),
    ops("show_key", "low", requires=["key_id"]),
    ops("show_rule", "low", requires=["rule_id"]),
    ops("add_note", "medium", produces=["note_id"]),
    ops("tag_item", "medium", produces=["tag_id"]),
    ops("append_line", "medium", produces=["line_id"]),
]


def test_outputs_other_tools_require_raise_where_reviewers_rate_such_tools_high():
    labelled = [*CONSUMED_HIGH, ops("show_job", "low", requires=["job_id"])]
    consumed = suggest_risk(name="ops.queue_job", description="", produces=["job_id"],
                            permissions=[], labelled=labelled)  # fmt: skip
    assert consumed.risk == "high"
    observed = next(item for item in consumed.evidence if item["kind"] == "observed")
    assert observed["signal"] == "consumed" and "ops.show_job" in observed["detail"]
    alone = suggest_risk(name="ops.queue_job", description="", produces=["job_id"],
                         permissions=[], labelled=CONSUMED_HIGH)  # fmt: skip
    assert alone.risk == "medium"


def test_behaviour_never_lowers_what_the_words_say():
    labelled = [{**tool, "risk": "low"} for tool in GATED_HIGH]
    assert suggest_risk(name="ops.purge_jobs", description="", produces=[], permissions=[],
                        labelled=labelled, gated=["approval_id"]).risk == "high"  # fmt: skip


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("return_delivered_order_items", "Return some items of a delivered order."),
        ("orders.return_items", "Return the delivered items of an order for a refund."),
        ("orders.return_items", "Return the items the customer purchased."),
    ],
)
def test_returning_delivered_or_bought_items_is_a_refund_not_a_read(name, description):
    suggestion = suggest(name, description)
    assert suggestion.risk == "high"
    money = [e for e in suggestion.evidence if e.get("class") == "money" and e["word"] == "return"]
    assert money and "refund" in money[0]["via"]


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("orders.list_orders", "Returns the delivered orders of a user."),
        ("orders.latest_total", "Return the total of the latest order."),
        ("library.return_book", "Return a borrowed book to the shelf."),
    ],
)
def test_return_of_a_value_or_of_what_was_not_bought_stays_a_read(name, description):
    suggestion = suggest(name, description)
    assert suggestion.risk == "low"
    assert not any(e.get("class") == "money" for e in suggestion.evidence)


def test_transferring_to_a_human_agent_hands_over_the_conversation_and_moves_no_money():
    handover = suggest(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the user's issue.",
    )
    assert handover.risk == "medium"
    assert not any(e.get("class") == "money" for e in handover.evidence)
    action = next(e for e in handover.evidence if e["kind"] == "action")
    assert action["reading"] == "acts" and "agent" in action["via"]
    # Money to a person, or a transfer of money, still moves money.
    assert suggest("payments.transfer", "Transfer an amount to a customer.").risk == "high"
    assert suggest("transfer_funds", "Transfer money to another account.").risk == "high"
    assert suggest("pay_agent", "Pay the agent's commission.").risk == "high"


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
