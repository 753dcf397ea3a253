import pytest

from reviews.schema_changes import schema_changes


def found(old, new):
    """``{(path, message prefix up to the colon): (breaks, loosens)}``."""
    return {
        (change.path, change.message.split(":")[0]): (change.breaks, change.loosens)
        for change in schema_changes(old, new)
    }


def obj(properties, required=()):
    return {"type": "object", "properties": properties, "required": list(required)}


NUMBER = {"type": "number"}
INTEGER = {"type": "integer"}


def test_it_finds_nothing_between_equal_schemas():
    schema = obj({"a": {"type": "string", "maxLength": 5}}, ["a"])
    assert schema_changes(schema, schema) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (INTEGER, NUMBER, {("", "type widened"): (False, True)}),
        (NUMBER, INTEGER, {("", "type narrowed"): (True, False)}),
        ({"type": ["number"]}, {"type": ["number", "integer"]}, {}),
        ({"type": ["integer", "number"]}, NUMBER, {}),
        (
            {"type": "string"},
            {"type": "object"},
            {
                ("", "type narrowed"): (True, False),
                ("", "type widened"): (False, True),
            },
        ),  # fmt: skip
        ({}, NUMBER, {("", "type set to ['number']"): (True, False)}),
        (NUMBER, {}, {("", "type no longer constrained (was ['number'])"): (False, True)}),
    ],
)
def test_an_integer_is_a_number_whichever_reader_asks(old, new, expected):
    assert found(old, new) == expected


def test_it_reads_required_properties_and_bounds_both_ways():
    old = obj({"a": {"type": "string", "maxLength": 10}, "b": {"minimum": 1}}, ["a"])
    new = obj(
        {"a": {"type": "string", "maxLength": 5}, "b": {"minimum": 0}, "c": {}, "d": {}},
        ["b", "c"],
    )
    assert found(old, new) == {
        ("a", "no longer required"): (False, True),
        ("b", "now required"): (True, False),
        ("a", "maxLength tightened"): (True, False),
        ("b", "minimum relaxed"): (False, True),
        ("c", "new required property"): (True, False),
        ("d", "new optional property"): (False, False),
    }


def test_it_reads_enums_alternatives_and_opaque_assertions():
    old = {
        "properties": {
            "kind": {"enum": ["a", "b"]},
            "when": {"anyOf": [{"type": "string"}, NUMBER]},
            "mail": {"pattern": "@"},
        }
    }
    new = {
        "properties": {
            "kind": {"enum": ["b", "c"]},
            "when": {"anyOf": [{"type": "string"}]},
            "mail": {"pattern": ".*"},
        },
        "additionalProperties": False,
    }
    assert found(old, new) == {
        ("kind", "enum narrowed"): (True, False),
        ("kind", 'enum widened by ["c"]'): (False, True),
        ("when.anyOf.1", "alternative removed"): (True, False),
        ("mail", "pattern changed"): (True, True),
        ("", "additionalProperties closed"): (True, False),
    }
    assert found(new, old)[("when.anyOf.1", "anyOf alternative added")] == (False, True)


def test_a_removed_property_both_breaks_its_callers_and_goes_unchecked():
    old = obj({"a": obj({"deep": NUMBER})})
    assert found(old, obj({})) == {("a", "subschema removed"): (True, True)}
