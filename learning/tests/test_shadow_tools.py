"""Shadow tools: traces of a name nobody registered become one new-tool proposal, by people only."""

import pytest
from django.utils import timezone

from learning.ingest import traces_ingest
from learning.models import InferredContract
from learning.services import SHADOW_DESCRIPTION, tool_refresh
from registry.models import Application, ContractVersion, RiskLevel, StateVariable, Tool
from reviews.models import AuditEntry, ReviewTicket
from reviews.services import ProposalSeen, registry_import, review_approve, review_reject
from tests.helpers import contract

pytestmark = pytest.mark.django_db
SHADOW = "crm.lookup_account"


@pytest.fixture
def assistant(vocabulary) -> Application:
    return Application.objects.create(name="assistant", all_tools=True)


def lookups(count: int, *, run: str, start: int = 0, extra_args: dict | None = None) -> list[dict]:
    traces = []
    for step in range(start, start + count):
        email = f"alex.{run}.{step}@partner.example"
        before = {"customer_email": email, "user_id": "u_1"}
        traces.append(
            {
                "trace_id": run, "step": step, "tool": SHADOW,
                "args": {"customer_email": email, **(extra_args or {})},
                "status": "success", "state_before": before,
                "state_after": {**before, "account_id": f"acct_{run}_{step}"},
                "output": {"account_id": f"acct_{run}_{step}"}, "duration_ms": 120,
                "occurred_at": timezone.now().isoformat(),
            }
        )  # fmt: skip
    return traces


def ingest(traces: list[dict], application: Application | None) -> None:
    result = traces_ingest(items=enumerate(traces), application=application)
    assert result.rejected == [] and result.accepted == len(traces)


def proposals():
    return ReviewTicket.objects.filter(kind="new_tool", tool__name=SHADOW)


def test_below_the_lowest_min_support_nothing_is_proposed(assistant):
    ingest(lookups(29, run="a"), assistant)

    result = tool_refresh(tool_name=SHADOW)

    assert result.ticket_id is None and not proposals().exists()
    assert not Tool.objects.filter(name=SHADOW).exists()
    assert InferredContract.objects.get(tool_name=SHADOW).support == 29


def test_at_support_the_traces_become_one_inferred_proposal_with_evidence(assistant):
    ingest(lookups(30, run="a"), assistant)

    result = tool_refresh(tool_name=SHADOW)

    ticket = proposals().get()
    assert result.ticket_id == ticket.pk and ticket.status == "open"
    version = ticket.proposed
    assert version.source == "inferred" and version.status == "proposed"
    assert version.description == SHADOW_DESCRIPTION
    assert Tool.objects.get(name=SHADOW).current_version is None  # never published alone
    # Variables the vocabulary lacks stay out of the contract and are listed for a person.
    assert version.requires == [] and version.produces == []
    assert ticket.evidence["unknown_variables"] == {
        "requires": ["customer_email"],
        "produces": ["account_id"],
    }
    assert set(version.input_schema["properties"]) == {"customer_email"}
    assert version.cost["error_rate"] == 0.0 and version.cost["latency_ms_p95"] > 0
    assert ticket.evidence["applications"] == {"assistant": 30}
    assert ticket.evidence["examples"] == {"assistant": ["a"]}
    assert ticket.evidence["risk"]["suggested"] == version.risk.name
    assert ticket.evidence["support"] == 30 and ticket.evidence["min_support"] == 30


def test_refreshing_again_finds_the_same_proposal(assistant):
    ingest(lookups(30, run="a"), assistant)
    first = tool_refresh(tool_name=SHADOW).ticket_id
    second = tool_refresh(tool_name=SHADOW).ticket_id

    assert first == second and proposals().count() == 1
    assert ContractVersion.objects.filter(tool__name=SHADOW).count() == 1


