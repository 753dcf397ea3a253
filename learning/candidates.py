"""Candidate variables: names a person may add to the vocabulary, never added silently.

Two kinds, one table (``CandidateVariable``), counted per application and tool:

- a result field of an OpenTelemetry tool call that the vocabulary does not know
  (``learning.otel_ingest``'s assembly);
- an output field whose values fed an argument under another name (``learning.dataflow``):
  ``reservations`` of ``get_user_details`` feeding ``reservation_id``. Its ``alias_of`` names
  the variable; adopting it adds the field as an alias of that variable.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from registry.models import Application, StateVariable
from registry.services import state_variable_alias_add, state_variable_create

from .models import CandidateVariable

MAX_CANDIDATES_PER_TOOL = 50  # distinct fields kept per application and tool
MAX_EXAMPLES = 3
MAX_EXAMPLE_CHARS = 120
# (step, tool, field name, an example value, the variable it fed or "")
Candidate = tuple[int, str, str, Any, str]


def candidate_variables_count(*, application: Application, found: list[Candidate]) -> None:
    """Count candidate fields per application and tool.

    At most ``MAX_CANDIDATES_PER_TOOL`` names are kept per application and tool (a runtime
    answering with ever new field names cannot grow the table), each with a few examples.
    """
    if not found:
        return
    seen: dict[tuple[str, str], list[Any]] = {}
    for _, tool, name, value, alias_of in found:
        if not name or len(name) > 100 or len(alias_of) > 100:
            continue
        entry = seen.setdefault((tool, name), [0, [], ""])
        entry[0] += 1
        entry[2] = entry[2] or alias_of
        example = candidate_example(value)
        if len(entry[1]) < MAX_EXAMPLES and example not in entry[1]:
            entry[1].append(example)
    tools = {tool for tool, _ in seen}
    rows = {
        (row.tool_name, row.name): row
        for row in CandidateVariable.objects.select_for_update()
        .filter(application=application, tool_name__in=tools)
        .order_by("pk")
    }
    per_tool: dict[str, int] = defaultdict(int)
    for tool, _ in rows:
        per_tool[tool] += 1
    new = []
    now = timezone.now()
    for (tool, name), (count, examples, alias_of) in seen.items():
        row = rows.get((tool, name))
        if row is not None:
            row.count += count
            row.last_seen = now
            row.alias_of = row.alias_of or alias_of
            row.examples = (row.examples + [e for e in examples if e not in row.examples])[
                :MAX_EXAMPLES
            ]
        elif per_tool[tool] < MAX_CANDIDATES_PER_TOOL:
            per_tool[tool] += 1
            new.append(
                CandidateVariable(
                    application=application,
                    tool_name=tool,
                    name=name,
                    alias_of=alias_of,
                    count=count,
                    examples=examples,
                )
            )
    CandidateVariable.objects.bulk_update(
        list(rows.values()), ["count", "examples", "last_seen", "alias_of"]
    )
    # A concurrent ingest may have inserted the same name: its count stands, this one's is
    # lost (a candidate's count is a hint for a person, not a statistic inference reads).
    CandidateVariable.objects.bulk_create(new, ignore_conflicts=True)


def candidate_example(value: Any) -> Any:
    """What is kept of a candidate's example value: a short text or a scalar."""
    if isinstance(value, str):
        return value[:MAX_EXAMPLE_CHARS]
    if isinstance(value, bool | int | float) or value is None:
        return value
    text = repr(value)
    return text if len(text) <= MAX_EXAMPLE_CHARS else text[: MAX_EXAMPLE_CHARS - 1] + "…"


@transaction.atomic
def candidate_variable_adopt(*, candidate: CandidateVariable) -> StateVariable:
    """Add a candidate to the vocabulary: a new variable, or (``alias_of``) an alias of the
    variable its values fed, created if missing. It is no longer a candidate anywhere.

    Only traces that arrive afterwards read it: steps already folded stand.
    """
    if candidate.alias_of:
        variable = StateVariable.objects.filter(name=candidate.alias_of).first()
        if variable is None:
            variable = state_variable_create(
                name=candidate.alias_of,
                description=f"Fed by {candidate.name} of {candidate.tool_name}.",
            )
        if candidate.name != variable.name:
            variable = state_variable_alias_add(variable=variable, alias=candidate.name)
    else:
        variable = state_variable_create(
            name=candidate.name,
            description=f"Found in the results of {candidate.tool_name}.",
        )
    CandidateVariable.objects.filter(name=candidate.name).delete()
    return variable
