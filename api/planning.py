"""Plan validation: check a planner's plan against each tool's contract and the app's policy.

What is checked, in which order, and the shape of the answer are documented once, in
``docs/api.md`` (*Plan validation*); why schemas run on RE2 within a work budget, in
``docs/architecture.md`` (*Schema complexity limits*). The invariant kinds, policy rules and
config normalisers are in ``registry/invariants.py``.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict
from urllib.parse import unquote

from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from registry.invariants import (
    ACTION_RESULTS,
    PLAN_INVARIANT_KINDS,
    STEP_INVARIANT_KINDS,
    invariant_errors,
    policy_rule_errors,
    resolve_config,
)
from registry.jsonlimits import deeper_than
from registry.jsonschema_re2 import (
    NO_RETRIEVAL,
    UnsupportedPattern,
    WorkBudgetExceeded,
    canonical_json,
    linear_validator,
    short_repr,
    spend_work,
    work_budget,
)


class Violation(TypedDict):
    step: int | None  # index in the submitted plan; None for plan-wide or appended steps
    invariant: str
    rule: str
    action: str  # "rejected", "corrected" or "dropped"
    # Only on ``unmet_requires``: the variables missing before the step, and for each the
    # approved tools the application sees that produce it.
    missing: NotRequired[list[str]]
    producers: NotRequired[dict[str, list[str]]]


class PlanValidation(TypedDict):
    plan: list[dict[str, Any]]  # the corrected plan: dropped steps removed, corrections applied
    violations: list[Violation]
    valid: bool  # False when any violation is "rejected"
    config: dict[str, Any]  # the resolved config params
    mandate: str  # the policy's mandate, or ""


# A state is either the names of the variables it holds or an object of their values.
State = Mapping[str, Any] | Sequence[str]
Producers = Callable[[str], Sequence[str]]
# Enough for a planner to pick one; a popular variable can have hundreds of producers.
MAX_PRODUCERS_NAMED = 10

# Enough to fix a call; a hostile instance could otherwise produce one error per array item.
MAX_SCHEMA_ERRORS_PER_STEP = 20
MAX_MESSAGE_CHARS = 300
# Tool arguments nest a few levels; far deeper ones only exist to exhaust the recursion limit of
# the copying, comparing and validating below.
MAX_ARGS_DEPTH = 64
# Keyword evaluations checking args against input schemas may cost, per step and per plan. An
# evaluation costs 3-15 microseconds (the most in deep combinators, which build an error per
# branch), so a step stays under a second and a plan of 200 steps under about 4 seconds, far
# from the web worker's 30-second timeout; ordinary schemas need tens to hundreds per step, an
# items schema over a list of thousands of rows some tens of thousands.
SCHEMA_WORK_BUDGET = 50_000
PLAN_SCHEMA_WORK_BUDGET = 250_000


def validate_plan(
    *,
    plan: list[dict[str, Any]],
    contracts: dict[str, dict[str, Any]],
    policy: dict[str, Any] | None,
    state: State | None = None,
    config: dict[str, Any] | None = None,
    aliases: Mapping[str, str] | None = None,
    producers: Producers | None = None,
) -> PlanValidation:
    """Check, correct and prune a plan, as ``docs/api.md`` (*Plan validation*) describes.

    ``state`` holds the variables known before the first step (names, or an object of values);
    ``aliases`` maps any surface form of a variable to its canonical name; ``producers`` names
    the tools that produce a (canonical) variable, for the ``unmet_requires`` violation.
    Raises ``SchemaTooCostly`` when a step's args cannot be checked within the work budget.
    """
    with work_budget(PLAN_SCHEMA_WORK_BUDGET):
        return _validate_plan(
            plan, contracts, policy, state, config, aliases or {}, producers or _no_producers
        )


def _no_producers(variable: str) -> Sequence[str]:
    return ()


def _validate_plan(
    plan: list[dict[str, Any]],
    contracts: dict[str, dict[str, Any]],
    policy: dict[str, Any] | None,
    state: State | None,
    config: dict[str, Any] | None,
    aliases: Mapping[str, str],
    producers: Producers,
) -> PlanValidation:
    violations = _Violations()
    request_config = _mapping_or_empty(config, "config", violations)
    state_names, state_values = _read_state(state, violations)

    steps = _read_steps(plan, violations)
    rules_by_tool: dict[str, _ToolRules] = {}
    for step in steps:
        _check_step(step, contracts, rules_by_tool, violations)
    _apply_plan_invariants(steps, rules_by_tool, violations)

    policy_document: Mapping[str, Any] = {}
    if policy is not None:
        if isinstance(policy, Mapping):
            policy_document = policy
        else:
            violations.add(None, "malformed_policy", "the planning policy must be an object")
    _apply_policy_rules(steps, policy_document, contracts, rules_by_tool, violations)

    final_steps = [step for step in steps if not step.dropped]
    _check_requires(final_steps, contracts, state_names, aliases, producers, violations)
    declared = _list_or_empty(policy_document.get("config_params"))
    for tool in _unique(step.tool for step in final_steps):
        contract = contracts.get(tool)
        if isinstance(contract, Mapping):
            declared += _list_or_empty(contract.get("config_params"))
    values, problems = resolve_config(declared, request=request_config, state=state_values)
    for key, problem in problems.items():
        violations.add(None, "config_param", _clip(f"config param {key!r}: {problem}"))

    mandate = policy_document.get("mandate")
    ordered = violations.ordered()
    return {
        "plan": [step.document() for step in final_steps],
        "violations": ordered,
        "valid": not any(violation["action"] == "rejected" for violation in ordered),
        "config": values,
        "mandate": mandate if isinstance(mandate, str) else "",
    }


@dataclass
class _Step:
    index: int | None  # position in the submitted plan; None for a step a policy appended
    tool: str
    args: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)  # other keys of the step, kept as sent
    dropped: bool = False

    def document(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": self.args, **self.extra}


@dataclass
class _ToolRules:
    """A tool's invariants sorted by when they apply, each list in declared order."""

    corrections: list[Mapping[str, Any]] = field(default_factory=list)
    step_checks: list[Mapping[str, Any]] = field(default_factory=list)
    plan_checks: list[Mapping[str, Any]] = field(default_factory=list)
    input_schema: Any = None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (invariant id, message)
    reported: bool = False


