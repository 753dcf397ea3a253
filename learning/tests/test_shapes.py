"""The TypedDicts of learning/shapes.py (and the DriftItem of reviews/shapes.py) name every
key their writers write, and no other."""

from learning.aggregates import new_aggregate, new_outputs
from learning.baselines import behaviour_drift
from learning.evidence import drift_item_support
from learning.inference import contract_drift, infer_contract
from learning.shapes import Aggregate, DriftItem, InferredDocument, OutputCounts


def test_a_new_aggregate_has_the_keys_its_type_requires():
    assert set(new_aggregate()) == Aggregate.__required_keys__
    assert set(new_outputs()) == OutputCounts.__required_keys__


def test_an_inferred_document_has_the_keys_its_type_names():
    document = infer_contract(
        name="mail.send", description="Send an email", input_schema=None, aggregate=new_aggregate()
    )
    assert set(document) == InferredDocument.__required_keys__
    for key in ("cost", "confidence", "evidence"):
        typed = InferredDocument.__annotations__[key].__required_keys__
        assert set(document[key]) == typed, key


def test_drift_items_carry_the_keys_their_type_names_and_no_other():
    since = new_aggregate()
    since.update(total=200, successes=100, errors=100)
    since["baseline"] = {"version": 1, "total": 200, "errors": 2, "durations": {}}
    items = behaviour_drift(approved={"cost": {}}, since=since, min_support=5)
    inferred = infer_contract(
        name="mail.delete_all", description="Delete every email", input_schema=None,
        aggregate=new_aggregate(),
    )  # fmt: skip
    approved = {"requires": ["mailbox"], "produces": [], "risk": "low", "input_schema": {}}
    items += contract_drift(approved=approved, inferred=inferred)
    assert {item["field"] for item in items} == {"error_rate", "requires", "risk"}
    allowed = DriftItem.__required_keys__ | DriftItem.__optional_keys__
    for item in items:
        supported = drift_item_support(item, since)
        assert DriftItem.__required_keys__ <= set(supported) <= allowed, item["field"]
