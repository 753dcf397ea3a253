"""``reviews.services.review_rebase``: a stale proposal over the newly approved version."""

import pytest

from reviews.services import ProposalSeen, review_approve, review_rebase
from tests.helpers import change_ticket

pytestmark = pytest.mark.django_db


def test_a_rebase_asks_for_the_approvals_of_the_risk_over_its_new_base(
    published, proposer, reviewer, second_reviewer
):
    raised = change_ticket(proposer, risk="high")
    second = change_ticket(proposer, description="Find calendar events; newest first.")
    assert (raised.approvals_required, second.approvals_required) == (2, 1)
    for person in (reviewer, second_reviewer):
        review_approve(ticket=raised, reviewer=person, seen=ProposalSeen.of(raised))

    rebased = review_rebase(ticket=second, actor=proposer)

    rebased.refresh_from_db()
    assert rebased.base.risk.name == "high"
    assert rebased.approvals_required == 2
    assert review_approve(ticket=rebased, reviewer=reviewer, seen=ProposalSeen.of(rebased)) is None
