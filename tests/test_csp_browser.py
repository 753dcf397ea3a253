"""The admin sends a Content-Security-Policy, and every page of it still works under it in a
real Chromium: the desk, a tool's health charts, a ticket's diff, lists and forms report no
violation, while a script injected into a page is refused."""

import pytest

from learning.models import ToolDayStats
from registry.models import Tool
from reviews.models import ReviewTicket
from tests.helpers import login

# Minutes on two cores: `make test-slow` (CI runs it).
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

# Before any page script: every violation the browser reports is kept where the test reads it.
COLLECT = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(
    e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + (e.sourceFile || '')));
"""


def violations(page) -> list[str]:
    return page.evaluate("window.__violations")


def test_admin_pages_load_with_no_violation_and_an_injected_script_is_refused(
    demo_site,
    browser,
):
    base = demo_site
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.add_init_script(COLLECT)

    response = page.goto(f"{base}/admin/login/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy
    assert violations(page) == []
    login(page, base, "reviewer", "reviewer-demo-2026")

    drifted = Tool.objects.get(name="payments.refund_charge")
    assert ToolDayStats.objects.filter(tool=drifted).exists()
    ticket = ReviewTicket.objects.filter(kind="drift").first()
    pages = [
        "/admin/",
        f"/admin/registry/tool/{drifted.pk}/health/",  # the health charts
        f"/admin/reviews/reviewticket/{ticket.pk}/change/",  # the diff and the decision
        "/admin/reviews/reviewticket/",
        "/admin/registry/tool/",
        "/admin/learning/trace/",
        f"/admin/registry/contractversion/{drifted.current_version_id}/change/",
        "/admin/password_change/",
    ]
    for path in pages:
        response = page.goto(f"{base}{path}")
        assert response.status == 200, path
        assert "content-security-policy" in response.headers, path
        page.wait_for_load_state("load")
        assert violations(page) == [], (path, violations(page))
    # The health charts drew (they are inline SVG, which the policy allows as markup).
    page.goto(f"{base}/admin/registry/tool/{drifted.pk}/health/")
    assert page.locator(".health-chart svg").count() > 0
    # The admin's own scripts ran: the list's select-all box is wired by static JavaScript.
    page.goto(f"{base}/admin/reviews/reviewticket/")
    page.check("#action-toggle")
    assert page.locator("#result_list input.action-select:checked").count() > 0

    # What an injection would do is refused, and reported.
    page.evaluate(
        """() => { const s = document.createElement('script');
                   s.textContent = 'window.__ran = true'; document.body.appendChild(s); }"""
    )
    page.wait_for_timeout(100)
    assert page.evaluate("window.__ran === undefined")
    assert any(v.startswith("script-src") for v in violations(page)), violations(page)
    page.close()


def test_the_api_answers_carry_no_page_policy(client):
    assert "Content-Security-Policy" not in client.get("/api/v1/health/")
    assert "Content-Security-Policy" in client.get("/admin/login/")
