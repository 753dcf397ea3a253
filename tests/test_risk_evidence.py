"""A higher risk suggested by behaviour reaches the drift ticket with its evidence, and the
ticket page shows why."""

import pytest
from django.urls import reverse
from django.utils import timezone

from learning.ingest import traces_ingest
from learning.services import tool_refresh
from registry.models import RiskLevel
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db


def call(step: int, *, after: dict) -> dict:
    before = {"event_id": f"evt_{step}", "user_id": "u_1"}
    return {
        "trace_id": "risk", "step": step, "tool": "calendar.get_event",
        "args": {"event_id": f"evt_{step}"}, "status": "success", "state_before": before,
        "state_after": {**before, **after}, "duration_ms": 40,
        "occurred_at": timezone.now().isoformat(),
    }  # fmt: skip


def test_a_tool_that_starts_deleting_gets_a_ticket_that_says_why(client, vocabulary, reviewer):
    RiskLevel.objects.filter(name="low").update(ticket_on_drift=True, min_support=10)
    registry_import(
        data=[
            contract(
                name="calendar.get_event", description="Read one calendar event by id.",
                requires=["event_id"], produces=["event_details"], risk="low",
                input_schema={"type": "object", "properties": {"event_id": {"type": "string"}},
                              "required": ["event_id"], "additionalProperties": False},
            )
        ],
        approve=True,
    )  # fmt: skip
    traces_ingest(
        items=enumerate(call(i, after={"event_details": "x", "event_deleted": True})
                        for i in range(20))
    )  # fmt: skip
    result = tool_refresh(tool_name="calendar.get_event")

    assert result.inferred["risk"] == "high"
    assert "risk" in {item["field"] for item in result.drift}
    ticket = ReviewTicket.objects.get(pk=result.ticket_id)
    effect = next(item for item in ticket.evidence["risk_evidence"] if item["kind"] == "effect")
    assert (effect["word"], effect["class"], effect["variable"]) == (
        "deleted", "destructive", "event_deleted",
    )  # fmt: skip
    client.force_login(reviewer)
    page = client.get(reverse("admin:reviews_reviewticket_change", args=[ticket.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="risk-evidence"' in html and "event_deleted" in html and "destructive" in html
    # The action word and the rule that set the floor are shown too.
    block = html.split('id="risk-evidence"')[1].split("</ul>")[0]
    assert "action word “get” (in the name) changes: get, sense 2" in block
    assert "danger (destructive) in what the tool does: high" in block
