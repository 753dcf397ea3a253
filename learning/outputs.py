"""Output contracts: does a successful call return what its approved contract promises? (pure)

An approved contract's ``output_schema`` and ``produces`` are promises about a successful call:
its output matches the schema, and every produced variable is in ``state_after``. At ingest,
``output_checker(schema=..., produces=...)`` is built once per tool and batch and checks each
successful trace:

- The schema runs on ``registry/jsonschema_re2.py``: RE2 for regular expressions, nothing
  fetched, and at most ``OUTPUT_WORK_BUDGET`` keyword evaluations per output, so a huge or
  hostile output costs a bounded amount of work. An output that cannot be checked within it (or
  a schema that cannot run: a pattern RE2 refuses, endless self-reference) is counted as
  *unchecked*, never as a violation.
- Each violation is named by where it is and which keyword failed, e.g.
  ``output.refund_status (enum)``; list positions collapse to ``[]`` and paths are cut to
  ``MAX_PATH_PARTS`` parts, so a thousand bad rows count under one path and the number of
  distinct paths stays small. At most ``MAX_ERRORS_PER_OUTPUT`` violations are read per output.
- The outputs of one ingest batch share ``OUTPUT_BATCH_WORK_BUDGET`` (``output_batch_budget``);
  once it is spent, the batch's remaining outputs are counted unchecked.

``output_schema_proposal`` turns the outputs seen (``learning/aggregates.py`` counts their
top-level keys and JSON types) into the schema a drift ticket proposes: the approved schema
with each failing or undeclared property replaced by what the outputs show.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from registry.jsonschema_re2 import (
    NO_RETRIEVAL,
    UnsupportedPattern,
    WorkBudgetExceeded,
    linear_validator,
    work_budget,
)

from .aggregates import inferable_name

# An ordinary output needs tens of evaluations (an evaluation costs 3-15 microseconds); 5,000
# lets a list of some hundred rows be checked and keeps the worst output under about 0.1 s.
OUTPUT_WORK_BUDGET = 5_000
# All outputs of one ingest batch together (2,000 ordinary traces need about 100,000): a batch
# of hostile outputs costs a few seconds at most; outputs past it are counted unchecked.
OUTPUT_BATCH_WORK_BUDGET = 500_000
MAX_ERRORS_PER_OUTPUT = 10
MAX_PATH_PARTS = 6
MAX_PART_LENGTH = 40
ROOT = "output"

OutputCheck = dict[str, Any]  # {"paths": [...], "missing": [...], "unchecked": reason or ""}


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> tuple[Any, str]:
    # One approved schema serves every trace of its tool: compile it once per text.
    try:
        return linear_validator(json.loads(schema_text), registry=NO_RETRIEVAL), ""
    except SchemaError as exc:
        return None, f"the output schema cannot run: {exc.message}"
    except (RecursionError, UnsupportedPattern) as exc:
        return None, f"the output schema cannot run: {exc}"


def output_checker(
    *, schema: Mapping[str, Any] | None, produces: Iterable[str]
) -> Callable[[Any, Mapping[str, Any]], OutputCheck] | None:
    """A function checking one successful call's output and state_after; None: nothing to check."""
    produced = list(produces)
    validator, problem = None, ""
    if isinstance(schema, Mapping) and schema:
        validator, problem = _validator(json.dumps(schema, sort_keys=True))
    elif not produced:
        return None

    def check(output: Any, state_after: Mapping[str, Any]) -> OutputCheck:
        missing = [name for name in produced if name not in state_after]
        if problem:
            return {"paths": [], "missing": missing, "unchecked": problem}
        if validator is None:
            return {"paths": [], "missing": missing, "unchecked": ""}
        try:
            with work_budget(OUTPUT_WORK_BUDGET):
                errors = list(
                    itertools.islice(validator.iter_errors(output), MAX_ERRORS_PER_OUTPUT)
                )
        except WorkBudgetExceeded as exc:
            reason = (
                "too costly to check"
                if exc.evaluations == OUTPUT_WORK_BUDGET
                else "the batch's checking budget was spent"
            )
            return {"paths": [], "missing": missing, "unchecked": reason}
        except (UnsupportedPattern, Unresolvable, RecursionError) as exc:
            return {"paths": [], "missing": missing, "unchecked": f"cannot check: {exc}"[:200]}
        paths = sorted({failing_path(error.absolute_path, error.validator) for error in errors})
        return {"paths": paths, "missing": missing, "unchecked": ""}

    return check


def output_batch_budget() -> contextlib.AbstractContextManager[None]:
    """Bound the output checks of one ingest batch together (see OUTPUT_BATCH_WORK_BUDGET)."""
    return work_budget(OUTPUT_BATCH_WORK_BUDGET)


def failing_path(parts: Iterable[Any], keyword: Any) -> str:
    """``output.items[].id (pattern)``: where a violation is, and which keyword failed."""
    text = ROOT
    for part in itertools.islice(parts, MAX_PATH_PARTS):
        if isinstance(part, int):
            text += "[]"
        else:
            name = str(part)
            name = name if len(name) <= MAX_PART_LENGTH else name[: MAX_PART_LENGTH - 1] + "…"
            text += f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"
    return f"{text} ({keyword})"


def output_property(path: str) -> str | None:
    """The top-level property a failing path is under (None: the output as a whole)."""
    where = path.rsplit(" (", 1)[0]
    if where == ROOT:
        return None
    rest = where[len(ROOT) :]
    if rest.startswith("."):
        return rest[1:].split(".", 1)[0].split("[", 1)[0]
    if rest.startswith('["'):
        try:
            return str(json.JSONDecoder().raw_decode(rest[1:])[0])
        except ValueError:
            return None
    return None


def _observed_type(types: Mapping[str, int]) -> str | list[str]:
    kinds = sorted(types, key=lambda kind: (-types[kind], kind))
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    return kinds[0] if len(kinds) == 1 else kinds


def output_schema_proposal(
    approved: Mapping[str, Any] | None, outputs: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The approved output schema, corrected to what successful outputs show.

    Properties that failed, or that outputs carry but the schema does not declare, take the
    observed JSON types (a reviewer tightens them again); ``required`` keeps only properties
    every checked output had; an output that is not always an object widens the root type.
    Properties that never failed keep the approved subschema, descriptions and all.
    """
    checked = outputs.get("checked", 0)
    keys = outputs.get("keys") or {}
    roots = outputs.get("roots") or {}
    if not checked:
        return dict(approved) if approved is not None else None
    schema: dict[str, Any] = copy.deepcopy(dict(approved)) if approved else {"type": "object"}
    failing = {output_property(path) for path in outputs.get("paths") or {}}
    properties = schema.setdefault("properties", {})
    for key, entry in sorted(keys.items()):
        if (key in properties and key not in failing) or not inferable_name(key):
            continue
        declared = properties.get(key)
        prop: dict[str, Any] = {"type": _observed_type(entry["types"])}
        if isinstance(declared, Mapping) and declared.get("description"):
            prop["description"] = declared["description"]
        properties[key] = prop
    if "required" in schema:
        schema["required"] = [
            name for name in schema["required"] if (keys.get(name) or {}).get("count") == checked
        ]
    if None in failing and set(roots) != {"object"}:
        schema["type"] = _observed_type(roots)
    return schema
