"""``reviews.services.review_approve``: who may approve what they saw, and when an approval
publishes."""

import pytest
from django.contrib.auth.models import Group

from registry.models import ContractVersion, Tool
from registry.revision import revision_stored
from reviews.models import AuditEntry, ProposalChanged, ReviewError, ReviewTicket
from reviews.services import ProposalSeen, review_approve, review_reject, ticket_proposal_replace
from tests.helpers import PAYLOAD, approved_tool, change_ticket, contract, swapped_new_tool

pytestmark = pytest.mark.django_db


def test_it_publishes_a_low_risk_change_after_one_approval(published, proposer, reviewer):
    ticket = change_ticket(proposer)
    before = revision_stored()
    version = review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    ticket.refresh_from_db()
    published.refresh_from_db()
    assert version.status == ContractVersion.Status.APPROVED
    assert ticket.status == ReviewTicket.Status.APPROVED
    assert published.current_version == version
    assert ContractVersion.objects.get(tool=published, number=1).status == "superseded"
    assert revision_stored() == before + 1
    entry = AuditEntry.objects.get(ticket=ticket, action="published")
    assert entry.before_hash == ticket.base.content_hash
    assert entry.after_hash == version.content_hash


def test_it_never_lets_the_proposer_approve(published, proposer):
    ticket = change_ticket(proposer)
    with pytest.raises(ReviewError, match="another reviewer"):
        review_approve(ticket=ticket, reviewer=proposer, seen=ProposalSeen.of(ticket))


def test_it_never_lets_a_superuser_approve_their_own_proposal(published, django_user_model):
    boss = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    boss.groups.add(Group.objects.get(name="Reviewers"))
    ticket = change_ticket(boss)
    with pytest.raises(ReviewError, match="another reviewer"):
        review_approve(ticket=ticket, reviewer=boss, seen=ProposalSeen.of(ticket))


def test_it_refuses_a_user_outside_the_reviewers_group(published, proposer, outsider):
    ticket = change_ticket(proposer)
    with pytest.raises(ReviewError, match="Reviewers group"):
        review_approve(ticket=ticket, reviewer=outsider, seen=ProposalSeen.of(ticket))
    with pytest.raises(ReviewError, match="Reviewers group"):
        review_reject(ticket=ticket, reviewer=outsider, reason="no", seen=ProposalSeen.of(ticket))


def test_it_needs_two_distinct_reviewers_for_high_risk(
    vocabulary, proposer, reviewer, second_reviewer
):
    approved_tool(risk="high")
    ticket = change_ticket(proposer, risk="high")
    assert ticket.approvals_required == 2
    assert review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket)) is None
    with pytest.raises(ReviewError, match="already approved"):
        review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.OPEN
    version = review_approve(ticket=ticket, reviewer=second_reviewer, seen=ProposalSeen.of(ticket))
    assert version.status == ContractVersion.Status.APPROVED


def test_it_refuses_a_second_decision(published, proposer, reviewer, second_reviewer):
    ticket = change_ticket(proposer)
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    with pytest.raises(ReviewError, match="already decided"):
        review_approve(ticket=ticket, reviewer=second_reviewer, seen=ProposalSeen.of(ticket))
    with pytest.raises(ReviewError, match="already decided"):
        review_reject(
            ticket=ticket, reviewer=second_reviewer, reason="late", seen=ProposalSeen.of(ticket)
        )


def test_it_never_approves_a_proposal_replaced_after_the_reviewer_saw_it(
    vocabulary, proposer, reviewer
):
    ticket, seen = swapped_new_tool(proposer)
    audit_count = AuditEntry.objects.count()
    before = revision_stored()
    with pytest.raises(ProposalChanged, match=r"changed after you saw it \(it is now v2\)"):
        review_approve(ticket=ticket, reviewer=reviewer, seen=seen)
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.OPEN and not ticket.approvals.exists()
    assert ticket.proposed.description == PAYLOAD
    assert ticket.proposed.status == ContractVersion.Status.PROPOSED
    assert Tool.objects.get(name="calendar.list_events").current_version is None
    assert AuditEntry.objects.count() == audit_count
    assert revision_stored() == before
    # What the reviewer now sees can be approved, and only that is published.
    version = review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    assert version.description == PAYLOAD and version.pk == ticket.proposed_id


def test_it_refuses_an_approval_naming_the_right_version_with_another_hash(
    published, proposer, reviewer
):
    ticket = change_ticket(proposer)
    forged = ProposalSeen(version_id=ticket.proposed_id, content_hash="0" * 64)
    with pytest.raises(ProposalChanged):
        review_approve(ticket=ticket, reviewer=reviewer, seen=forged)
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.OPEN and not ticket.approvals.exists()


def test_a_second_approval_of_a_replaced_high_risk_proposal_publishes_nothing(
    vocabulary, proposer, reviewer, second_reviewer
):
    approved_tool(risk="high")
    ticket = change_ticket(proposer, risk="high")
    seen = ProposalSeen.of(ticket)
    assert review_approve(ticket=ticket, reviewer=reviewer, seen=seen) is None
    ticket_proposal_replace(
        ticket=ticket, document=contract(risk="high", description=PAYLOAD), evidence={}
    )
    with pytest.raises(ProposalChanged):
        review_approve(ticket=ticket, reviewer=second_reviewer, seen=seen)
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.OPEN and not ticket.approvals.exists()
    assert Tool.objects.get(name="calendar.find_events").current_version.number == 1