class _Violations:
    def __init__(self) -> None:
        self._entries: list[tuple[int | None, int, Violation]] = []

    def add(
        self, step: _Step | int | None, invariant: str, rule: str, action: str = "reject"
    ) -> Violation:
        index = step.index if isinstance(step, _Step) else step
        violation: Violation = {
            "step": index,
            "invariant": invariant,
            "rule": rule,
            "action": ACTION_RESULTS[action],
        }
        self._entries.append((index, len(self._entries), violation))
        return violation

    def ordered(self) -> list[Violation]:
        # Detection order already follows the documented phases; the sort groups by step.
        entries = sorted(self._entries, key=lambda e: (e[0] is None, e[0] or 0, e[1]))
        return [violation for _, _, violation in entries]


def _read_steps(plan: object, violations: _Violations) -> list[_Step]:
    if not isinstance(plan, list):
        violations.add(None, "malformed_plan", "the plan must be a list of steps")
        return []
    steps = []
    for index, raw in enumerate(plan):
        if not isinstance(raw, Mapping):
            violations.add(
                index, "malformed_step", f"step {index} must be an object with 'tool' and 'args'"
            )
            continue
        tool = raw.get("tool")
        if not isinstance(tool, str) or not tool:
            violations.add(index, "malformed_step", f"step {index}: 'tool' must be a tool name")
            continue
        args = raw.get("args", {})
        if not isinstance(args, Mapping):
            violations.add(index, "malformed_step", f"step {index}: 'args' must be an object")
            continue
        if deeper_than(raw, MAX_ARGS_DEPTH) is not None:
            violations.add(
                index, "malformed_step", f"step {index} nests deeper than {MAX_ARGS_DEPTH} levels"
            )
            continue
        extra = {
            key: copy.deepcopy(value) for key, value in raw.items() if key not in ("tool", "args")
        }
        steps.append(_Step(index=index, tool=tool, args=copy.deepcopy(dict(args)), extra=extra))
    return steps


