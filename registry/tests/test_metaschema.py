"""The metaschema as one document (registry/metaschema.py) against jsonschema's own check.

Every error, its place in the schema, its keyword and its order must be the ones
``Draft202012Validator.check_schema`` reads from the published metaschema: the schemas below
reach every vocabulary, the root's deprecated keywords, the references by ``$defs`` and the
dynamic references at depth, valid and not.
"""

import random

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from registry.jsonschema_re2 import NO_RETRIEVAL, LinearValidator, linear_validator
from registry.metaschema import METASCHEMA_VALIDATOR, one_document
from registry.validation import schema_errors

PUBLISHED = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)


def errors(validator, schema):
    found = validator.iter_errors(schema)
    return [(error.message, list(error.path), error.validator) for error in found]


TRICKY = [
    {},
    True,
    False,
    {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    {"type": "strin"},
    {"type": ["string", "string"]},
    {"type": []},
    # The same wrong value at every depth a dynamic reference reaches.
    {"properties": {"a": {"items": {"properties": {"b": {"not": {"type": 3}}}}}}},
    {"$defs": {"x": {"minLength": -1}}, "allOf": [{"$ref": "#/$defs/x"}, {"anyOf": []}]},
    {"prefixItems": [], "contains": {"maxContains": "1"}, "minContains": 1.5},
    {"if": {"const": 1}, "then": {"enum": 3}, "else": {"required": ["a", "a"]}},
    {"dependentRequired": {"a": [1]}, "dependentSchemas": {"a": {"multipleOf": 0}}},
    {"patternProperties": {"(": {}}, "pattern": "["},
    {"propertyNames": {"maxLength": 2.0}, "unevaluatedProperties": {"type": "nothing"}},
    {"unevaluatedItems": 3, "contentSchema": {"minItems": -2}, "contentEncoding": 7},
    # Property names that are keywords elsewhere: read as names, their schemas checked.
    {"properties": {"$ref": {"$ref": 5}, "$dynamicRef": {"$dynamicRef": "#meta"}}},
    {"$ref": "#a#b", "$anchor": "1bad", "$dynamicAnchor": "", "$id": "x#frag"},
    {"$vocabulary": {"not a uri": 1}, "$comment": 3, "$schema": 4},
    # The root's deprecated keywords, whose references went to other documents.
    {"definitions": {"a": {"type": 1}}, "dependencies": {"a": 3, "b": ["c", "c"]}},
    {"$recursiveAnchor": "yes", "$recursiveRef": 1},
    {"title": 1, "description": [], "deprecated": "no", "readOnly": 0, "examples": {}},
    {"format": 5, "default": None, "writeOnly": None, "x-custom": {"type": 1}},
    {"items": [{"type": "string"}], "additionalProperties": [], "oneOf": [True, 1]},
    {"properties": {"a": {"properties": {"b": {"properties": {"c": {"items": False}}}}}}},
]


@pytest.mark.parametrize("schema", TRICKY, ids=range(len(TRICKY)))
def test_one_document_finds_the_published_metaschemas_errors_in_their_order(schema):
    assert errors(METASCHEMA_VALIDATOR, schema) == errors(PUBLISHED, schema)


def _generated(rnd, depth=0):
    keywords = [
        *Draft202012Validator.VALIDATORS,
        *("$id", "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "title"),
    ]
    scalars = ["string", "object", "strin", "#/$defs/a", "#a", "(", 0, -1, 2.5, True, None, []]
    if depth > 3 or rnd.random() < 0.15:
        return rnd.choice([True, False, {}, rnd.choice(scalars)])
    schema = {}
    for _ in range(rnd.randint(0, 4)):
        keyword = rnd.choice(keywords)
        shape = rnd.random()
        if shape < 0.3:
            schema[keyword] = {rnd.choice("ab("): _generated(rnd, depth + 1) for _ in range(2)}
        elif shape < 0.5:
            schema[keyword] = [_generated(rnd, depth + 1) for _ in range(rnd.randint(0, 2))]
        elif shape < 0.7:
            schema[keyword] = _generated(rnd, depth + 1)
        else:
            schema[keyword] = rnd.choice(scalars)
    return schema


def test_one_document_agrees_with_the_published_metaschema_on_generated_schemas():
    rnd = random.Random(2026)
    schemas = [_generated(rnd) for _ in range(2000)]
    invalid = 0
    for schema in schemas:
        found = errors(METASCHEMA_VALIDATOR, schema)
        assert found == errors(PUBLISHED, schema), schema
        invalid += bool(found)
    assert 0 < invalid < len(schemas)  # both kinds were compared


def test_the_document_has_no_reference_left_outside_itself():
    document = one_document()
    text = repr(document)
    assert "#meta" not in text and "meta/" not in text
    for part in (document, *document["allOf"]):  # nothing names a document to resolve
        assert not {"$id", "$schema", "$dynamicAnchor"} & set(part)


def test_a_schema_is_refused_with_the_published_metaschemas_first_error():
    schema = {"type": "object", "properties": {"a": {"items": {"minLength": -1}}}}
    first = next(PUBLISHED.iter_errors(schema))
    assert schema_errors(schema, needs_object=True) == [
        f"not a valid JSON Schema at properties/a/items/minLength: {first.message}"
    ]


@pytest.mark.parametrize("schema", TRICKY, ids=range(len(TRICKY)))
def test_the_linear_validator_refuses_a_schema_as_jsonschemas_own_check_does(schema):
    if isinstance(schema, dict):
        schema = {key: value for key, value in schema.items() if key != "$schema"}
    try:
        LinearValidator.check_schema(schema)
    except SchemaError as error:
        published = (error.message, list(error.path), error.validator)
    else:
        published = None
    try:
        linear_validator(schema, registry=NO_RETRIEVAL)
    except SchemaError as error:
        assert (error.message, list(error.path), error.validator) == published
    else:
        assert published is None
