"""``reviews.services.review_comment``."""

import pytest

from reviews.models import ReviewError
from reviews.services import review_comment
from tests.helpers import change_ticket

pytestmark = pytest.mark.django_db


def test_comments_need_text(published, proposer, reviewer):
    ticket = change_ticket(proposer)
    with pytest.raises(ReviewError):
        review_comment(ticket=ticket, author=reviewer, body=" ")
    assert (
        review_comment(ticket=ticket, author=reviewer, body="Looks right.").body == "Looks right."
    )
