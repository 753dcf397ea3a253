"""The reviewer's desk in a real headless Chromium, on the demo registry: the home page's
figures match the database, an example run opens the right traces, the drifted tool's chart
has a point for each of its days, and a decision works from the keyboard alone."""

import pytest
from django.contrib.auth.models import User

from learning.models import ToolDayStats, Trace
from registry.models import Tool
from reviews.models import ReviewTicket
from reviews.selectors import (
    open_tickets,
    tickets_awaiting_approval_by,
    tickets_awaiting_second_reviewer,
    tickets_needing_rebase,
)
from tests.helpers import login

# Minutes on two cores: `make test-slow` (CI runs it).
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
DRIFTED = "payments.refund_charge"


def reviewer_page(browser, base):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    login(page, base, "reviewer", "reviewer-demo-2026")
    return page


def figure(page, css_id: str) -> int:
    return int(page.inner_text(f"#{css_id} .figure"))


def test_the_home_figures_match_the_database(demo_site, browser):
    page = reviewer_page(browser, demo_site)
    page.goto(f"{demo_site}/admin/")
    reviewer = User.objects.get(username="reviewer")
    assert figure(page, "figure-open") == open_tickets().count() > 0
    assert figure(page, "figure-mine") == tickets_awaiting_approval_by(user=reviewer).count() > 0
    assert figure(page, "figure-second") == tickets_awaiting_second_reviewer().count()
    assert figure(page, "figure-rebase") == tickets_needing_rebase().count()
    for cell in page.locator("a.risk-kind-count").all():
        count = open_tickets().filter(
            proposed__risk__name=cell.get_attribute("data-risk"),
            kind=cell.get_attribute("data-kind"),
        )
        assert int(cell.inner_text()) == count.count()
    # Reviews come first in the app list.
    assert page.locator(".app-reviews").first.is_visible()
    apps = page.eval_on_selector_all(
        "#content-main .module caption a", "els => els.map(e => e.textContent)"
    )
    assert apps[0] == "Reviews"
    # The figure leads to the list behind it.
    page.click("#figure-mine")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == figure_count(reviewer)
    # The favicon is served.
    icon = page.eval_on_selector("link[rel=icon]", "e => e.href")
    assert page.request.get(icon).status == 200
    page.close()


def figure_count(reviewer) -> int:
    return tickets_awaiting_approval_by(user=reviewer).count()


def test_an_example_run_opens_that_whole_run_step_by_step(demo_site, browser):
    ticket = ReviewTicket.objects.get(kind="drift", tool__name=DRIFTED)
    page = reviewer_page(browser, demo_site)
    page.goto(f"{demo_site}/admin/reviews/reviewticket/{ticket.pk}/change/")
    summary = page.inner_text("#evidence-summary")
    assert "Now needs approval_code in the state before it runs" in summary
    assert " of " in summary and "successful calls" in summary
    # The raw evidence is there, folded.
    assert not page.is_visible("#ticket-evidence")
    link = page.locator("a.example-trace").first
    trace_id = link.inner_text().split(" ")[0]
    link.click()
    page.wait_for_selector("#result_list")
    rows = page.locator("#result_list tbody tr")
    run = Trace.objects.filter(trace_id=trace_id, application__isnull=True).order_by("step")
    assert rows.count() == run.count() > 1
    steps = [int(rows.nth(i).locator("td.field-step").inner_text()) for i in range(rows.count())]
    assert steps == [trace.step for trace in run]
    tools = [rows.nth(i).locator("td.field-tool_name").inner_text() for i in range(rows.count())]
    assert DRIFTED in tools
    # Trace ids stay on one line.
    height = page.eval_on_selector(
        "#result_list tbody tr th a", "e => e.getBoundingClientRect().height"
    )
    assert height < 25
    page.close()


def test_the_drifted_tools_chart_has_a_point_for_each_of_its_days(demo_site, browser):
    tool = Tool.objects.get(name=DRIFTED)
    days = sorted(
        day.isoformat()
        for day in ToolDayStats.objects.filter(tool_name=DRIFTED, calls__gt=0).values_list(
            "day", flat=True
        )
    )
    assert len(days) >= 3
    page = reviewer_page(browser, demo_site)
    page.goto(f"{demo_site}/admin/registry/tool/{tool.pk}/health/")
    for css in (
        "#chart-calls .point-calls",
        "#chart-errors .point-errors",
        "#chart-latency .point-p95",
    ):
        drawn = page.eval_on_selector_all(css, "els => els.map(e => e.getAttribute('data-day'))")
        assert drawn == days, css
    calls = page.eval_on_selector_all(
        "#chart-calls .point-calls", "els => els.map(e => +e.getAttribute('data-value'))"
    )
    assert sum(calls) == Trace.objects.filter(tool_name=DRIFTED).count()
    assert page.locator("#chart-calls g.marker-version").count() >= 1
    assert page.locator("#chart-calls g.marker-drift").count() == 1
    assert "differs in" in page.inner_text("#differs-badge")
    assert page.locator("#inferred-comparison tr.differs").count() >= 2
    page.close()


def test_a_reviewer_approves_from_the_keyboard_and_nothing_overflows(demo_site, browser):
    ticket = ReviewTicket.objects.get(kind="change", status="open")
    page = reviewer_page(browser, demo_site)
    page.goto(f"{demo_site}/admin/reviews/reviewticket/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    page.goto(f"{demo_site}/admin/reviews/reviewticket/{ticket.pk}/change/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    # A new property shows its type, required-ness and description.
    row = page.inner_text("tr.property-row[data-property=include_cancelled]")
    assert "boolean" in row and "optional" in row and "cancelled events" in row
    page.locator("body").focus()
    for _ in range(300):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "approve-button":
            break
    else:
        pytest.fail("the approve button cannot be reached with Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    page.keyboard.press("Enter")
    page.wait_for_selector(".messagelist")
    assert "Published calendar.find_events" in page.inner_text(".messagelist")
    ticket.refresh_from_db()
    assert ticket.status == "approved"
    page.close()
