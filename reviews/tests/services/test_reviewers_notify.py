"""``reviews.services.reviewers_notify``: who is told about a ticket."""

import pytest
from django.core import mail

from registry.models import RiskLevel
from reviews.services import ProposalSeen, review_approve
from tests.helpers import change_ticket

pytestmark = pytest.mark.django_db


def test_it_emails_reviewers_and_then_the_proposer(
    published, proposer, reviewer, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        ticket = change_ticket(proposer)
    assert [message.to for message in mail.outbox] == [["paul@example.com", "rita@example.com"]]
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    assert mail.outbox[0].to == ["paul@example.com"]
    assert "approved" in mail.outbox[0].subject


def test_it_emails_only_a_risk_levels_own_reviewers(
    published, proposer, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    RiskLevel.objects.get(name="low").reviewers.add(second_reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        change_ticket(proposer)
    assert mail.outbox[0].to == ["sam@example.com"]
