"""Rule 4: the server author's declared hints (``learning.risk._hints``)."""

from learning.risk import suggest_risk
from learning.tests.risk import suggest


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
