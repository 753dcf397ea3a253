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
    assert "action word “get” (in the name) informs: lexicon: read" in block
    assert "danger (destructive) in what the tool does: high" in block
    # How sure the suggestion is, beside its evidence.
    assert 'id="risk-confidence"' in html and "How sure: 0.8" in html


def moves(count: int) -> list[dict]:
    return [
        {"trace_id": f"m{step}", "step": 0, "tool": "vault.move_blob",
         "args": {"event_id": f"evt_{step}"}, "status": "success",
         "state_before": {"event_id": f"evt_{step}"},
         "state_after": {"event_id": f"evt_{step}", "event_details": "x"}, "duration_ms": 30,
         "occurred_at": timezone.now().isoformat()}
        for step in range(count)
    ]  # fmt: skip


VAULT = [("write_blob", "high"), ("edit_blob", "high"), ("create_folder", "medium"),
         ("read_blob", "low"), ("list_blobs", "low"), ("search_blobs", "low")]  # fmt: skip


def test_the_namespace_labels_reviewers_gave_raise_the_next_suggestion(client, vocabulary,
                                                                        reviewer):  # fmt: skip
    def label(risks: dict[str, str]) -> None:
        registry_import(
            data=[contract(name=f"vault.{name}", description=f"{name.split('_')[0].title()} "
                           "a blob.", risk=risks.get(name, risk)) for name, risk in VAULT],
            approve=True,
        )  # fmt: skip

    label({})
    lowest = RiskLevel.objects.order_by("min_support").first()
    traces_ingest(items=enumerate(moves(lowest.min_support)))
    result = tool_refresh(tool_name="vault.move_blob")
    ticket = ReviewTicket.objects.get(pk=result.ticket_id)
    assert ticket.proposed.risk.name == "high"
    model = next(item for item in ticket.evidence["risk_evidence"] if item["kind"] == "model")
    assert model["basis"] == "namespace 'vault'" and model["vote"] == "high"
    client.force_login(reviewer)
    html = client.get(reverse("admin:reviews_reviewticket_change", args=[ticket.pk])).content
    assert b"reviewers&#x27; labels in namespace &#x27;vault&#x27;" in html
    assert f"How sure: {ticket.evidence['risk_confidence']}".encode() in html

    # Reviewers correct the writes to medium: the next suggestion follows their labels.
    label({"write_blob": "medium", "edit_blob": "medium"})
    assert tool_refresh(tool_name="vault.move_blob").inferred["risk"] == "medium"


def guarded_calls(tool: str, count: int, *, run: str) -> list[dict]:
    """Calls that succeed with ``user_id`` in the state and fail without it."""
    calls = []
    for step in range(count):
        ok = step % 5 != 4
        before = {"event_id": f"evt_{step}", **({"user_id": "u_1"} if ok else {})}
        calls.append(
            {"trace_id": f"{run}{step}", "step": 0, "tool": tool,
             "args": {"event_id": f"evt_{step}"}, "status": "success" if ok else "error",
             "state_before": before,
             "state_after": {**before, "event_details": "x"} if ok else before,
             "duration_ms": 30, "occurred_at": timezone.now().isoformat()}
        )  # fmt: skip
    return calls


OPS = [("submit_batch", "high"), ("attach_key", "high"), ("insert_rule", "high"),
       ("add_note", "medium"), ("tag_item", "medium"), ("append_line", "medium")]  # fmt: skip


def test_tools_guarded_by_a_precondition_are_raised_where_reviewers_rate_such_tools_high(
    client, vocabulary, reviewer
):
    registry_import(
        data=[contract(name=f"ops.{name}", description=f"{name.split('_')[0].title()} it.",
                       risk=risk, requires=[], produces=[]) for name, risk in OPS],
        approve=True,
    )  # fmt: skip
    # The traces of the high ones show their calls failing without user_id.
    for name, risk in OPS:
        if risk == "high":
            traces_ingest(items=enumerate(guarded_calls(f"ops.{name}", 40, run=name)))
            assert tool_refresh(tool_name=f"ops.{name}").inferred["evidence"]["gated"] == [
                "user_id"
            ]
    lowest = RiskLevel.objects.order_by("min_support").first()
    traces_ingest(items=enumerate(guarded_calls("ops.queue_job", max(lowest.min_support, 40),
                                                run="job")))  # fmt: skip

    result = tool_refresh(tool_name="ops.queue_job")

    ticket = ReviewTicket.objects.get(pk=result.ticket_id)
    assert ticket.proposed.risk.name == "high"
    observed = next(item for item in ticket.evidence["risk_evidence"]
                    if item["kind"] == "observed")  # fmt: skip
    assert observed["signal"] == "gated" and "user_id" in observed["detail"]
    client.force_login(reviewer)
    html = client.get(reverse("admin:reviews_reviewticket_change", args=[ticket.pk])).content
    assert b"seen in behaviour: calls failed without user_id" in html
