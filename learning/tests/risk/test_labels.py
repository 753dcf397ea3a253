"""Rule 5: what the application's labels say (``learning.risk._labels``)."""

from learning.risk import suggest_risk
from learning.tests.risk import READS, floor_of, suggest


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