def _tool_rules(tool: str, contract: Mapping[str, Any]) -> _ToolRules:
    rules = _ToolRules(input_schema=contract.get("input_schema"))
    invariants = contract.get("invariants") or []
    if not isinstance(invariants, list):
        rules.problems.append(("invariant", f"the invariants of {tool} must be a list"))
        return rules
    for position, entry in enumerate(invariants):
        errors = invariant_errors(entry)
        if errors:
            entry_id = entry.get("id") if isinstance(entry, Mapping) else None
            message = f"invariant [{position}] of {tool} is malformed: {'; '.join(errors)}"
            rules.problems.append((entry_id if isinstance(entry_id, str) else "invariant", message))
        elif entry["kind"] in PLAN_INVARIANT_KINDS:
            rules.plan_checks.append(entry)
        elif entry["action"] == "correct":
            rules.corrections.append(entry)
        elif entry["kind"] in STEP_INVARIANT_KINDS:
            rules.step_checks.append(entry)
    return rules


def _check_step(
    step: _Step,
    contracts: Mapping[str, Any],
    rules_by_tool: dict[str, _ToolRules],
    violations: _Violations,
) -> None:
    contract = contracts.get(step.tool)
    if contract is None:
        violations.add(
            step,
            "unknown_tool",
            _clip(
                f"unknown tool {step.tool!r}: not in the registry, or not enabled for this "
                "application"
            ),
        )
        return
    if not isinstance(contract, Mapping):
        violations.add(step, "malformed_contract", f"the contract of {step.tool} is not an object")
        return
    rules = rules_by_tool.get(step.tool)
    if rules is None:
        rules = rules_by_tool[step.tool] = _tool_rules(step.tool, contract)
    if not rules.reported:
        # A broken invariant is the tool's problem, reported once, at its first step.
        rules.reported = True
        for invariant_id, message in rules.problems:
            violations.add(step, invariant_id, _clip(message))

    try:
        step.args = absent_nulls_dropped(rules.input_schema, step.args)
    except WorkBudgetExceeded as exc:
        raise SchemaTooCostly(step.index, step.tool, exc.evaluations) from exc
    for entry in rules.corrections:
        params = entry["params"]
        if _requires_arg_when_violated(step.args, params):
            step.args[params["arg"]] = copy.deepcopy(params["value"])
            violations.add(step, entry["id"], entry["rule"], "correct")
    for entry in rules.step_checks:
        if _step_invariant_violated(entry, step.args):
            violations.add(step, entry["id"], entry["rule"], entry["action"])
            if entry["action"] == "drop":
                step.dropped = True
                return
    prefix = "" if step.index is not None else f"the {step.tool} step the policy appended: "
    try:
        problems = schema_problems(rules.input_schema, step.args)
    except WorkBudgetExceeded as exc:
        raise SchemaTooCostly(step.index, step.tool, exc.evaluations) from exc
    for message in problems:
        violations.add(step, "input_schema", _clip(prefix + message))


