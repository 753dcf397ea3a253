"""Invariants, planning-policy rules and config params: the declarative kinds and their checks.

Contracts and policies are edited in the admin, so a rule is data, never code: an entry picks one
of a small set of parameterised kinds. This module says which entries are well formed (the
`*_errors` functions return one message per problem, each naming the field) and how config
values are normalised. `api/planning.py` evaluates the entries against a plan. Pure Python:
no Django imports.

Invariants (in a tool's contract)
---------------------------------
An entry is `{"id", "rule", "kind", "params", "action"}`:

- `id`: a slug (lowercase letters, digits, `_` and `-`; up to 64 characters), stable
  across versions, so a violation can be traced back to its rule;
- `rule`: non-empty text. It is shown to the LLM with the tool's description, and returned
  with every violation;
- `kind` and `params`: what is checked (below);
- `action`: what happens to a violation: `reject` (the plan is invalid), `correct` (the
  call is fixed) or `drop` (the step is pruned from the plan). Not every kind defines every
  action.

An argument is *present* when its key is in the step's `args` with a value that is not null.

- `mutually_exclusive`, params `{"args": [a, b, ...]}` (two or more names): at most one of
  these arguments may be present. Actions: `reject`, `drop`.
- `requires_arg_when`, params `{"when": a, "arg": b, "value"?: v}`: when `a` is present, `b`
  must be present, and equal `v` when `v` is given (`v` may not be null). Actions: `reject`,
  `drop`, and `correct`, which sets `b = v` and so needs `value`.
- `max_per_plan`, params `{"max": n, "when"?: a}` (n >= 1): at most `n` steps of this tool in
  one plan, counting only the steps where `a` is present when `when` is given. Actions:
  `reject`, `drop` (prunes the later steps, keeping the first `n`).
- `unique_calls`, params `{"fields": [a, ...]}`: no two steps of this tool with equal values
  of these arguments (absent and null count as equal; `1` and `1.0` are equal, `1` and `true`
  are not). Actions: `reject`, `drop` (prunes the later duplicates).

Planning-policy rules (in an application's policy, never in a tool)
-------------------------------------------------------------------
Same entry shape, plan-wide kinds:

- `must_include`, params `{"tools": [A, ...], "args"?: {A: {...}}}`: the plan has at least one
  step of each listed tool. Actions: `reject`, and `correct`, which appends each missing step
  with `args[A]` as its arguments and so needs `args` for every listed tool.
- `max_steps`, params `{"max": n}` (n >= 1): at most `n` steps in all. Actions: `reject`,
  `drop` (prunes the tail).
- `never_after`, params `{"tool": A, "after": B}` (A and B differ): no step of `A` after a
  step of `B`. Actions: `reject`, `drop` (prunes those steps of `A`).

Config params (in a tool's contract and in a policy)
----------------------------------------------------
An entry is `{"key", "default", "normalizer"?, "description"?}` (`default` may be null: no
value). `resolve_config` takes the value of a key from the first of these that has it (present
and not null): the request's `config`, then the task state, then `default`; the normaliser turns
it into its canonical form. A value the normaliser cannot take is a problem reported under its
key (plan validation rejects the plan), and the key then shows its default; when a key is
declared twice (by the policy and a tool, say), the first declaration wins. Normalisers:

- `bool`: `true`/`false`, `1`/`0`, and the texts `true`/`false`, `yes`/`no`,
  `on`/`off`, `1`/`0` (any case, surrounding spaces ignored);
- `int`: a whole number, a float with no fractional part, or its text (`" 42 "`);
- `float`: a finite number or its text;
- `str`: text as is; a number becomes its text (booleans, null, lists and objects are refused);
- `lower`: text, lower-cased; `strip`: text, surrounding whitespace removed;
- `json`: text is parsed as a JSON document; any other JSON value is taken as is.

Without a normaliser the value is taken as is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

ACTIONS = ("reject", "correct", "drop")
# The past tense a violation reports, so a reader sees what was done, not what was declared.
ACTION_RESULTS = {"reject": "rejected", "correct": "corrected", "drop": "dropped"}

# kind -> the actions it defines, in the order the docstring lists them.
INVARIANT_ACTIONS: dict[str, tuple[str, ...]] = {
    "mutually_exclusive": ("reject", "drop"),
    "requires_arg_when": ("reject", "correct", "drop"),
    "max_per_plan": ("reject", "drop"),
    "unique_calls": ("reject", "drop"),
}
INVARIANT_KINDS = tuple(INVARIANT_ACTIONS)
# Kinds judged on one step alone, and kinds judged across the steps of one tool.
STEP_INVARIANT_KINDS = ("mutually_exclusive", "requires_arg_when")
PLAN_INVARIANT_KINDS = ("max_per_plan", "unique_calls")

POLICY_RULE_ACTIONS: dict[str, tuple[str, ...]] = {
    "must_include": ("reject", "correct"),
    "max_steps": ("reject", "drop"),
    "never_after": ("reject", "drop"),
}
POLICY_RULE_KINDS = tuple(POLICY_RULE_ACTIONS)

NORMALIZERS = ("bool", "int", "float", "str", "lower", "strip", "json")

ENTRY_FIELDS = ("id", "rule", "kind", "params", "action")
CONFIG_PARAM_FIELDS = ("key", "default", "normalizer", "description")

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
CONFIG_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,99}")

_TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})

ParamChecker = Callable[[Mapping[str, Any], str], list[str]]


def invariant_errors(spec: object) -> list[str]:
    """Every problem with one invariant entry of a contract; empty when it is well formed."""
    return _entry_errors(spec, INVARIANT_ACTIONS, _INVARIANT_PARAM_CHECKS)


def policy_rule_errors(spec: object) -> list[str]:
    """Every problem with one rule of a planning policy; empty when it is well formed."""
    return _entry_errors(spec, POLICY_RULE_ACTIONS, _POLICY_PARAM_CHECKS)


def config_param_errors(spec: object) -> list[str]:
    """Every problem with one config-param declaration; empty when it is well formed."""
    if not isinstance(spec, Mapping):
        return ["must be an object with key and default"]
    errors = _unknown_fields(spec, CONFIG_PARAM_FIELDS)
    key = spec.get("key")
    if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
        errors.append(
            "key: must be a name of letters, digits, '_', '.' or '-', starting with a letter "
            "or '_' (up to 100 characters)"
        )
    normalizer = spec.get("normalizer")
    normalizer_ok = normalizer is None or (
        isinstance(normalizer, str) and normalizer in NORMALIZERS
    )
    if not normalizer_ok:
        errors.append(f"normalizer: must be one of {', '.join(NORMALIZERS)}")
    if "default" not in spec:
        errors.append("default: is required (used when neither the request nor the state has one)")
    elif normalizer_ok and spec["default"] is not None:
        try:
            normalize_config_value(normalizer, spec["default"])
        except ValueError as exc:
            errors.append(f"default: {exc}")
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        errors.append("description: must be text")
    return errors


def normalize_config_value(normalizer: str | None, value: object) -> object:
    """The canonical form of a config value; ValueError says what was expected and what came."""
    if normalizer is None:
        return value
    if normalizer == "bool":
        return _to_bool(value)
    if normalizer == "int":
        return _to_int(value)
    if normalizer == "float":
        return _to_float(value)
    if normalizer == "str":
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"expected text, got {_shown(value)}")
    if normalizer in ("lower", "strip"):
        if not isinstance(value, str):
            raise ValueError(f"expected text, got {_shown(value)}")
        return value.lower() if normalizer == "lower" else value.strip()
    if normalizer == "json":
        if isinstance(value, str):
            try:
                return json.loads(value)
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"expected a JSON document, got {_shown(value)} ({exc})") from None
        return value
    raise ValueError(f"unknown normalizer {_shown(normalizer)}; known: {', '.join(NORMALIZERS)}")


def resolve_config(
    declared: list[Any], *, request: Mapping[str, Any], state: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Resolve declared config params: request config, then state, then the declared default.

    Returns the values by key and the problems by key. A value the normaliser refuses is a
    problem, and the key then takes its (normalised) default, so the result always shows what
    would run; the first declaration of a key wins, and malformed declarations are problems.
    """
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for spec in declared:
        key = spec.get("key") if isinstance(spec, Mapping) else None
        if not isinstance(key, str) or key in values or key in problems:
            continue
        spec_problems = config_param_errors(spec)
        if spec_problems:
            problems[key] = "declaration: " + "; ".join(spec_problems)
            continue
        normalizer = spec.get("normalizer")
        default = spec["default"]
        default = None if default is None else normalize_config_value(normalizer, default)
        for source_name, source in (("request config", request), ("state", state)):
            if source.get(key) is not None:
                try:
                    values[key] = normalize_config_value(normalizer, source[key])
                except ValueError as exc:
                    problems[key] = f"{source_name}: {exc}"
                    values[key] = default
                break
        else:
            values[key] = default
    return values, problems


