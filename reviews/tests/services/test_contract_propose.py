"""``reviews.services.contract_propose``: a change is a new proposed version and a ticket."""

import pytest

from reviews.models import AuditEntry
from reviews.services import contract_propose
from tests.helpers import change_ticket, contract

pytestmark = pytest.mark.django_db


def test_it_proposes_a_new_version_without_touching_the_approved_one(published, proposer):
    ticket = change_ticket(proposer)
    published.refresh_from_db()
    assert published.current_version.number == 1
    assert ticket.proposed.number == 2
    assert ticket.proposed.based_on == published.current_version
    assert ticket.proposed.author == proposer
    assert AuditEntry.objects.filter(ticket=ticket, action="proposed").exists()


def test_an_unchanged_proposal_opens_no_ticket(published, proposer):

    assert contract_propose(document=contract(), author=proposer) is None
