"""``reviews.services.review_reject``: a reason, and only against what the reviewer saw."""

import pytest

from registry.models import ContractVersion
from reviews.models import AuditEntry, ProposalChanged, ReviewError, ReviewTicket
from reviews.services import ProposalSeen, review_reject
from tests.helpers import change_ticket, swapped_new_tool

pytestmark = pytest.mark.django_db


def test_it_rejects_with_a_reason(published, proposer, reviewer):
    ticket = change_ticket(proposer)
    with pytest.raises(ReviewError, match="Say why"):
        review_reject(ticket=ticket, reviewer=reviewer, reason="  ", seen=ProposalSeen.of(ticket))
    review_reject(
        ticket=ticket, reviewer=reviewer, reason="Vague description.", seen=ProposalSeen.of(ticket)
    )
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.REJECTED
    assert ticket.reason == "Vague description."
    assert ticket.proposed.status == ContractVersion.Status.REJECTED
    published.refresh_from_db()
    assert published.current_version.number == 1


def test_it_never_records_a_rejection_against_a_proposal_the_reviewer_did_not_see(
    vocabulary, proposer, reviewer
):
    ticket, seen = swapped_new_tool(proposer)
    audit_count = AuditEntry.objects.count()
    with pytest.raises(ProposalChanged):
        review_reject(ticket=ticket, reviewer=reviewer, reason="Vague.", seen=seen)
    ticket.refresh_from_db()
    assert ticket.status == ReviewTicket.Status.OPEN and ticket.reason == ""
    assert ticket.proposed.status == ContractVersion.Status.PROPOSED
    assert AuditEntry.objects.count() == audit_count
