"""Screenshots of the reviewer's desk for the docs, taken from a running `make run`.

    .venv/bin/python docs/screenshots.py [--base http://127.0.0.1:8000]

Logs in as the demo's second reviewer and writes docs/images/desk.png (the home page),
ticket.png (the demo's drift ticket) and tool-health.png (the drifted tool's page) at 1,400 px,
with Debian's Chromium (no browser download).
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

IMAGES = Path(__file__).resolve().parent / "images"
DRIFTED = "payments.refund_charge"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    base = parser.parse_args().base
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/admin/login/")
        page.fill("#id_username", "reviewer")
        page.fill("#id_password", "reviewer-demo-2026")
        page.click("input[type=submit]")
        page.wait_for_selector("#user-tools")
        page.screenshot(path=IMAGES / "desk.png", full_page=True)

        page.goto(f"{base}/admin/reviews/reviewticket/?kind__exact=drift&status__exact=open")
        page.click(f"#result_list a:has-text('{DRIFTED}')")
        page.wait_for_selector("#ticket-review")
        page.locator("#ticket-review").screenshot(path=IMAGES / "ticket.png")

        page.goto(f"{base}/admin/registry/tool/?q={DRIFTED}")
        page.click(f"#result_list a:text-is('{DRIFTED}')")
        page.wait_for_selector("#tool-health")
        page.locator("#tool-health").screenshot(path=IMAGES / "tool-health.png")
        browser.close()
    for name in ("desk", "ticket", "tool-health"):
        print(IMAGES / f"{name}.png")


if __name__ == "__main__":
    main()
