"""JSON Schema (Draft 2020-12) for schemas written by strangers: RE2 regexes, bounded work.

``linear_validator(schema, registry=...)`` checks a schema and returns a validator that

- runs every regular expression (``pattern``, ``patternProperties``, and the ones
  ``additionalProperties`` and ``unevaluatedProperties`` consult) on RE2, which matches in linear
  time: ``^(a+)+$`` cannot stall a worker. A pattern RE2 cannot compile (look-around,
  back-reference) raises ``UnsupportedPattern`` rather than falling back to a backtracking engine;
- compares ``uniqueItems`` in one pass over canonical JSON texts instead of pair by pair;
- counts every keyword it evaluates against the ``work_budget`` in force, and raises
  ``WorkBudgetExceeded`` once it is spent, so nested combinators cannot run for hours;
- stays on these keywords everywhere: jsonschema switches to its own validator class for any
  subschema that names a dialect with ``$schema``, so a ``$schema`` below the root is refused
  and the root's is dropped (every subschema is read as Draft 2020-12).

It is built on jsonschema's extension API: ``validators.extend`` over ``Draft202012Validator``
with keyword functions taking the place of entries in its ``VALIDATORS`` table, and the
validator methods ``descend``, ``evolve``, ``is_valid`` and ``is_type``. One private name
remains: ``unevaluatedProperties`` follows ``$ref`` through ``validator._resolver.lookup``,
as jsonschema's own keyword does. ``registry/tests/test_jsonschema_re2.py`` checks all of it against
the installed jsonschema and names its version when something moved; pyproject.toml pins the
range it was checked on.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from .metaschema import METASCHEMA_VALIDATOR

Keyword = Callable[[Any, Any, Any, Any], Any]


class UnsupportedPattern(Exception):
    """A schema's regular expression that RE2 cannot compile (look-around, back-reference...)."""

    def __init__(self, pattern: str, reason: str):
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"{pattern!r}: {reason}")


class WorkBudgetExceeded(Exception):
    """Validation evaluated more keywords than a ``work_budget`` in force allows."""

    def __init__(self, evaluations: int):
        self.evaluations = evaluations  # the size of the budget that ran out
        super().__init__(f"validation needs more than {evaluations:,} keyword evaluations")


class _Budget:
    def __init__(self, evaluations: int, enclosing: _Budget | None):
        self.evaluations = evaluations
        self.remaining = evaluations
        self.enclosing = enclosing

    def spend(self, units: int = 1) -> None:
        budget: _Budget | None = self
        while budget is not None:
            budget.remaining -= units
            if budget.remaining < 0:
                raise WorkBudgetExceeded(budget.evaluations)
            budget = budget.enclosing


MESSAGE_CHARS = 200
TEXT_PER_EVALUATION = 1000

# A context variable rather than state on the validator: jsonschema makes a new validator
# object for every subschema it descends into, and threads must not share a budget.
_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "jsonschema_re2_budget", default=None
)


@contextlib.contextmanager
def work_budget(evaluations: int) -> Iterator[None]:
    """Let validation inside the block evaluate at most ``evaluations`` keywords.

    Budgets nest: an evaluation inside an inner block is spent from every enclosing budget too,
    so a request can hold a total while each of its validations holds its own share.
    """
    token = _BUDGET.set(_Budget(evaluations, _BUDGET.get()))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def spend_work(units: int = 1) -> None:
    """Spend evaluations from the budgets in force: for work done beside validation (such as
    trying a value against the alternatives of an ``anyOf``) that must be bounded with it."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend(units)


def _budgeted(keyword: Keyword) -> Keyword:
    @functools.wraps(keyword)
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        spend_work()
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else _bounded(errors)

    return counted


def _bounded(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """Errors that hold a bounded amount of memory, whatever the instance and the schema.

    jsonschema's messages quote the whole instance (``'xxx…' is not of type 'integer'``):
    checking a 500 KB string against a few hundred ``anyOf`` branches kept 470 MB of quotes. So
    each message is cut to ``MESSAGE_CHARS``, and the text it took to write is spent from the
    budget (one evaluation per ``TEXT_PER_EVALUATION`` characters).
    """
    for error in errors:
        message = error.message
        if len(message) > MESSAGE_CHARS:
            spend_work(len(message) // TEXT_PER_EVALUATION)
            error.message = message[: MESSAGE_CHARS - 3] + "..."
        yield error


# --- regular expressions on RE2 -------------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # the caller reports it; RE2 would also print to stderr


@functools.lru_cache(maxsize=1024)
def _compiled_pattern(pattern: str) -> tuple[Any, str]:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS), ""
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "cannot compile"
        return None, reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def _search(pattern: str, text: str) -> bool:
    compiled, reason = _compiled_pattern(pattern)
    if compiled is None:
        raise UnsupportedPattern(pattern, reason)
    return compiled.search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{short_repr(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for name, value in instance.items():
            if _search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        name
        for name in instance
        if name not in properties and not any(_search(pattern, name) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        listed = ", ".join(short_repr(name) for name in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates successfully (Draft 2020-12 annotations).

    The same walk as jsonschema's ``unevaluatedProperties``, with ``patternProperties`` on RE2.
    """
    spend_work()
    if not isinstance(schema, Mapping):
        return set()
    evaluated: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        reference = schema.get(keyword)
        if reference is not None:
            resolved = validator._resolver.lookup(reference)
            target = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            evaluated |= _evaluated_keys(target, instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        evaluated |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            evaluated |= {
                name
                for name, value in instance.items()
                if next(validator.descend(value, subschema), None) is None
            }
    for pattern in schema.get("patternProperties", {}):
        evaluated |= {name for name in instance if _search(pattern, name)}
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            evaluated |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if next(validator.descend(instance, subschema), None) is None:
                evaluated |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            evaluated |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                evaluated |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            evaluated |= _evaluated_keys(validator, instance, schema["else"])
    return evaluated


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failing = [
        name
        for name in instance
        if name not in evaluated
        and next(validator.descend(instance[name], unevaluated, path=name), None) is not None
    ]
    if not failing:
        return
    listed = ", ".join(short_repr(name) for name in sorted(failing, key=str))
    verb = "was" if len(failing) == 1 else "were"
    if unevaluated is False:
        yield ValidationError(
            f"Unevaluated properties are not allowed ({listed} {verb} unexpected)"
        )
    else:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({listed} {verb} unevaluated and invalid)"
        )


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    # jsonschema compares unsortable items (objects) pair by pair: quadratic, so a long list of
    # small objects could hold a worker for minutes. Canonical JSON texts compare the same way
    # (1 == 1.0, true != 1, key order ignored) in one pass.
    if unique and validator.is_type(instance, "array"):
        seen: set[str] = set()
        for item in instance:
            text = canonical_json(item)
            if text in seen:
                yield ValidationError(f"{short_repr(instance)} has non-unique elements")
                return
            seen.add(text)