def test_new_traces_update_the_open_proposal(assistant, reviewer):
    RiskLevel.objects.update(approvals_required=2)
    ingest(lookups(30, run="a"), assistant)
    tool_refresh(tool_name=SHADOW)
    ticket = proposals().get()
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    first_version = ticket.proposed

    # More of the same: the evidence moves, the contract does not.
    ingest(lookups(10, run="a", start=30), None)
    tool_refresh(tool_name=SHADOW)
    ticket.refresh_from_db()
    assert ticket.proposed == first_version and ticket.approvals.count() == 1
    assert ticket.evidence["applications"] == {"assistant": 30, "operator": 10}

    # A new argument in every call from now on: the contract says something else.
    other = Application.objects.create(name="support-desk", all_tools=True)
    ingest(lookups(60, run="b", extra_args={"include_contacts": True}), other)
    tool_refresh(tool_name=SHADOW)
    ticket.refresh_from_db()
    assert proposals().count() == 1
    assert ticket.proposed != first_version
    assert "include_contacts" in ticket.proposed.input_schema["properties"]
    assert ticket.approvals.count() == 0  # given to the old content
    first_version.refresh_from_db()
    assert first_version.status == "superseded"
    assert ticket.evidence["applications"] == {"assistant": 30, "operator": 10, "support-desk": 60}
    assert AuditEntry.objects.filter(ticket=ticket, action="proposal_updated").count() == 1


def test_approving_the_proposal_adds_the_variables_to_the_vocabulary(assistant, reviewer):
    ingest(lookups(30, run="a"), assistant)
    tool_refresh(tool_name=SHADOW)
    ticket = proposals().get()

    published = review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))

    assert published is not None and published.status == "approved"
    assert published.requires == ["customer_email"] and published.produces == ["account_id"]
    assert StateVariable.objects.filter(name__in=["customer_email", "account_id"]).count() == 2
    tool = Tool.objects.get(name=SHADOW)
    assert tool.current_version == published
    entry = AuditEntry.objects.get(ticket=ticket, action="proposal_updated")
    assert entry.actor == reviewer
    assert entry.detail == {"vocabulary_added": ["account_id", "customer_email"]}
    # From now on its traces are a registered tool's, judged for drift, not proposed again.
    ingest(lookups(40, run="c"), assistant)
    tool_refresh(tool_name=SHADOW)
    assert proposals().count() == 1


def test_a_rejected_proposal_is_not_opened_again(assistant, reviewer):
    ingest(lookups(30, run="a"), assistant)
    tool_refresh(tool_name=SHADOW)
    ticket = proposals().get()
    review_reject(
        ticket=ticket,
        reviewer=reviewer,
        reason="Not a tool we allow.",
        seen=ProposalSeen.of(ticket),
    )

    ingest(lookups(60, run="b", extra_args={"include_contacts": True}), assistant)
    tool_refresh(tool_name=SHADOW)

    assert list(proposals().values_list("status", flat=True)) == ["rejected"]
    assert not StateVariable.objects.filter(name="customer_email").exists()


def test_an_application_past_its_allowance_feeds_no_proposal(assistant):
    closed = Application.objects.create(name="kiosk", all_tools=True, unknown_tool_names=0)
    result = traces_ingest(items=enumerate(lookups(40, run="k")), application=closed)
    assert result.accepted == 0 and len(result.rejected) == 40

    tool_refresh(tool_name=SHADOW)
    assert not proposals().exists()


def test_traces_of_a_tool_the_application_may_not_see_are_never_a_shadow(assistant):
    registry_import(data=[contract(name=SHADOW, produces=[], requires=[])], approve=True)
    limited = Application.objects.create(name="limited")  # enables no tool
    traces = lookups(40, run="l")
    assert traces_ingest(items=enumerate(traces), application=limited).accepted == 40

    tool_refresh(tool_name=SHADOW)

    assert not proposals().filter(status="open").exists()
    assert ContractVersion.objects.filter(tool__name=SHADOW).count() == 1


def test_a_name_that_cannot_be_a_tool_is_not_proposed_and_nothing_is_written(assistant):
    name = "crm__lookup"  # "__" is how exports spell "."
    ingest([{**trace, "tool": name} for trace in lookups(30, run="a")], assistant)

    result = tool_refresh(tool_name=name)

    assert result.ticket_id is None
    assert not Tool.objects.filter(name=name).exists()
    assert not ReviewTicket.objects.filter(tool__name=name).exists()
