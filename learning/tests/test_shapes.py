"""The TypedDicts of learning/shapes.py name every key their writers write, and no other."""

from learning.aggregates import new_aggregate, new_outputs
from learning.inference import infer_contract
from learning.shapes import Aggregate, InferredDocument, OutputCounts


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