# --- combinators that keep no errors --------------------------------------------------------
# jsonschema's anyOf and oneOf keep every failed branch's errors as the error's context, nested as
# deep as the schema: 30 nested anyOf pairs held 25,000 errors (73 MB) by the time the budget
# ran out. Only messages and paths are reported, so a branch is judged by its first error.


def _valid_under(validator: Any, instance: Any, subschema: Any, index: int) -> bool:
    return next(validator.descend(instance, subschema, schema_path=index), None) is None


def _any_of(validator: Any, any_of: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not any(
        _valid_under(validator, instance, subschema, index)
        for index, subschema in enumerate(any_of)
    ):
        yield ValidationError(f"{short_repr(instance)} is not valid under any of the given schemas")


def _one_of(validator: Any, one_of: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    valid = itertools.islice(
        (
            index
            for index, subschema in enumerate(one_of)
            if _valid_under(validator, instance, subschema, index)
        ),
        2,
    )
    matched = list(valid)
    if not matched:
        yield ValidationError(f"{short_repr(instance)} is not valid under any of the given schemas")
    elif len(matched) > 1:
        yield ValidationError(
            f"{short_repr(instance)} is valid under more than one of the given schemas "
            f"(at least {matched[0]} and {matched[1]})"
        )


REPLACED_KEYWORDS: dict[str, Keyword] = {
    "anyOf": _any_of,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "uniqueItems": _unique_items,
}

LinearValidator = validators.extend(
    Draft202012Validator,
    {
        keyword: _budgeted(function)
        for keyword, function in {**Draft202012Validator.VALIDATORS, **REPLACED_KEYWORDS}.items()
    },
)


def linear_validator(schema: Mapping[str, Any] | bool, *, registry: Registry) -> Any:
    """A ``LinearValidator`` for ``schema``; raises ``SchemaError`` for a schema it cannot take.

    The root's ``$schema`` is dropped, and one anywhere below it is refused: ``evolve`` would
    hand that subschema (and everything under it) to jsonschema's own validator class, with
    Python's backtracking ``re`` and no budget.
    """
    switch = _nested_dialect(schema)
    if switch is not None:
        raise SchemaError(
            "only the root may name a dialect ($schema); every subschema is Draft 2020-12",
            path=switch,
        )
    if isinstance(schema, Mapping):
        schema = {key: value for key, value in schema.items() if key != "$schema"}
    # jsonschema's own ``check_schema``, on the metaschema read as one document: the same
    # first error, without resolving the eight published documents' references at each node.
    for error in METASCHEMA_VALIDATOR.iter_errors(schema):
        raise SchemaError.create_from(error)
    return LinearValidator(schema, registry=registry)


def _nested_dialect(schema: Any) -> list[str | int] | None:
    # Every object, not only subschema positions: a $ref may point into any part of the document.
    children = schema.items() if isinstance(schema, Mapping) else []
    pending: list[tuple[Any, list[str | int]]] = [(value, [key]) for key, value in children]
    while pending:
        item, path = pending.pop()
        if isinstance(item, Mapping):
            if "$schema" in item:
                return [*path, "$schema"]
            pending.extend((value, [*path, key]) for key, value in item.items())
        elif isinstance(item, list):
            pending.extend((value, [*path, index]) for index, value in enumerate(item))
    return None


def _refuse_retrieval(uri: str) -> Any:
    # A schema is written by whoever proposes a contract: following a $ref out of it would let
    # them make this server fetch URLs or read files.
    # referencing declares its attrs classes through a decorator mypy does not read.
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


# Pass as ``registry=`` to ``linear_validator``: only references inside the schema resolve.
# referencing declares its attrs classes through a decorator mypy does not read.
NO_RETRIEVAL: Registry = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


# --- helpers shared with plan validation and output checks ---------------------------------


def canonical_json(value: Any) -> str:
    """JSON text equal for equal JSON values: key order ignored, 1 == 1.0, True != 1."""

    def normalise(item: Any) -> Any:
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, Mapping):
            return {str(key): normalise(inner) for key, inner in item.items()}
        if isinstance(item, list | tuple):
            return [normalise(inner) for inner in item]
        return item

    return json.dumps(normalise(value), sort_keys=True, default=repr)


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
