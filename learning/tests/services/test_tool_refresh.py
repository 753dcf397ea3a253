"""``learning.services.tool_refresh``: inference, drift reports and drift tickets."""

import pytest
from django.core.management import CommandError, call_command

from learning.ingest import traces_ingest
from learning.models import DriftReport, InferredContract, Trace
from learning.services import tool_refresh, tools_with_new_traces
from registry.models import RiskLevel
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import drifted_calls, event_call, event_contract

pytestmark = pytest.mark.django_db


def test_refresh_folds_traces_an_interrupted_ingest_left_pending(get_event):
    traces_ingest(items=enumerate(event_call(i) for i in range(10)))
    tool_refresh(tool_name="calendar.get_event")
    Trace.objects.filter(step__lt=3).update(aggregated=False)  # as if a fold had been lost
    assert tools_with_new_traces() == ["calendar.get_event"]
    assert tool_refresh(tool_name="calendar.get_event").folded == 3
    assert not Trace.objects.filter(aggregated=False).exists()


def test_a_faithful_tool_infers_its_contract_and_does_not_drift(get_event):
    traces_ingest(items=enumerate(event_call(i) for i in range(40)))
    result = tool_refresh(tool_name="calendar.get_event")
    inferred = InferredContract.objects.get(tool_name="calendar.get_event").document
    assert inferred["requires"] == ["event_id"]
    assert inferred["produces"] == ["event_details"]
    assert result.drift == []
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def test_a_drifted_high_risk_tool_opens_one_ticket_with_evidence(get_event):
    traces_ingest(items=enumerate(drifted_calls()))
    result = tool_refresh(tool_name="calendar.get_event")
    ticket = ReviewTicket.objects.get(kind="drift")
    assert result.ticket_id == ticket.pk
    assert "event_updated" in ticket.proposed.produces
    assert ticket.base == get_event.current_version
    assert any(item["field"] == "produces" for item in ticket.evidence["drift"])
    assert ticket.evidence["traces_since_version"] == 40
    # a rerun, and new evidence of the same drift: still one ticket, evidence updated
    tool_refresh(tool_name="calendar.get_event")
    traces_ingest(items=enumerate(drifted_calls(10, run="more")))
    tool_refresh(tool_name="calendar.get_event")
    assert ReviewTicket.objects.filter(kind="drift").count() == 1
    ticket.refresh_from_db()
    assert ticket.evidence["traces_since_version"] == 50
    assert DriftReport.objects.count() == 1


def test_a_drift_that_grows_while_its_ticket_is_open_stays_on_that_ticket(get_event):
    traces_ingest(items=enumerate(drifted_calls()))
    tool_refresh(tool_name="calendar.get_event")
    ticket = ReviewTicket.objects.get(kind="drift")
    first = (ticket.fingerprint, ticket.proposed_id)
    more = {"event_updated": True, "new_time": "2026-12-01T09:30"}
    traces_ingest(items=enumerate(event_call(i, run="more", extra_after=more) for i in range(200)))
    result = tool_refresh(tool_name="calendar.get_event")
    assert ReviewTicket.objects.filter(kind="drift").count() == 1
    ticket.refresh_from_db()
    assert result.ticket_id == ticket.pk and ticket.status == "open"
    assert {"event_updated", "new_time"} <= set(ticket.proposed.produces)
    assert (ticket.fingerprint, ticket.proposed_id) != first
    assert ticket.audit_entries.filter(action="proposal_updated").count() == 1


def test_drift_waits_for_min_support(get_event):
    traces_ingest(items=enumerate(drifted_calls(10)))
    assert tool_refresh(tool_name="calendar.get_event").drift == []
    assert (
        not ReviewTicket.objects.exists() or not ReviewTicket.objects.filter(kind="drift").exists()
    )


def test_drift_on_a_medium_tool_is_a_report_not_a_ticket(get_event):
    RiskLevel.objects.filter(name="high").update(ticket_on_drift=False)
    traces_ingest(items=enumerate(drifted_calls()))
    tool_refresh(tool_name="calendar.get_event")
    assert DriftReport.objects.get().ticket is None
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def test_a_level_with_auto_approve_publishes_a_clean_inferred_change(get_event):
    RiskLevel.objects.filter(name="high").update(ticket_on_drift=False, auto_approve_inferred=True)
    traces_ingest(items=enumerate(drifted_calls()))
    result = tool_refresh(tool_name="calendar.get_event")
    assert result.published
    get_event.refresh_from_db()
    assert "event_updated" in get_event.current_version.produces
    assert get_event.current_version.source == "inferred"


def test_refresh_of_an_unknown_tool_name_is_a_clear_error(get_event):
    with pytest.raises(CommandError, match="no traces"):
        call_command("refresh_contracts", "--tool", "nope.nothing", "--no-progress")


def update_event(**overrides) -> dict:
    """``calendar.update_event``, approved at medium risk: it requires an event id."""
    return event_contract(
        "calendar.update_event", description="Update one calendar event.", risk="medium",
        **overrides,
    )  # fmt: skip


def test_a_declared_destructive_tool_approved_at_medium_drifts_nothing_on_a_second_refresh(
    vocabulary,
):
    RiskLevel.objects.filter(name="medium").update(ticket_on_drift=True, min_support=20)
    # The reviewer's label, medium, is below what the hint alone says.
    registry_import(
        data=[update_event(annotations={"destructiveHint": True, "readOnlyHint": False})],
        approve=True,
    )
    traces_ingest(items=enumerate(event_call(i, tool="calendar.update_event") for i in range(40)))

    first = tool_refresh(tool_name="calendar.update_event")
    second = tool_refresh(tool_name="calendar.update_event")

    assert first.drift == [] and second.drift == []
    assert not DriftReport.objects.exists()
    assert not ReviewTicket.objects.filter(kind="drift").exists()
    inferred = InferredContract.objects.get(tool_name="calendar.update_event").document
    assert inferred["risk"] == "high"  # the hint is still read: only no drift is made of it


def test_an_effect_the_traces_add_still_raises_the_risk_above_the_approved_label(vocabulary):
    registry_import(
        data={"state_variables": [{"name": "deleted_event_id"}], "tools": [update_event()]},
        approve=True,
    )
    traces = [
        event_call(i, tool="calendar.update_event", extra_after={"deleted_event_id": f"evt_{i}"})
        for i in range(40)
    ]
    traces_ingest(items=enumerate(traces))

    result = tool_refresh(tool_name="calendar.update_event")

    risk = [item for item in result.drift if item["field"] == "risk"]
    assert risk and risk[0]["added"] == ["high"]
