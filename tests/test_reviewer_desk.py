"""The reviewer's desk on a crowded registry: the home page's figures match the database, each
links to the list behind it, and the home, ticket and tool pages cost a bounded number of
queries with 10,000 tickets."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from learning.models import DriftReport, ToolDayStats
from registry.models import ContractVersion, RiskLevel, Tool
from reviews.models import Approval, ReviewTicket
from tests.helpers import approved_tool

pytestmark = pytest.mark.django_db
TICKETS = 10_000
KINDS = ["new_tool", "change", "drift"]


@pytest.fixture
def crowded(vocabulary, reviewer, second_reviewer, proposer):
    """10,000 tickets of every kind, risk and state on one tool, written in bulk."""
    approved_tool()
    tool = Tool.objects.get(name="calendar.find_events")
    base = tool.current_version
    risks = list(RiskLevel.objects.order_by("rank"))
    versions = ContractVersion.objects.bulk_create(
        [
            ContractVersion(
                tool=tool,
                number=n + 2,
                description=f"variant {n}",
                input_schema={},
                risk=risks[n % 3],
                status="proposed",
                based_on=base,
                content_hash=f"{n:064}",
            )
            for n in range(TICKETS)
        ],  # fmt: skip
        batch_size=2000,
    )
    now = timezone.now()
    tickets = []
    for n, version in enumerate(versions):
        status = "open" if n % 5 else ("approved", "rejected")[n % 2]
        tickets.append(
            ReviewTicket(
                tool=tool,
                base=base,
                proposed=version,
                kind=KINDS[n % 3],
                status=status,
                needs_rebase=status == "open" and n % 7 == 0,
                approvals_required=2 if version.risk.name == "high" else 1,
                proposer=proposer if n % 2 else None,
                evidence={"drift": [{"field": "produces", "added": ["event_updated"]}]},
            )
        )
    tickets = ReviewTicket.objects.bulk_create(tickets, batch_size=2000)
    # created_at is auto_now_add: spread it so "oldest first" has one answer.
    for n, ticket in enumerate(tickets[:50]):
        ReviewTicket.objects.filter(pk=ticket.pk).update(created_at=now - timedelta(days=60 - n))
    approvals = []
    for n, ticket in enumerate(tickets):
        if ticket.status == "open" and not ticket.needs_rebase:
            if n % 4 == 1:
                approvals.append(Approval(ticket=ticket, reviewer=second_reviewer))
            if n % 11 == 1:
                approvals.append(Approval(ticket=ticket, reviewer=reviewer))
    Approval.objects.bulk_create(approvals, batch_size=2000)
    return tool, tickets


def expected(reviewer: User) -> dict:
    open_tickets = ReviewTicket.objects.filter(status="open")
    by_risk_kind = {}
    for risk, kind in open_tickets.values_list("proposed__risk__name", "kind"):
        by_risk_kind[(risk, kind)] = by_risk_kind.get((risk, kind), 0) + 1
    approved_by = {}
    for ticket_id, user_id in Approval.objects.values_list("ticket_id", "reviewer_id"):
        approved_by.setdefault(ticket_id, set()).add(user_id)
    waiting = [t for t in open_tickets if not t.needs_rebase]
    return {
        "open": open_tickets.count(),
        "by_risk_kind": by_risk_kind,
        "mine": sum(1 for t in waiting if reviewer.pk not in approved_by.get(t.pk, set())),
        "second": sum(1 for t in waiting if approved_by.get(t.pk)),
        "rebase": open_tickets.filter(needs_rebase=True).count(),
    }


def test_the_home_shows_the_queue_as_the_database_has_it_in_bounded_queries(
    crowded, reviewer, client, django_assert_max_num_queries
):
    client.force_login(reviewer)
    with django_assert_max_num_queries(15):
        response = client.get("/admin/")
    assert response.status_code == 200
    queue = response.context["desk"]["queue"]
    want = expected(reviewer)
    assert queue.open_total == want["open"] == 8_000
    got = {(risk["name"], kind): n for risk in queue.by_risk for kind, n in risk["cells"] if n}
    assert got == want["by_risk_kind"]
    assert (queue.awaiting_me, queue.awaiting_second, queue.needing_rebase) == (
        want["mine"],
        want["second"],
        want["rebase"],
    )
    assert [risk["name"] for risk in queue.by_risk] == ["high", "medium", "low"]
    oldest = response.context["desk"]["oldest"]
    assert [ticket.pk for ticket, _ in oldest] == [
        t.pk for t in ReviewTicket.objects.filter(status="open").order_by("created_at", "pk")[:5]
    ]
    assert oldest[0][1] > timedelta(days=50)


@pytest.mark.parametrize(
    ("query", "key"),
    [("awaiting=mine", "mine"), ("awaiting=second", "second"), ("awaiting=rebase", "rebase")],
)
@pytest.mark.slow  # 10,000 tickets built again for each; the home page's test stays in make test
def test_each_figure_links_to_a_list_of_exactly_its_tickets(
    crowded, reviewer, client, query, key, django_assert_max_num_queries
):
    client.force_login(reviewer)
    home = client.get("/admin/").content.decode()
    link = f"/admin/reviews/reviewticket/?status__exact=open&amp;{query}"
    assert link in home
    with django_assert_max_num_queries(20):
        response = client.get(link.replace("&amp;", "&"))
    assert response.status_code == 200
    assert response.context["cl"].result_count == expected(reviewer)[key]


@pytest.mark.slow
def test_a_risk_and_kind_cell_links_to_its_filtered_list(crowded, reviewer, client):
    client.force_login(reviewer)
    high = RiskLevel.objects.get(name="high")
    response = client.get(
        "/admin/reviews/reviewticket/",
        {"status__exact": "open", "proposed__risk__id__exact": high.pk, "kind__exact": "drift"},
    )
    assert (
        response.context["cl"].result_count == expected(reviewer)["by_risk_kind"][("high", "drift")]
    )


@pytest.mark.slow
def test_the_ticket_and_tool_pages_cost_a_bounded_number_of_queries(
    crowded, reviewer, client, django_assert_max_num_queries
):
    tool, tickets = crowded
    today = timezone.now().date()
    ToolDayStats.objects.bulk_create(
        [
            ToolDayStats(
                tool_name=tool.name,
                tool=tool,
                day=today - timedelta(days=n),
                calls=10,
                errors=n % 3,
                durations={"30": 8, "40": 2},
            )
            for n in range(400)
        ]  # fmt: skip
    )
    DriftReport.objects.bulk_create(
        [
            DriftReport(
                tool=tool,
                base=tool.current_version,
                fingerprint=f"{n:064}",
                items=[{"field": "produces"}],
                ticket=tickets[n],
            )
            for n in range(30)
        ]  # fmt: skip
    )
    client.force_login(reviewer)
    with django_assert_max_num_queries(25):
        ticket_page = client.get(f"/admin/reviews/reviewticket/{tickets[1].pk}/change/")
    assert ticket_page.status_code == 200
    with django_assert_max_num_queries(25):
        tool_page = client.get(f"/admin/registry/tool/{tool.pk}/health/")
    assert tool_page.status_code == 200
    # 90 days are drawn, not the 400 stored; 30 drift markers.
    html = tool_page.content.decode()
    assert html.count('class="bar point-calls"') == 90
    assert html.count('class="marker marker-drift"') == 3 * 30
    with django_assert_max_num_queries(20):
        assert client.get("/admin/reviews/reviewticket/").status_code == 200


def test_approvals_read_right_in_every_state(vocabulary, reviewer, client):
    approved_tool()  # published on import: no approval was needed
    ticket = ReviewTicket.objects.get()
    client.force_login(reviewer)
    page = client.get("/admin/reviews/reviewticket/").content.decode()
    assert "approved on import" in page and "0/1" not in page
    detail = client.get(f"/admin/reviews/reviewticket/{ticket.pk}/change/").content.decode()
    assert "needs rebase" not in detail.lower() and "rebase-note" not in detail
    assert "New tool" in detail


def test_a_ticket_with_odd_evidence_still_reads_and_links_by_trace_id(vocabulary, reviewer, client):
    approved_tool()
    ticket = ReviewTicket.objects.get()
    ReviewTicket.objects.filter(pk=ticket.pk).update(
        evidence={
            "drift": [
                {
                    "field": "produces",
                    "added": ["event_updated"],
                    "baseline": 0.1,
                    "example_runs": [{"trace_id": "r<1>", "application_id": "x"}],
                    "novel": [1, 2],
                },
                "junk",
            ],
            "applications": {"assistant": 3},
            "future_key": {"a": 1},
        }  # fmt: skip
    )
    client.force_login(reviewer)
    page = client.get(f"/admin/reviews/reviewticket/{ticket.pk}/change/").content.decode()
    assert "Now adds event_updated to the state" in page
    assert "/admin/learning/trace/?trace_id=r%3C1%3E" in page and "application__" not in page
    assert "future_key" in page and "novel" in page and "r&lt;1&gt;" in page


def test_a_superuser_outside_the_reviewers_group_is_told_how_to_review(
    admin_client, admin_user, reviewer, client
):
    answer = admin_client.get("/admin/")
    assert answer.status_code == 200
    assert "You are not in the Reviewers group" in answer.content.decode()

    admin_user.groups.add(reviewer.groups.get())
    assert "You are not in the Reviewers group" not in admin_client.get("/admin/").content.decode()
    client.force_login(reviewer)
    assert "You are not in the Reviewers group" not in client.get("/admin/").content.decode()
