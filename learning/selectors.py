from .models import DriftReport, InferredContract, Trace
from .otel import states_whole


def inferred_contracts_export() -> list[dict]:
    """The latest inferred contract of each tool, as contract documents with their support."""
    return [
        {**inferred.document, "support": inferred.support}
        for inferred in InferredContract.objects.order_by("tool_name")
    ]


def drift_reports_recent(*, limit: int = 8) -> list[DriftReport]:
    """The latest drift reports with their tool, base version and ticket, in one query."""
    return list(
        DriftReport.objects.select_related("tool", "base", "ticket").order_by("-updated_at", "-pk")[
            :limit
        ]
    )


def trace_states_whole(*, trace: Trace) -> tuple[dict, dict]:
    """A step's whole state before and after. An assembled OpenTelemetry trace stores a large
    state once (``learning.otel.states_shared``): its earlier steps are read to rebuild it."""
    if not any(SHARED in state for state in (trace.state_before, trace.state_after)):
        return trace.state_before, trace.state_after
    steps = (
        Trace.objects.filter(
            application=trace.application_id, trace_id=trace.trace_id, step__lte=trace.step
        )
        .order_by("step")
        .values_list("step", "state_before", "state_after")
    )
    return states_whole(list(steps)).get(trace.step, (trace.state_before, trace.state_after))


SHARED = "$same_as"
