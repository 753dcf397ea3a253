"""The admin reads as it works, in a real headless Chromium on the demo registry: a tool's
health is a page to read with a separate Edit; a change is proposed on its own page; a drift
ticket says when its calls were made and highlights no difference within noise."""

from urllib.parse import urlparse

import pytest

from learning.models import Trace
from registry.models import ContractVersion, Tool
from reviews.models import ReviewTicket
from tests.helpers import login

# Minutes on two cores: `make test-slow` (CI runs it).
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
DRIFTED = "payments.refund_charge"


def page_of(browser, base, username, password):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    login(page, base, username, password)
    return page


def test_the_health_page_has_no_save_or_delete_and_edit_is_a_link(demo_site, browser):
    tool = Tool.objects.get(name=DRIFTED)
    page = page_of(browser, demo_site, "admin", "admin-demo-2026")
    page.goto(f"{demo_site}/admin/registry/tool/?q={DRIFTED}")
    page.click(f"#result_list a:has-text('{DRIFTED}')")
    page.wait_for_selector("#tool-health")
    assert urlparse(page.url).path == f"/admin/registry/tool/{tool.pk}/health/"
    assert page.locator("#chart-calls").count() == 1
    assert page.locator("input[type=submit], .deletelink, form input[name=owner]").count() == 0
    page.click("#edit-tool")
    page.wait_for_selector("input[name=owner]")
    assert urlparse(page.url).path == f"/admin/registry/tool/{tool.pk}/change/"
    page.fill("input[name=owner]", "payments-team")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    tool.refresh_from_db()
    assert tool.owner == "payments-team"
    page.close()


def test_the_proposal_view_proposes_and_opens_the_ticket(demo_site, browser):
    tool = Tool.objects.get(name="calendar.find_events")
    version = tool.current_version
    page = page_of(browser, demo_site, "admin", "admin-demo-2026")
    page.goto(f"{demo_site}/admin/registry/contractversion/{version.pk}/change/")
    # The version itself is a record: nothing to save.
    assert page.locator("input[name=_save], textarea[name=description]").count() == 0
    page.click("#propose-change")
    page.wait_for_selector("#proposal-form")
    page.fill("#id_description", "Find calendar events by free text, newest first.")
    page.click("#propose-button")
    page.wait_for_selector("#ticket-review")
    ticket = ReviewTicket.objects.filter(tool=tool, status="open", kind="change").latest("pk")
    assert page.url.endswith(f"/admin/reviews/reviewticket/{ticket.pk}/change/")
    assert f"(ticket #{ticket.pk})" in page.inner_text(".messagelist")
    assert ticket.proposed.description == "Find calendar events by free text, newest first."
    description = version.description
    version.refresh_from_db()
    assert version.status == "approved" and version.description == description
    page.close()


def test_the_drift_ticket_highlights_no_noise_and_says_when_calls_were_made(demo_site, browser):
    ticket = ReviewTicket.objects.get(kind="drift", tool__name=DRIFTED)
    # The approved p50 measured again within noise, and a p95 that really moved.
    base_cost = {**ticket.base.cost, "latency_ms_p50": 380, "latency_ms_p95": 900}
    ContractVersion.objects.filter(pk=ticket.base_id).update(cost=base_cost)
    proposed_cost = {**base_cost, "latency_ms_p50": 379.9, "latency_ms_p95": 1800}
    ContractVersion.objects.filter(pk=ticket.proposed_id).update(cost=proposed_cost)
    evidence = {
        **ticket.evidence,
        "inferred": {**ticket.evidence["inferred"], "cost": proposed_cost},
    }
    ReviewTicket.objects.filter(pk=ticket.pk).update(evidence=evidence)

    page = page_of(browser, demo_site, "reviewer", "reviewer-demo-2026")
    page.goto(f"{demo_site}/admin/reviews/reviewticket/{ticket.pk}/change/")
    figures = page.locator("#evidence-figures tbody tr")
    rows = {
        figures.nth(i).locator("th").inner_text(): figures.nth(i) for i in range(figures.count())
    }
    assert rows["latency p50"].locator("td.worse").count() == 0
    assert rows["latency p95"].locator("td.worse").count() == 1
    cost = page.locator("tr.diff-field[data-field=cost]")
    assert cost.locator(".mapping-change[data-key=latency_ms_p50]").count() == 0
    assert cost.locator(".within-noise[data-key=latency_ms_p50]").count() == 1
    assert cost.locator(".mapping-change[data-key=latency_ms_p95]").count() == 1
    # The window is when the calls were made, spread over days, not the approval time.
    calls = Trace.objects.filter(tool_name=DRIFTED).order_by("occurred_at")
    first, last = calls.first().occurred_at, calls.last().occurred_at
    window = page.inner_text("#calls-seen")
    assert first.strftime("%Y-%m-%d %H:%M") in window
    assert last.strftime("%Y-%m-%d %H:%M") in window
    assert first.date() != last.date()
    page.close()
