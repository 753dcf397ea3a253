"""Checking one call against its approved contract, before it may reach its tool.

Pure Python (no Django). A call is judged as the last step of the plan its session has run so
far, by the same plan validation runtimes call over HTTP (``api/planning.py``): the input schema
on RE2 within its work budget, the step invariants (``reject`` refuses, ``correct`` fixes the
arguments, ``drop`` refuses the step), the plan invariants over the session's earlier calls of
the tool (``max_per_plan``, ``unique_calls``), and the ``requires`` of the contract against what
earlier calls produced. Every refusal names its rule, the argument it is about and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.planning import SchemaTooCostly, validate_plan

# How a session's unmet ``requires`` are handled, per application (``Application`` setting).
REQUIRES_OFF = "off"
REQUIRES_WARN = "warn"
REQUIRES_ENFORCE = "enforce"
REQUIRES_MODES = (REQUIRES_OFF, REQUIRES_WARN, REQUIRES_ENFORCE)


@dataclass(frozen=True)
class Refusal:
    """Why a call may not go through: the rule, the argument (or ""), and the sentence the
    caller reads, which says what to do."""

    rule: str
    field: str
    message: str


@dataclass
class Checked:
    """A call that may go through, with the arguments to forward and what was said about it."""

    args: dict[str, Any]
    corrected: list[dict[str, str]] = field(default_factory=list)  # {"invariant", "rule"}
    warnings: list[dict[str, str]] = field(default_factory=list)  # {"rule", "message"}


def call_check(
    *,
    name: str,
    document: Mapping[str, Any],
    args: Any,
    earlier: Sequence[Mapping[str, Any]] = (),
    produced: Sequence[str] = (),
    requires_mode: str = REQUIRES_WARN,
) -> Checked | Refusal:
    """Judge a call of ``name`` with ``args``; ``earlier`` are the session's forwarded calls of
    the same tool (``{"tool", "args"}``), ``produced`` the variables its calls have produced."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return Refusal(
            "input_schema", "args", "The arguments must be a JSON object; send them as one."
        )
    steps = [{"tool": step["tool"], "args": step["args"]} for step in earlier]
    steps.append({"tool": name, "args": dict(args), "this_call": True})
    last = len(steps) - 1
    try:
        result = validate_plan(
            plan=steps,
            contracts={name: dict(document)},
            policy=None,
            state=list(produced) if requires_mode != REQUIRES_OFF else None,
        )
    except SchemaTooCostly:
        return Refusal(
            "input_schema",
            "args",
            "The arguments take too much work to check against the tool's input schema; send "
            "smaller arguments.",
        )
    corrected: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    for violation in result["violations"]:
        if violation["step"] != last:
            continue  # an earlier call, judged when it was made
        invariant, rule, action = violation["invariant"], violation["rule"], violation["action"]
        if invariant == "unmet_requires":
            missing = ", ".join(violation.get("missing", []))
            message = (
                f"{name} requires {missing}, which no earlier call of this session produced; "
                f"call a tool that produces it first. ({rule})"
            )
            if requires_mode == REQUIRES_ENFORCE:
                return Refusal("unmet_requires", missing, message)
            if requires_mode == REQUIRES_WARN:
                warnings.append({"rule": "unmet_requires", "message": message})
            continue
        if invariant == "input_schema":
            where = rule.partition(": ")[0]
            return Refusal(
                "input_schema",
                where,
                f"The arguments do not match the approved input schema of {name}: {rule}. "
                "Fix the argument and call again.",
            )
        if action == "corrected":
            corrected.append({"invariant": invariant, "rule": rule})
            continue
        if action == "dropped":
            return Refusal(
                invariant,
                _argument_of(document, invariant),
                f"The contract of {name} drops this call (invariant {invariant}: {rule}); do "
                "not make it, or change the arguments so the rule holds.",
            )
        return Refusal(
            invariant,
            _argument_of(document, invariant),
            f"The contract of {name} refuses this call (invariant {invariant}: {rule}); change "
            "the arguments so the rule holds and call again.",
        )
    kept = [step for step in result["plan"] if step.get("this_call")]
    if not kept:
        # Dropped without a violation at this step: never forward a call the plan left out.
        return Refusal("drop", "", f"The contract of {name} drops this call; do not make it.")
    return Checked(args=dict(kept[0]["args"]), corrected=corrected, warnings=warnings)


def _argument_of(document: Mapping[str, Any], invariant: str) -> str:
    """The arguments an invariant is about, named in its params, for the refusal's field."""
    for entry in document.get("invariants") or []:
        if isinstance(entry, Mapping) and entry.get("id") == invariant:
            params = entry.get("params") or {}
            names = params.get("args") or params.get("fields")
            if isinstance(names, list):
                return ", ".join(str(name) for name in names)
            for key in ("arg", "when"):
                if isinstance(params.get(key), str):
                    return str(params[key])
    return ""
