import pytest

from reviews.models import ReviewTicket
from reviews.selectors import ticket_source_servers
from tests.helpers import approved_tool, change_ticket

pytestmark = pytest.mark.django_db


def test_the_servers_behind_tickets_are_listed_once_each(vocabulary, proposer, distinct_leaks):
    approved_tool(name="calendar.find_events")
    for _ in range(3):
        ticket = change_ticket(proposer)
        ReviewTicket.objects.filter(pk=ticket.pk).update(
            evidence={"source": "mcp", "server": "calendar"}, status=ReviewTicket.Status.REJECTED
        )
    assert ticket_source_servers() == ["calendar"]
    # The tickets' default ordering never joins the DISTINCT selection (conftest.py).
    assert distinct_leaks == []