def _entry_errors(
    spec: object,
    actions_by_kind: Mapping[str, tuple[str, ...]],
    param_checks: Mapping[str, ParamChecker],
) -> list[str]:
    if not isinstance(spec, Mapping):
        return ["must be an object with id, rule, kind, params and action"]
    errors = _unknown_fields(spec, ENTRY_FIELDS)
    entry_id = spec.get("id")
    if not isinstance(entry_id, str) or not SLUG.fullmatch(entry_id):
        errors.append(
            "id: must be a slug (lowercase letters, digits, '_' or '-', up to 64 characters)"
        )
    rule = spec.get("rule")
    if not isinstance(rule, str) or not rule.strip():
        errors.append("rule: must be non-empty text (it is shown to the LLM)")

    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in actions_by_kind:
        errors.append(f"kind: must be one of {', '.join(actions_by_kind)}")
        kind = None

    action = spec.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        errors.append(f"action: must be one of {', '.join(ACTIONS)}")
        action = None
    elif kind is not None and action not in actions_by_kind[kind]:
        allowed = ", ".join(actions_by_kind[kind])
        errors.append(f"action: {action!r} is not defined for {kind}; use one of {allowed}")
        action = None

    params = spec.get("params")
    if not isinstance(params, Mapping):
        errors.append("params: must be an object")
    elif kind is not None:
        errors.extend(param_checks[kind](params, action or ""))
    return errors


