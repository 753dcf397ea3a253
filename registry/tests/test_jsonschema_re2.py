"""The RE2 shim against the installed jsonschema: what it extends must still be there.

The first tests check the surface the shim stands on and name the jsonschema version when it
moved; the behaviour tests after them only run patterns that would backtrack for hours on
Python's `re` once RE2 is known to be the engine in use.
"""

import tomllib
import tracemalloc
from importlib.metadata import version
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from packaging.requirements import Requirement

from registry.jsonschema_re2 import (
    NO_RETRIEVAL,
    REPLACED_KEYWORDS,
    LinearValidator,
    UnsupportedPattern,
    WorkBudgetExceeded,
    linear_validator,
    work_budget,
)

JSONSCHEMA = version("jsonschema")
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
CATASTROPHIC = "^(a+)+$"
NEAR_MISS = "a" * 50 + "b"  # backtracking tries 2^50 splits of the a's before giving up


def errors(schema, instance):
    return [error.message for error in linear_validator(schema, registry=NO_RETRIEVAL)
            .iter_errors(instance)]  # fmt: skip


def test_the_installed_jsonschema_is_in_the_range_the_shim_was_checked_on():
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pinned = next(Requirement(d) for d in dependencies if Requirement(d).name == "jsonschema")

    assert pinned.specifier.contains(JSONSCHEMA), (
        f"jsonschema {JSONSCHEMA} is installed but pyproject.toml pins {pinned.specifier}: "
        "run registry/tests/test_jsonschema_re2.py against it before widening the range"
    )


def test_every_keyword_the_shim_replaces_still_exists_in_jsonschema():
    missing = sorted(set(REPLACED_KEYWORDS) - set(Draft202012Validator.VALIDATORS))

    assert not missing, (
        f"jsonschema {JSONSCHEMA}: Draft202012Validator.VALIDATORS no longer has {missing}; "
        "the shim in registry/jsonschema_re2.py must be updated"
    )


def test_every_keyword_runs_through_the_shim():
    shimmed = {
        keyword
        for keyword, function in LinearValidator.VALIDATORS.items()
        if getattr(function, "__wrapped__", None) is not None
    }

    assert shimmed == set(Draft202012Validator.VALIDATORS) | set(REPLACED_KEYWORDS), (
        f"jsonschema {JSONSCHEMA}: validators.extend no longer installs the shim's keywords"
    )
    for keyword, function in REPLACED_KEYWORDS.items():
        assert LinearValidator.VALIDATORS[keyword].__wrapped__ is function


def test_the_private_resolver_the_shim_follows_refs_with_is_still_there():
    validator = Draft202012Validator({"$defs": {"a": {"type": "string"}}})

    try:
        resolved = validator._resolver.lookup("#/$defs/a")
        validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
    except (AttributeError, TypeError) as exc:
        pytest.fail(
            f"jsonschema {JSONSCHEMA}: validator._resolver.lookup / evolve(_resolver=...) "
            f"changed ({exc}); unevaluatedProperties in registry/jsonschema_re2.py follows $ref "
            "with it"
        )
    assert resolved.contents == {"type": "string"}


def test_patterns_run_on_re2():
    # Python's re runs a back-reference; RE2 refuses it: proof of which engine is in use.
    with pytest.raises(UnsupportedPattern):
        errors({"pattern": "(a)\\1"}, "aa")


PROPERTY_NAME_SCHEMAS = {
    "patternProperties": {"patternProperties": {CATASTROPHIC: False}},
    "additionalProperties": {
        "patternProperties": {CATASTROPHIC: True},
        "additionalProperties": False,
    },
    "unevaluatedProperties": {
        "patternProperties": {CATASTROPHIC: True},
        "unevaluatedProperties": False,
    },
}


def test_a_catastrophic_pattern_is_decided_by_re2():
    schema = {"pattern": CATASTROPHIC}

    assert errors(schema, NEAR_MISS) == [f"{NEAR_MISS!r} does not match {CATASTROPHIC!r}"]
    assert errors(schema, "a" * 50) == []


@pytest.mark.parametrize("keyword", PROPERTY_NAME_SCHEMAS)
def test_a_catastrophic_property_name_pattern_is_decided_by_re2(keyword):
    schema = PROPERTY_NAME_SCHEMAS[keyword]
    matched = keyword == "patternProperties"  # the pattern's own schema (False) rejects a match

    assert bool(errors(schema, {"a" * 50: 1})) is matched, f"jsonschema {JSONSCHEMA}"
    assert bool(errors(schema, {NEAR_MISS: 1})) is not matched, f"jsonschema {JSONSCHEMA}"


