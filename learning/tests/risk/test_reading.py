"""Rules 1–3: the floor a tool's words set before any label (``learning.risk._reading``)."""

import pytest

from learning.risk import lexicon
from learning.tests.risk import floor_of, suggest


def test_benign_reads_stay_low():
    risk, _, evidence = suggest("catalogue.browse_offers", "Browse the offers of a catalogue")
    assert risk == "low"
    assert not [item for item in evidence if item.get("class")]


def test_with_nothing_known_the_suggestion_is_medium():
    assert suggest("thing.frobnicate", "Frobnicate.", labelled=[]).risk == "medium"


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


def test_a_description_verb_only_wordnet_reads_does_not_overrule_the_reviewed_name():
    # "turn" reads as a change in WordNet; "geocode" is a read of the reviewed lexicon.
    risk, _, evidence = suggest("maps.geocode", "Turn a street address into coordinates.")
    assert risk == "low"
    assert [item["word"] for item in evidence if item["kind"] == "action"] == ["geocode"]


def test_a_dangerous_description_verb_still_counts_beside_a_reviewed_read_name():
    risk, _, _ = suggest("records.show_record", "Obliterate the record after showing it.")
    assert risk == "high"


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
