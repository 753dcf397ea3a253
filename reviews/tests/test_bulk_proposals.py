"""Many proposals opened and published at once: the same rows and rules as one at a time."""

import pytest

from registry.models import ContractVersion, RiskLevel, Tool
from registry.revision import revision_stored
from registry.services import contract_validate, tool_lock
from reviews.models import AuditEntry, ReviewError, ReviewTicket
from reviews.services import (
    WIDENED_HINT_RISK,
    Proposal,
    contract_proposals_open,
    contract_proposals_publish,
    ticket_approvals_required,
)
from tests.helpers import approved_tool, change_ticket, contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(vocabulary):
    approved_tool()
    return Tool.objects.get(name="calendar.find_events")


def proposal(tool: Tool, **overrides) -> Proposal:
    document = contract_validate(document=contract(**overrides))
    return Proposal(
        tool=tool_lock(tool_id=tool.pk),
        document=document,
        evidence={"source": "test"},
        kind=ReviewTicket.Kind.CHANGE,
    )


def test_it_opens_a_change_on_the_approved_version_and_nothing_for_the_same_contract(published):
    approved_tool(name="notes.same")
    same_tool = Tool.objects.get(name="notes.same")

    changed, same = contract_proposals_open(
        proposals=[
            proposal(published, description="Find events by text, best match first."),
            proposal(same_tool, name="notes.same"),
        ],
        author=None,
        source=ContractVersion.Source.IMPORT,
    )

    assert same is None
    assert ContractVersion.objects.filter(tool=same_tool).count() == 1
    assert changed.kind == ReviewTicket.Kind.CHANGE
    assert changed.proposed.number == 2
    assert changed.base == published.current_version
    assert changed.proposed.based_on == published.current_version
    assert changed.approvals_required == published.current_version.risk.approvals_required
    changed.proposed.refresh_from_db()
    assert changed.proposed.content_hash == changed.proposed.compute_hash()
    entry = AuditEntry.objects.get(ticket=changed)
    assert (entry.action, entry.before_hash) == ("proposed", published.current_version.content_hash)


def test_a_change_widening_a_hint_needs_the_approvals_of_the_higher_risk(vocabulary):
    approved_tool(name="files.read", annotations={"readOnlyHint": True})
    tool = Tool.objects.get(name="files.read")

    (ticket,) = contract_proposals_open(
        proposals=[proposal(tool, name="files.read", annotations={})],
        author=None,
        source=ContractVersion.Source.IMPORT,
    )

    high = RiskLevel.objects.get(name=WIDENED_HINT_RISK)
    assert high.approvals_required > tool.current_version.risk.approvals_required
    assert ticket.approvals_required == high.approvals_required
    assert ticket.approvals_required == ticket_approvals_required(
        base=ticket.base, proposed=ticket.proposed
    )


def test_it_publishes_many_at_once_as_one_at_a_time_would(published, proposer):
    other = change_ticket(proposer)  # an open proposal on the version about to be superseded
    tool = Tool.objects.create(name="notes.new")
    (changed, new) = contract_proposals_open(
        proposals=[
            proposal(published, description="Find events by text, best match first."),
            Proposal(
                tool=tool,
                document=contract_validate(document=contract(name="notes.new")),
                evidence={},
                kind=ReviewTicket.Kind.NEW_TOOL,
            ),
        ],
        author=None,
        source=ContractVersion.Source.IMPORT,
    )
    before = revision_stored()
    previous = published.current_version

    contract_proposals_publish(tickets=[changed, new], actor=None, action=AuditEntry.Action.TRUSTED)

    assert revision_stored() == before + 1
    for ticket in (changed, new):
        ticket.refresh_from_db()
        ticket.tool.refresh_from_db()
        assert ticket.status == ReviewTicket.Status.APPROVED
        assert ticket.tool.current_version_id == ticket.proposed_id
        assert ticket.proposed.status == ContractVersion.Status.APPROVED
        assert ticket.proposed.approved_at is not None
    previous.refresh_from_db()
    assert previous.status == ContractVersion.Status.SUPERSEDED
    other.refresh_from_db()
    assert other.needs_rebase and other.status == ReviewTicket.Status.OPEN
    entries = AuditEntry.objects.filter(action=AuditEntry.Action.TRUSTED)
    assert {(entry.ticket_id, entry.before_hash) for entry in entries} == {
        (changed.pk, previous.content_hash),
        (new.pk, ""),
    }


def test_it_publishes_nothing_when_one_ticket_is_based_on_a_superseded_version(published, proposer):
    stale = change_ticket(proposer)
    (fresh,) = contract_proposals_open(
        proposals=[proposal(published, description="Something else entirely, best first.")],
        author=None,
        source=ContractVersion.Source.IMPORT,
    )
    contract_proposals_publish(tickets=[fresh], actor=None)
    stale.refresh_from_db()

    with pytest.raises(ReviewError, match="needs|no longer|superseded"):
        contract_proposals_publish(tickets=[stale], actor=None)

    stale.refresh_from_db()
    assert stale.status == ReviewTicket.Status.OPEN
