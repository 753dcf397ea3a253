"""On the demo registry and its traces, the learning loop finds exactly the one drift."""

import json
from pathlib import Path

import pytest

from demo.traces import demo_traces
from learning.ingest import traces_ingest
from learning.models import DriftReport, InferredContract, Trace
from learning.services import tools_refresh, tools_with_new_traces
from reviews.models import ReviewTicket
from reviews.services import registry_import

REGISTRY_FILE = Path(__file__).resolve().parents[1] / "registry.json"


@pytest.mark.django_db
def test_on_the_demo_only_the_drifted_tool_drifts():
    registry = json.loads(REGISTRY_FILE.read_text())
    registry_import(data=registry, approve=True)
    traces_ingest(items=enumerate(demo_traces(registry)))
    results = tools_refresh(tool_names=tools_with_new_traces())
    assert [r.tool_name for r in results if r.drift] == ["payments.refund_charge"]
    assert list(DriftReport.objects.values_list("tool__name", flat=True)) == [
        "payments.refund_charge"
    ]
    ticket = ReviewTicket.objects.get(kind="drift")
    assert set(ticket.proposed.requires) == {"charge_id", "approval_code"}
    assert "refund_receipt_url" in ticket.proposed.produces
    assert "approval_code" in ticket.proposed.input_schema["properties"]
    unknown = InferredContract.objects.get(tool_name="crm.lookup_account")
    assert unknown.tool is None and unknown.support > 0


@pytest.mark.django_db
def test_the_drift_ticket_proposes_the_schema_the_tool_page_shows_and_when_calls_were_seen():
    registry = json.loads(REGISTRY_FILE.read_text())
    registry_import(data=registry, approve=True)
    traces_ingest(items=enumerate(demo_traces(registry)))
    tools_refresh(tool_names=tools_with_new_traces())
    ticket = ReviewTicket.objects.get(kind="drift")
    inferred = InferredContract.objects.get(tool_name=ticket.tool.name)
    proposed, shown = ticket.proposed.input_schema, inferred.document["input_schema"]
    assert proposed["properties"] == shown["properties"]
    assert sorted(proposed["required"]) == sorted(shown["required"])
    seen = ticket.evidence["calls_seen"]
    calls = Trace.objects.filter(tool_name=ticket.tool.name)
    first, last = (
        calls.order_by(field).values_list("occurred_at", flat=True)[0]
        for field in ("occurred_at", "-occurred_at")
    )
    # The calls the evidence counts were made over days, before the ticket was opened.
    assert (seen["first"], seen["last"]) == (first.isoformat(), last.isoformat())
    assert first.date() < last.date() and first < ticket.created_at
