from sources.compat import compatibility

INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}


def obj(properties, required=()):
    return {"type": "object", "properties": properties, "required": list(required)}


def test_compatibility_sorts_the_same_changes_into_breaking_and_widening():
    old_in = obj({"n": INTEGER, "gone": {}})
    new_in = obj({"n": NUMBER, "token": {"type": "string"}}, ["token"])
    old_out = obj({"id": {}, "name": {}})
    new_out = obj({"id": INTEGER})
    assert compatibility(old_in, new_in, old_out, new_out) == {
        "breaking": [
            "gone: subschema removed: what it constrained is no longer checked",
            "token: new required property",
            "output name: removed",
        ],
        "widening": ["n: type widened: ['integer'] to ['number']"],
    }
