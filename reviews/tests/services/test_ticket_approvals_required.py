"""``reviews.services.ticket_approvals_required``: how many reviewers a change needs."""

import pytest

from registry.models import RiskLevel
from reviews.services import ProposalSeen, review_approve, ticket_diff
from tests.helpers import approved_tool, change_ticket

pytestmark = pytest.mark.django_db


def test_a_risk_change_asks_for_the_higher_of_old_and_new(vocabulary, proposer):
    approved_tool(risk="high")
    lowered = change_ticket(proposer, risk="low")
    assert lowered.approvals_required == 2


def test_a_change_that_widens_a_hint_needs_the_approvals_of_high_risk(vocabulary, proposer):
    approved_tool(risk="low", annotations={"readOnlyHint": True, "openWorldHint": False})
    widened = change_ticket(proposer, risk="low", annotations={"openWorldHint": False})
    assert widened.approvals_required == RiskLevel.objects.get(name="high").approvals_required
    codes = {(flag["code"], flag["where"]) for flag in ticket_diff(widened)["flags"]}
    assert ("hint_widened", "annotations.readOnlyHint") in codes


def test_a_change_that_narrows_a_hint_keeps_the_approvals_of_its_risk(vocabulary, proposer):
    approved_tool(risk="low", annotations={"readOnlyHint": False})
    narrowed = change_ticket(proposer, risk="low", annotations={"readOnlyHint": True})
    assert narrowed.approvals_required == 1
    assert not [f for f in ticket_diff(narrowed)["flags"] if f["code"] == "hint_widened"]


def test_the_approval_count_follows_the_risk_level_table(published, proposer, reviewer):
    RiskLevel.objects.filter(name="low").update(approvals_required=3)
    ticket = change_ticket(proposer)
    assert ticket.approvals_required == 3
    assert review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket)) is None
