"""Checks and normalises one reported trace (pure: no Django; it shares the registry's pure
text check).

Every problem names the field and the reason, so a runtime or an operator can fix the line.
State variable names are resolved through the vocabulary's aliases here, at ingest, so
aggregates and inference only ever see canonical names.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from registry.validation import unstorable_text

from .dataflow import user_texts

MAX_ID_LENGTH = 200
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)  # runtimes' clocks drift; a trace from next year does not
STATUSES = ("success", "error")
# The fields of a step in the trace format (docs/formats.md), and those that hold JSON values.
JSON_FIELDS = ("args", "state_before", "state_after", "output")
FIELDS = frozenset({
    "trace_id", "step", "tool", "status", *JSON_FIELDS, "error", "duration_ms", "occurred_at",
    "messages",
})  # fmt: skip
# The columns a stored step (``learning.models.Trace``) keeps them in: the tool under its name
# (``tool_name``); the messages are read at ingest, never stored.
STEP_COLUMNS = (
    "trace_id", "step", "tool_name", "status", *JSON_FIELDS, "error", "duration_ms", "occurred_at",
)  # fmt: skip
MAX_MESSAGES = 1000  # messages of the conversation read per step


def trace_parse(
    item: Any, *, aliases: dict[str, str], now: datetime | None = None
) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Return (normalised trace, []) or (None, [(field, reason), ...])."""
    if not isinstance(item, dict):
        return None, [("(item)", "must be a JSON object")]
    problem = unstorable_text(item)
    if problem:
        where, _, reason = problem.partition(": ")
        return None, [(where.split(".")[0].split("[")[0] or "(item)", f"{where}: {reason}")]
    errors: list[tuple[str, str]] = []
    if not FIELDS.issuperset(item):
        for key in sorted(set(item) - FIELDS):
            errors.append((key, "unknown field"))
    trace_id = item.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id.strip() or len(trace_id) > MAX_ID_LENGTH:
        errors.append(("trace_id", f"must be a non-empty string of at most {MAX_ID_LENGTH}"))
    step = item.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**31:
        errors.append(("step", "must be a non-negative integer"))
    tool = item.get("tool")
    if not isinstance(tool, str) or not tool.strip() or len(tool) > MAX_ID_LENGTH:
        errors.append(("tool", f"must be a non-empty string of at most {MAX_ID_LENGTH}"))
    status = item.get("status")
    if status not in STATUSES:
        errors.append(("status", "must be 'success' or 'error'"))
    args = item.get("args", {})
    if not isinstance(args, dict):
        errors.append(("args", "must be an object"))
    states = {}
    for key in ("state_before", "state_after"):
        state = item.get(key, {})
        if not isinstance(state, dict):
            errors.append((key, "must be an object mapping variable names to values"))
        else:
            states[key] = {aliases.get(name, name): value for name, value in state.items()}
    messages = item.get("messages", [])
    problem = _messages_problem(messages)
    if problem:
        errors.append(("messages", problem))
    error = item.get("error")
    if error is not None and not isinstance(error, str):
        errors.append(("error", "must be a string or null"))
    duration = item.get("duration_ms")
    if duration is not None and (
        isinstance(duration, bool)
        or not isinstance(duration, int | float)
        or not math.isfinite(duration)
        or not 0 <= duration < 2**31
    ):
        errors.append(("duration_ms", "must be a non-negative number of milliseconds"))
    occurred_at = item.get("occurred_at")
    now = now or datetime.now(UTC)
    when: datetime | None = now
    if occurred_at is not None:
        when = _parse_time(occurred_at)
        if when is None:
            errors.append(("occurred_at", "must be an ISO 8601 date-time with a time zone"))
        elif not EARLIEST <= when <= now + FUTURE_SLACK:
            errors.append(("occurred_at", "must lie between 1970 and a day from now"))
    if errors:
        return None, errors
    return {
        "trace_id": trace_id,
        "step": step,
        "tool": tool,
        "args": args,
        "status": status,
        "state_before": states["state_before"],
        "state_after": states["state_after"],
        "output": item.get("output"),
        "error": error,
        "duration_ms": None if duration is None else int(duration),
        "occurred_at": when,
        # Only the user's words are read (for data flow), never stored.
        "user_texts": user_texts(messages),
    }, []


def _messages_problem(messages: Any) -> str | None:
    """Why ``messages`` is not a conversation, or None."""
    if not isinstance(messages, list):
        return 'must be a list of {"role": ..., "content": ...} objects'
    if len(messages) > MAX_MESSAGES:
        return f"must hold at most {MAX_MESSAGES} messages"
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"[{position}] must be an object with a string role"
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            return f"[{position}].content must be a string or a list of parts"
    return None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