def _step_invariant_violated(entry: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    params = entry["params"]
    if entry["kind"] == "mutually_exclusive":
        return sum(1 for name in params["args"] if _present(args, name)) > 1
    return _requires_arg_when_violated(args, params)


def _requires_arg_when_violated(args: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    if not _present(args, params["when"]):
        return False
    if not _present(args, params["arg"]):
        return True
    return "value" in params and not _json_equal(args[params["arg"]], params["value"])


def _apply_plan_invariants(
    steps: list[_Step], rules_by_tool: dict[str, _ToolRules], violations: _Violations
) -> None:
    for tool in _unique(step.tool for step in steps if not step.dropped):
        rules = rules_by_tool.get(tool)
        for entry in rules.plan_checks if rules else []:
            params, action = entry["params"], entry["action"]
            counted = 0
            seen: set[str] = set()
            for step in steps:
                if step.dropped or step.tool != tool:
                    continue
                if entry["kind"] == "max_per_plan":
                    if "when" in params and not _present(step.args, params["when"]):
                        continue
                    counted += 1
                    violated = counted > params["max"]
                else:
                    key = canonical_json([step.args.get(name) for name in params["fields"]])
                    violated = key in seen
                    seen.add(key)
                if violated:
                    violations.add(step, entry["id"], entry["rule"], action)
                    if action == "drop":
                        step.dropped = True


def _apply_policy_rules(
    steps: list[_Step],
    policy: Mapping[str, Any],
    contracts: Mapping[str, Any],
    rules_by_tool: dict[str, _ToolRules],
    violations: _Violations,
) -> None:
    rules = policy.get("rules") or []
    if not isinstance(rules, list):
        violations.add(None, "malformed_policy", "the policy's rules must be a list")
        return
    for position, entry in enumerate(rules):
        errors = policy_rule_errors(entry)
        if errors:
            entry_id = entry.get("id") if isinstance(entry, Mapping) else None
            violations.add(
                None,
                entry_id if isinstance(entry_id, str) else "policy_rule",
                _clip(f"policy rule [{position}] is malformed: {'; '.join(errors)}"),
            )
            continue
        params, action = entry["params"], entry["action"]
        remaining = [step for step in steps if not step.dropped]
        if entry["kind"] == "must_include":
            planned = {step.tool for step in remaining}
            for tool in params["tools"]:
                if tool in planned:
                    continue
                violations.add(None, entry["id"], entry["rule"], action)
                if action == "correct":
                    appended = _Step(
                        index=None, tool=tool, args=copy.deepcopy(dict(params["args"][tool]))
                    )
                    steps.append(appended)
                    _check_step(appended, contracts, rules_by_tool, violations)
        elif entry["kind"] == "max_steps":
            for step in remaining[params["max"] :]:
                violations.add(step, entry["id"], entry["rule"], action)
                if action == "drop":
                    step.dropped = True
        elif entry["kind"] == "never_after":
            after_seen = False
            for step in remaining:
                if step.tool == params["after"]:
                    after_seen = True
                elif step.tool == params["tool"] and after_seen:
                    violations.add(step, entry["id"], entry["rule"], action)
                    if action == "drop":
                        step.dropped = True


def _read_state(state: Any, violations: _Violations) -> tuple[list[str], Mapping[str, Any]]:
    """The state's variable names, and its values (for config params) when it has them."""
    if state is None:
        return [], {}
    if isinstance(state, Mapping):
        return [name for name in state if isinstance(name, str)], state
    if isinstance(state, list) and all(isinstance(name, str) for name in state):
        return list(state), {}
    violations.add(
        None, "malformed_request", "state must be a list of variable names or an object of values"
    )
    return [], {}


def _check_requires(
    steps: list[_Step],
    contracts: Mapping[str, Any],
    state_names: list[str],
    aliases: Mapping[str, str],
    producers: Producers,
    violations: _Violations,
) -> None:
    """Walk the plan: what each step requires must be in the state or produced before it.

    A missing variable is reported once, at the first step that needs it, and a step whose
    requirements fail still adds what it produces: the steps after it are judged as if it ran.
    """
    available = {aliases.get(name, name) for name in state_names}
    for step in steps:
        contract = contracts.get(step.tool)
        if not isinstance(contract, Mapping):
            continue  # already rejected as unknown_tool or malformed_contract
        requires = _unique(aliases.get(name, name) for name in _names(contract.get("requires")))
        missing = [name for name in requires if name not in available]
        if missing:
            offered = {
                name: [tool for tool in producers(name) if tool != step.tool][:MAX_PRODUCERS_NAMED]
                for name in missing
            }
            where = f"step {step.index}" if step.index is not None else "the appended step"
            sources = "; ".join(
                f"{name} is produced by {', '.join(tools)}" if tools else f"no tool produces {name}"
                for name, tools in offered.items()
            )
            rule = (
                f"{where} ({step.tool}) requires {', '.join(missing)}, which neither the state "
                f"nor an earlier step provides; {sources}"
            )
            violation = violations.add(step, "unmet_requires", _clip(rule))
            violation["missing"] = missing
            violation["producers"] = offered
            available.update(missing)
        available.update(aliases.get(name, name) for name in _names(contract.get("produces")))


def _names(value: Any) -> list[str]:
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


# --- JSON Schema with linear-time regular expressions, bounded work and no retrieval ---------


class SchemaTooCostly(Exception):
    """A step's args cannot be checked against its tool's input schema within the work budget.

    Raised out of ``validate_plan``: no answer about the plan can be given without that check, so
    the caller gets an error naming the step (None for a step a policy appended) and the tool.
    """

    def __init__(self, step: int | None, tool: str, evaluations: int):
        self.step = step
        self.tool = tool
        where = f"step {step}" if step is not None else "the step the policy appended"
        if evaluations == PLAN_SCHEMA_WORK_BUDGET:
            what = "the plan's args cannot be checked against the tools' input schemas"
        else:
            what = "its args cannot be checked against the tool's input schema"
        super().__init__(
            f"{where} ({tool}): {what} within {evaluations:,} keyword evaluations; "
            "the schema is too complex to check"
        )


@functools.lru_cache(maxsize=256)
def _schema_validator(schema_text: str) -> tuple[Any, str]:
    # Contracts repeat across requests; compiling (and checking) a schema once per text is
    # what keeps a plan check cheap.
    try:
        return linear_validator(json.loads(schema_text), registry=NO_RETRIEVAL), ""
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        return None, f"the tool's input schema is invalid at {where}: {exc.message}"
    except RecursionError:
        return None, "the tool's input schema nests too deeply to check"


# Local references followed in a row before giving up (a chain of $refs leading to itself).
MAX_REF_HOPS = 32


def absent_nulls_dropped(schema: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` without the nulls that stand for absent optional properties.

    See *Null for an optional property* in the module docstring. Returns ``args`` itself when
    there is nothing to drop, else a new dict. A schema that cannot be used (invalid, a pattern
    RE2 cannot run, an outside ``$ref``) drops nothing: ``schema_problems`` reports it. Raises
    ``WorkBudgetExceeded`` like ``schema_problems``.
    """
    if not isinstance(schema, Mapping) or not _contains_null(args):
        return args
    validator = _validator_for(schema)
    if validator is None:
        return args
    result = copy.deepcopy(args)
    try:
        _NullDropper(validator, schema).drop(schema, result, trial=False)
    except (UnsupportedPattern, Unresolvable, RecursionError):
        return args
    return result


class _NullDropper:
    def __init__(self, validator: Any, root: Mapping[str, Any]):
        self.validator = validator
        self.root = root

    def accepts(self, schema: Any, value: Any) -> bool:
        return bool(self.validator.evolve(schema=schema).is_valid(value))

    def resolved(self, node: Any) -> Any:
        for _ in range(MAX_REF_HOPS):
            if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
                return node
            node = _local_ref(self.root, node["$ref"])
        return None

    def drop(self, schema: Any, value: Any, *, trial: bool) -> None:
        """Drop, in place, the nulls of absent optional properties of ``value`` under ``schema``.

        Work on a trial copy (inside ``anyOf``) is paid from the work budget, one evaluation per
        value visited, so alternatives nested in alternatives cannot multiply without bound;
        the plain descent visits each value of the args once.
        """
        if trial:
            spend_work()
        node = self.resolved(schema)
        if not isinstance(node, Mapping):
            return
        if isinstance(value, dict):
            properties = node.get("properties")
            if isinstance(properties, Mapping):
                required = node.get("required")
                required = required if isinstance(required, list) else []
                for key in list(value):
                    if key not in properties:
                        continue
                    if value[key] is None:
                        if key not in required and not self.accepts(properties[key], None):
                            del value[key]
                    elif isinstance(value[key], dict | list):
                        self.drop(properties[key], value[key], trial=trial)
        elif isinstance(value, list):
            items = node.get("items")
            if isinstance(items, Mapping):
                for item in value:
                    if isinstance(item, dict | list):
                        self.drop(items, item, trial=trial)
        for keyword in ("anyOf", "oneOf"):
            alternatives = node.get(keyword)
            if isinstance(alternatives, list) and isinstance(value, dict | list):
                self.choose(alternatives, value)

    def choose(self, alternatives: list[Any], value: dict[str, Any] | list[Any]) -> None:
        if not _contains_null(value):
            return
        for alternative in alternatives:
            candidate = _budgeted_copy(value)
            self.drop(alternative, candidate, trial=True)
            if self.accepts(alternative, candidate):
                if isinstance(value, dict):
                    value.clear()
                    value.update(candidate)
                else:
                    value[:] = candidate
                return


def _local_ref(root: Mapping[str, Any], ref: str) -> Any:
    """The subschema a local JSON pointer (``#/$defs/x``) names, or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _budgeted_copy(value: Any) -> Any:
    spend_work()
    if isinstance(value, dict):
        return {key: _budgeted_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_budgeted_copy(item) for item in value]
    return value


def _contains_null(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if item is None:
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _validator_for(schema: Mapping[str, Any] | bool) -> Any:
    try:
        schema_text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return _schema_validator(schema_text)[0]


def schema_problems(schema: Any, args: Mapping[str, Any]) -> list[str]:
    """Why ``args`` do not satisfy ``schema`` (a tool's input schema), as ``args.path: message``.

    Never fetches anything, and returns every problem with the schema itself (invalid, an outside
    ``$ref``, a pattern RE2 cannot run, endless self-reference) as a message too. Raises
    ``WorkBudgetExceeded`` when the check needs more than ``SCHEMA_WORK_BUDGET`` keyword
    evaluations. No schema (None) accepts anything.
    """
    if schema is None:
        return []
    if not isinstance(schema, Mapping | bool):
        return ["the tool's input schema is not a JSON Schema object"]
    try:
        schema_text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ["the tool's input schema is not a JSON document"]
    validator, problem = _schema_validator(schema_text)
    if validator is None:
        return [problem]
    try:
        with work_budget(SCHEMA_WORK_BUDGET):
            errors = list(
                itertools.islice(validator.iter_errors(args), MAX_SCHEMA_ERRORS_PER_STEP + 1)
            )
    except UnsupportedPattern as exc:
        return [
            f"the tool's input schema uses the pattern {short_repr(exc.pattern)}, which the "
            f"linear-time regex engine cannot run ({exc.reason})"
        ]
    except Unresolvable as exc:
        return [
            f"the tool's input schema refers to {short_repr(str(getattr(exc, 'ref', exc)))}, which "
            "does not resolve inside the schema (nothing outside it is ever fetched)"
        ]
    except RecursionError:
        return ["the tool's input schema refers to itself without end"]
    # Outer problems first (a missing required property before a wrong item inside a list).
    errors.sort(key=lambda error: ([str(part) for part in error.absolute_path], error.message))
    messages = [f"{_args_path(error.absolute_path)}: {error.message}" for error in errors]
    if len(messages) > MAX_SCHEMA_ERRORS_PER_STEP:
        messages = messages[:MAX_SCHEMA_ERRORS_PER_STEP] + ["args: more errors not shown"]
    return [_clip(message) for message in messages]


def _args_path(path: Any) -> str:
    text = "args"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            text += f".{part}"
        else:
            text += f"[{json.dumps(part)}]"
    return text


# --- small helpers --------------------------------------------------------------------------


def _present(args: Mapping[str, Any], name: str) -> bool:
    return args.get(name) is not None


def _json_equal(left: Any, right: Any) -> bool:
    return canonical_json(left) == canonical_json(right)


def _unique(items: Iterator[str] | list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _list_or_empty(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _mapping_or_empty(value: Any, name: str, violations: _Violations) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        violations.add(None, "malformed_request", f"{name} must be an object")
        return {}
    return value


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."
