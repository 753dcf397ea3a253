"""Through ingest and refresh: error rate, latency and outputs judged against fair baselines."""

import pytest
from django.utils import timezone

from learning.fold import traces_fold_pending
from learning.ingest import traces_ingest
from learning.models import DriftReport, ToolStats
from learning.services import tool_refresh
from registry.models import RiskLevel
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db
TOOL = "calendar.get_event"
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"event_details": {"type": "string", "description": "The event."}},
    "required": ["event_details"],
}


def publish(description: str = "Read one calendar event by id.", **overrides) -> None:
    """An operator's bootstrap: the contract published at once (a new version if it changed)."""
    document = contract(
        name=TOOL,
        description=description,
        requires=["event_id"],
        produces=["event_details"],
        input_schema={"type": "object", "properties": {"event_id": {"type": "string"}}},
        risk="high",
        cost={"latency_ms_p50": 50, "latency_ms_p95": 100},
        output_schema=OUTPUT_SCHEMA,
    )
    document.update(overrides)
    registry_import(data=[document], approve=True)


def calls(
    count: int,
    *,
    run: str,
    errors: int = 0,
    bad_outputs: int = 0,
    duration: int = 50,
) -> list[dict]:
    """``count`` calls: the first ``errors`` fail, the next ``bad_outputs`` return a number where
    the contract promises a string."""
    traces = []
    for step in range(count):
        event = f"evt_{run}_{step}"
        before = {"event_id": event}
        failed = step < errors
        details = 42 if errors <= step < errors + bad_outputs else f"details of {event}"
        traces.append(
            {
                "trace_id": run, "step": step, "tool": TOOL, "args": {"event_id": event},
                "status": "error" if failed else "success", "state_before": before,
                "state_after": before if failed else {**before, "event_details": details},
                "output": None if failed else {"event_details": details},
                "duration_ms": duration, "occurred_at": timezone.now().isoformat(),
            }
        )  # fmt: skip
    return traces


def ingest(traces: list[dict]) -> None:
    result = traces_ingest(items=enumerate(traces))
    assert result.rejected == [] and result.accepted == len(traces)
    traces_fold_pending()


def items_by_field(result) -> dict:
    return {item["field"]: item for item in result.drift}


def test_a_high_risk_tool_failing_steadily_with_no_baseline_is_reported_never_ticketed(vocabulary):
    publish(cost={})  # no declared error rate, and no traces before it was published
    ingest(calls(100, run="r1", errors=25))

    result = tool_refresh(tool_name=TOOL)

    item = items_by_field(result)["error_rate"]
    assert item["report_only"] is True and item["baseline"] is None
    assert item["counts"] == {"total": 100, "errors": 25} and item["examples"]
    assert result.ticket_id is None
    assert not ReviewTicket.objects.filter(kind="drift").exists()
    report = DriftReport.objects.get(tool__name=TOOL)
    assert report.ticket is None and report.items[0]["field"] == "error_rate"


def test_the_rate_before_publication_is_the_baseline_and_a_steady_rate_is_no_drift(vocabulary):
    publish(cost={})
    ingest(calls(100, run="v1", errors=25))
    publish("Read one calendar event by its id.", cost={})  # v2: no declared rate either
    ingest(calls(60, run="v2", errors=15))

    baseline = ToolStats.objects.get(tool_name=TOOL).aggregate_since_version["baseline"]
    assert (baseline["version"], baseline["total"], baseline["errors"]) == (2, 100, 25)
    result = tool_refresh(tool_name=TOOL)

    assert "error_rate" not in items_by_field(result)
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def test_a_significant_jump_over_the_rate_before_publication_opens_a_ticket(vocabulary):
    publish(cost={})
    ingest(calls(100, run="v1", errors=5))
    publish("Read one calendar event by its id.", cost={})
    ingest(calls(60, run="v2", errors=40))

    result = tool_refresh(tool_name=TOOL)

    item = items_by_field(result)["error_rate"]
    assert item["report_only"] is False
    assert item["baseline"]["source"] == "observed before v2 was published"
    assert item["baseline"]["rate"] == 0.05 and item["counts"]["errors"] == 40
    ticket = ReviewTicket.objects.get(kind="drift")
    assert result.ticket_id == ticket.pk
    assert ticket.proposed.cost["error_rate"] == pytest.approx(40 / 60, abs=1e-3)
    assert ticket.evidence["drift"][0]["examples"]


def test_a_few_errors_over_a_declared_rate_are_no_drift(vocabulary):
    publish(cost={"error_rate": 0.02})
    ingest(calls(31, run="r1", errors=5))
    assert "error_rate" not in items_by_field(tool_refresh(tool_name=TOOL))


def test_latency_growth_is_reported_and_ticketed_only_where_the_level_asks(vocabulary):
    publish()  # declared p95: 100 ms
    ingest(calls(40, run="slow", duration=400))

    result = tool_refresh(tool_name=TOOL)

    item = items_by_field(result)["latency_ms_p95"]
    assert item["report_only"] is True and item["baseline"]["latency_ms_p95"] == 100.0
    assert not ReviewTicket.objects.filter(kind="drift").exists()

    RiskLevel.objects.filter(name="high").update(ticket_on_latency=True)
    ingest(calls(5, run="slower", duration=400))
    result = tool_refresh(tool_name=TOOL)
    ticket = ReviewTicket.objects.get(kind="drift")
    assert ticket.pk == result.ticket_id and ticket.proposed.cost["latency_ms_p95"] > 300


def test_output_violations_below_the_share_are_a_report(vocabulary):
    publish()
    ingest(calls(40, run="r1", bad_outputs=2))

    result = tool_refresh(tool_name=TOOL)

    item = items_by_field(result)["output"]
    assert item["report_only"] is True
    assert item["observed"]["paths"] == {"output.event_details (type)": 2}
    assert item["counts"]["failed"] == 2 and item["examples"] == ["r1"]
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def test_output_violations_above_the_share_are_drift_with_a_proposed_schema(vocabulary):
    publish()
    ingest(calls(40, run="r1", bad_outputs=10))

    result = tool_refresh(tool_name=TOOL)

    item = items_by_field(result)["output"]
    assert item["report_only"] is False
    assert item["detail"].startswith("output no longer matches its contract: 10 of 40")
    ticket = ReviewTicket.objects.get(kind="drift")
    assert ticket.pk == result.ticket_id
    proposed = ticket.proposed.output_schema["properties"]["event_details"]
    assert proposed == {"type": ["string", "integer"], "description": "The event."}
    stats = ToolStats.objects.get(tool_name=TOOL)
    assert stats.aggregate_since_version["outputs"]["checked"] == 40


def test_a_produced_variable_missing_from_the_state_is_an_output_violation(vocabulary):
    publish()
    traces = calls(40, run="r1")
    for trace in traces[:8]:
        trace["state_after"] = trace["state_before"]
    ingest(traces)

    item = items_by_field(tool_refresh(tool_name=TOOL))["output"]
    assert item["observed"]["missing"] == {"event_details": 8}
    assert item["report_only"] is False
