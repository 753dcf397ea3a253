"""``reviews.services.contract_publish``: one approved version per tool, and what publishing
moves."""

import pytest
from django.db import IntegrityError

from registry.models import ContractVersion, Revision, Tool
from reviews.models import ReviewError
from reviews.services import ProposalSeen, review_approve, review_rebase
from tests.helpers import change_ticket

pytestmark = pytest.mark.django_db


def test_publishing_marks_other_proposals_stale_until_rebased(published, proposer, reviewer):
    first = change_ticket(proposer)
    second = change_ticket(proposer, description="Find calendar events; newest first.")
    review_approve(ticket=first, reviewer=reviewer, seen=ProposalSeen.of(first))
    second.refresh_from_db()
    assert second.needs_rebase
    with pytest.raises(ReviewError, match="rebase"):
        review_approve(ticket=second, reviewer=reviewer, seen=ProposalSeen.of(second))
    rebased = review_rebase(ticket=second, actor=proposer)
    assert not rebased.needs_rebase
    assert rebased.base == Tool.objects.get(pk=published.pk).current_version
    assert rebased.proposed.based_on == rebased.base
    version = review_approve(ticket=rebased, reviewer=reviewer, seen=ProposalSeen.of(rebased))
    assert version.description == "Find calendar events; newest first."
    assert ContractVersion.objects.filter(tool=published, status="approved").count() == 1


def test_the_database_refuses_two_approved_versions(published):
    version = published.current_version
    version.pk = None
    version.number = 2
    with pytest.raises(IntegrityError):
        version.save()


def test_revision_counter_exists_from_the_migration():
    assert Revision.objects.filter(pk=1).exists()
