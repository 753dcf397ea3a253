"""Judging one call against its approved contract (pure: no database, no server)."""

from gateway.checks import Checked, Refusal, call_check

BOOK = {
    "name": "travel.book",
    "description": "Book a trip.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "pattern": "^[A-Z][a-z]+$"},
            "refundable": {"type": "boolean"},
            "insurance": {"type": "boolean"},
            "card": {"type": "string"},
            "voucher": {"type": "string"},
        },
        "required": ["city"],
    },
    "requires": ["traveller_id"],
    "produces": ["booking_id"],
    "invariants": [
        {
            "id": "insured-refunds",
            "rule": "A refundable booking is insured.",
            "kind": "requires_arg_when",
            "params": {"when": "refundable", "arg": "insurance", "value": True},
            "action": "correct",
        },
        {
            "id": "one-payment",
            "rule": "Pay by card or by voucher, never both.",
            "kind": "mutually_exclusive",
            "params": {"args": ["card", "voucher"]},
            "action": "reject",
        },
        {
            "id": "once-per-city",
            "rule": "Book each city once.",
            "kind": "unique_calls",
            "params": {"fields": ["city"]},
            "action": "drop",
        },
    ],
}


def check(args, **kwargs):
    return call_check(name="travel.book", document=BOOK, args=args, **kwargs)


def test_it_passes_valid_arguments_unchanged():
    checked = check({"city": "Oslo"}, produced=["traveller_id"])
    assert checked == Checked(args={"city": "Oslo"})


def test_it_refuses_arguments_the_input_schema_refuses_and_names_the_argument():
    refusal = check({"city": "oslo"}, produced=["traveller_id"])
    assert isinstance(refusal, Refusal)
    assert (refusal.rule, refusal.field) == ("input_schema", "args.city")
    assert "approved input schema of travel.book" in refusal.message
    assert "Fix the argument" in refusal.message


def test_it_refuses_arguments_that_are_not_an_object():
    refusal = check(["Oslo"])
    assert isinstance(refusal, Refusal)
    assert refusal.rule == "input_schema"


def test_it_corrects_the_arguments_an_invariant_corrects_and_says_so():
    checked = check({"city": "Oslo", "refundable": True}, produced=["traveller_id"])
    assert isinstance(checked, Checked)
    assert checked.args == {"city": "Oslo", "refundable": True, "insurance": True}
    assert checked.corrected == [
        {"invariant": "insured-refunds", "rule": "A refundable booking is insured."}
    ]


def test_it_refuses_a_call_a_reject_invariant_refuses_naming_its_arguments():
    refusal = check({"city": "Oslo", "card": "4242", "voucher": "V1"}, produced=["traveller_id"])
    assert isinstance(refusal, Refusal)
    assert (refusal.rule, refusal.field) == ("one-payment", "card, voucher")
    assert "Pay by card or by voucher, never both." in refusal.message


def test_it_refuses_a_call_its_session_already_made_when_the_invariant_drops_it():
    earlier = [{"tool": "travel.book", "args": {"city": "Oslo"}}]
    refusal = check({"city": "Oslo"}, earlier=earlier, produced=["traveller_id"])
    assert isinstance(refusal, Refusal)
    assert refusal.rule == "once-per-city"
    assert "drops this call" in refusal.message
    assert isinstance(check({"city": "Rome"}, earlier=earlier, produced=["traveller_id"]), Checked)


def test_it_warns_of_unmet_requires_by_default():
    checked = check({"city": "Oslo"})
    assert isinstance(checked, Checked)
    assert checked.warnings[0]["rule"] == "unmet_requires"
    assert "traveller_id" in checked.warnings[0]["message"]


def test_it_refuses_unmet_requires_when_enforced_and_ignores_them_when_off():
    refusal = check({"city": "Oslo"}, requires_mode="enforce")
    assert isinstance(refusal, Refusal)
    assert (refusal.rule, refusal.field) == ("unmet_requires", "traveller_id")
    assert check({"city": "Oslo"}, requires_mode="off") == Checked(args={"city": "Oslo"})