def _unknown_fields(spec: Mapping[Any, Any], allowed: tuple[str, ...]) -> list[str]:
    return [f"{key}: unknown field" for key in sorted(map(str, set(spec) - set(allowed)))]


def _unknown_params(params: Mapping[Any, Any], kind: str, allowed: tuple[str, ...]) -> list[str]:
    return [
        f"params.{key}: unknown parameter of {kind}"
        for key in sorted(map(str, set(params) - set(allowed)))
    ]


def _name_list_errors(value: Any, field: str, *, minimum: int, noun: str) -> list[str]:
    expected = (
        f"params.{field}: must be a list of at least two {noun}s"
        if minimum == 2
        else f"params.{field}: must be a non-empty list of {noun}s"
    )
    if not isinstance(value, list) or len(value) < minimum:
        return [expected]
    if not all(isinstance(item, str) and item for item in value):
        return [expected]
    seen: set[str] = set()
    errors = []
    for item in value:
        if item in seen:
            errors.append(f"params.{field}: lists {item!r} twice")
        seen.add(item)
    return errors


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _mutually_exclusive_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "mutually_exclusive", ("args",))
    errors += _name_list_errors(params.get("args"), "args", minimum=2, noun="argument name")
    return errors


def _requires_arg_when_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "requires_arg_when", ("when", "arg", "value"))
    when, arg = params.get("when"), params.get("arg")
    if not _is_name(when):
        errors.append("params.when: must be an argument name")
    if not _is_name(arg):
        errors.append("params.arg: must be an argument name")
    elif arg == when:
        errors.append("params.arg: must differ from params.when")
    if "value" in params and params["value"] is None:
        # A null argument counts as absent, so "must equal null" could never be satisfied.
        errors.append("params.value: must not be null (a null argument counts as absent)")
    if action == "correct" and "value" not in params:
        errors.append("params.value: 'correct' needs the value to set")
    return errors


def _max_per_plan_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "max_per_plan", ("max", "when"))
    if not _is_count(params.get("max")):
        errors.append("params.max: must be a whole number of at least 1")
    if "when" in params and not _is_name(params["when"]):
        errors.append("params.when: must be an argument name")
    return errors


def _unique_calls_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "unique_calls", ("fields",))
    errors += _name_list_errors(params.get("fields"), "fields", minimum=1, noun="argument name")
    return errors


def _must_include_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "must_include", ("tools", "args"))
    tools = params.get("tools")
    tool_errors = _name_list_errors(tools, "tools", minimum=1, noun="tool name")
    errors += tool_errors
    named: list[str] = tools if isinstance(tools, list) and not tool_errors else []
    listed = set(named)
    args = params.get("args")
    if args is not None:
        if not isinstance(args, Mapping):
            errors.append("params.args: must be an object mapping tool names to their arguments")
        else:
            for tool, tool_args in args.items():
                if tool not in listed:
                    errors.append(f"params.args.{tool}: not in params.tools")
                if not isinstance(tool_args, Mapping):
                    errors.append(f"params.args.{tool}: must be an object of arguments")
    if action == "correct" and not tool_errors:
        given = args if isinstance(args, Mapping) else {}
        missing = [tool for tool in named if tool not in given]
        if missing:
            errors.append(
                "params.args: 'correct' appends a step, so it needs the arguments of every "
                f"listed tool; missing: {', '.join(missing)}"
            )
    return errors


def _max_steps_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "max_steps", ("max",))
    if not _is_count(params.get("max")):
        errors.append("params.max: must be a whole number of at least 1")
    return errors


def _never_after_params(params: Mapping[str, Any], action: str) -> list[str]:
    errors = _unknown_params(params, "never_after", ("tool", "after"))
    tool, after = params.get("tool"), params.get("after")
    if not _is_name(tool):
        errors.append("params.tool: must be a tool name")
    if not _is_name(after):
        errors.append("params.after: must be a tool name")
    elif after == tool:
        errors.append("params.after: must differ from params.tool (use max_per_plan instead)")
    return errors


_INVARIANT_PARAM_CHECKS: dict[str, ParamChecker] = {
    "mutually_exclusive": _mutually_exclusive_params,
    "requires_arg_when": _requires_arg_when_params,
    "max_per_plan": _max_per_plan_params,
    "unique_calls": _unique_calls_params,
}
_POLICY_PARAM_CHECKS: dict[str, ParamChecker] = {
    "must_include": _must_include_params,
    "max_steps": _max_steps_params,
    "never_after": _never_after_params,
}


def _to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise ValueError(f"expected true or false (or yes/no, on/off, 1/0), got {_shown(value)}")


def _to_int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"expected a whole number, got {_shown(value)}")


def _to_float(value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    # JSON has no NaN or infinity, so accepting them would produce a config no one can export.
    if number is None or not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {_shown(value)}")
    return number


def _shown(value: object) -> str:
    """A short repr for messages: values come from requests, and may be huge."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
