"""On the demo registry and its traces, the learning loop finds exactly the one drift."""

import json
from pathlib import Path

import pytest

from demo.traces import demo_traces
from learning.ingest import traces_ingest
from learning.models import DriftReport, InferredContract
from learning.services import tools_refresh, tools_with_new_traces
from reviews.models import ReviewTicket
from reviews.services import registry_import

REGISTRY_FILE = Path(__file__).resolve().parents[1] / "demo" / "registry.json"


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
