from reviews.models import ReviewTicket
from reviews.services import contract_propose, registry_import
from tests.helpers import contract


def approved_tool(**overrides) -> None:
    """Publish one contract as an operator's bootstrap would."""
    registry_import(data=[contract(**overrides)], approve=True)


def change_ticket(author, **overrides) -> ReviewTicket:
    """An open proposal changing the approved calendar.find_events."""
    overrides.setdefault("description", "Find events by free text; returns the best match first.")
    return contract_propose(document=contract(**overrides), author=author)