def test_unevaluated_properties_keeps_its_meaning_through_refs_and_combinators():
    schema = {
        "$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "anyOf": [{"patternProperties": {"^x_": True}}, {"required": ["never"]}],
        "if": {"required": ["kind"]},
        "then": {"properties": {"kind": {"const": "a"}}},
        "unevaluatedProperties": False,
    }

    assert errors(schema, {"id": 1, "x_note": "n", "kind": "a"}) == []
    assert errors(schema, {"id": 1, "other": 2, "more": 3}) == [
        "Unevaluated properties are not allowed ('more', 'other' were unexpected)"
    ]


@pytest.mark.parametrize("where", ["root", "nested"])
def test_a_subschema_cannot_switch_to_another_validator(where):
    # jsonschema's evolve() hands a subschema naming a dialect to its own validator class: its
    # patterns would run on Python's re, outside the budget.
    dialect = "http://json-schema.org/draft-07/schema#"
    if where == "root":
        schema = {"$schema": dialect, "properties": {"q": {"pattern": CATASTROPHIC}}}
        assert errors(schema, {"q": NEAR_MISS}) == [
            f"{NEAR_MISS!r} does not match {CATASTROPHIC!r}"
        ]
        return
    schema = {"properties": {"q": {"$schema": dialect, "pattern": CATASTROPHIC}}}
    with pytest.raises(SchemaError) as raised:
        linear_validator(schema, registry=NO_RETRIEVAL)
    assert list(raised.value.path) == ["properties", "q", "$schema"]


def test_a_work_budget_stops_combinatorial_validation():
    definitions = {"d0": {"type": "string"}}
    for level in range(1, 31):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        definitions[f"d{level}"] = {"anyOf": [below, below]}
    validator = linear_validator(
        {"$defs": definitions, "$ref": "#/$defs/d30"}, registry=NO_RETRIEVAL
    )

    with work_budget(10_000), pytest.raises(WorkBudgetExceeded) as raised:
        list(validator.iter_errors(1))
    with work_budget(10_000):
        assert list(validator.iter_errors("fine")) == []

    assert raised.value.evaluations == 10_000


def peak_bytes(function):
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_combinators_keep_no_tree_of_failed_branches():
    # jsonschema's anyOf keeps every failed branch's errors: 25,000 errors, 73 MB, by the time
    # a budget of 50,000 ran out on this schema.
    definitions = {"d0": {"type": "string"}}
    for level in range(1, 31):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        definitions[f"d{level}"] = {"anyOf": [below, below], "oneOf": [below]}
    validator = linear_validator(
        {"$defs": definitions, "$ref": "#/$defs/d30"}, registry=NO_RETRIEVAL
    )

    def run():
        # A quarter of that budget: about 17 MB of kept errors at that rate, far above the
        # bound, and quick under tracemalloc, which slows every evaluation.
        with work_budget(12_000), pytest.raises(WorkBudgetExceeded):
            list(validator.iter_errors(1))

    assert peak_bytes(run) < 2_000_000


def test_messages_quote_a_long_instance_briefly_and_pay_for_the_quote():
    branches = {"anyOf": [{"type": "integer"}, {"enum": [1, 2]}, {"maxLength": 3}] * 10}
    validator = linear_validator({"anyOf": [branches] * 10}, registry=NO_RETRIEVAL)
    long_text = "x" * 500_000

    def run():
        with work_budget(200_000):
            return [error.message for error in validator.iter_errors(long_text)]

    with work_budget(100_000), pytest.raises(WorkBudgetExceeded):
        list(validator.iter_errors(long_text))  # 300 quotes of 500 KB: 150,000 evaluations' worth

    assert run() == [repr(long_text)[:77] + "... is not valid under any of the given schemas"]
    assert peak_bytes(run) < 5 * len(long_text)


@pytest.mark.parametrize(
    ("schema", "instance", "message"),
    [
        ({"anyOf": [{"type": "integer"}, {"minimum": 3}]}, "a", None),
        ({"anyOf": [{"type": "string"}, {"minimum": 3}]}, 4, None),
        ({"anyOf": [{"type": "string"}, {"minimum": 3}]}, 1, "1 is not valid under any"),
        ({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, 1, None),
        ({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, 5, "5 is valid under more than one"),
        ({"oneOf": [{"type": "string"}, {"type": "null"}]}, 5, "5 is not valid under any"),
    ],
)
def test_combinators_keep_their_meaning(schema, instance, message):
    found = errors(schema, instance)

    assert found == [] if message is None else found[0].startswith(message)
    assert Draft202012Validator(schema).is_valid(instance) == (message is None)


def test_an_enclosing_budget_is_spent_by_inner_ones():
    validator = linear_validator({"items": {"type": "integer"}}, registry=NO_RETRIEVAL)

    with work_budget(150), pytest.raises(WorkBudgetExceeded) as raised:
        for _ in range(3):
            with work_budget(100):
                list(validator.iter_errors(list(range(60))))

    assert raised.value.evaluations == 150
