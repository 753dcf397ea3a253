"""What one sync may cost reviewers: texts a person can read, a few new tools at a time, one
e-mail per sync, and no ticket left open for a tool its server stopped declaring."""

import sys

import pytest

from reviews.models import AuditEntry, ReviewTicket
from sources import services
from sources.models import McpServer
from sources.services import mcp_server_add, mcp_server_sync
from tests.mcp import GREET, STANDIN


@pytest.fixture
def acme(db, tools_file):
    return mcp_server_add(name="acme", command=[sys.executable, STANDIN, str(tools_file([]))])


@pytest.fixture
def checks(monkeypatch):
    """Counts the per-tool work a sync does after reading a definition."""
    counted = {"diffs": 0, "risks": 0}

    def counting(name, function):
        def wrapper(*args, **kwargs):
            counted[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(
        services, "contract_diff_flags", counting("diffs", services.contract_diff_flags)
    )
    monkeypatch.setattr(services, "suggest_risk", counting("risks", services.suggest_risk))
    return counted


def parameters(count: int, size: int) -> dict:
    return {
        "type": "object",
        "properties": {
            f"p{index}": {"type": "string", "description": "d" * size} for index in range(count)
        },
    }


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"description_bytes": 7 * 1024 * 1024}, "description: 7,340,032 characters, more than "),
        ([{**GREET, "title": "T" * 201}], "title: 201 characters, more than the 200 a reviewer"),
        (
            [{**GREET, "annotations": {"title": "T" * 500}}],
            "annotations.title: 500 characters",
        ),
        (
            [{**GREET, "inputSchema": parameters(1, 8_001)}],
            "inputSchema.properties.p0.description: 8,001 characters, more than the 8,000 a "
            "reviewer reads (MCP_MAX_TEXT_CHARS)",
        ),
        (
            [{**GREET, "inputSchema": parameters(5, 7_000)}],
            "its texts together pass 32,000 characters",
        ),
    ],
    ids=["7MB-description", "title", "annotations-title", "parameter", "all-texts"],
)
def test_a_text_longer_than_a_reviewer_reads_is_refused_before_any_check(
    acme, tools_file, checks, spec, reason
):
    tools_file(spec)

    report = mcp_server_sync(server=acme)

    assert report.outcome == McpServer.Outcome.PARTIAL, report.error
    (refusal,) = report.refused.values()
    assert reason in refusal
    assert checks == {"diffs": 0, "risks": 0}
    assert ReviewTicket.objects.count() == 0


def test_a_text_a_reviewer_can_read_is_proposed(acme, tools_file):
    tools_file([{**GREET, "description": "d" * 8_000, "inputSchema": parameters(3, 7_000)}])
    assert mcp_server_sync(server=acme).proposed == ["acme.greet"]


def named(names: list[str]) -> list[dict]:
    return [{**GREET, "name": name} for name in names]


def test_a_sync_proposes_a_few_new_tools_and_reviewers_get_one_digest(
    acme, tools_file, settings, reviewer, second_reviewer, mailoutbox
):
    settings.MCP_MAX_NEW_TOOLS_PER_SYNC = 5
    tools_file(named([f"t{index:02}" for index in range(12)]))

    first = mcp_server_sync(server=acme)

    assert len(first.proposed) == 5 and len(first.deferred) == 7
    assert ReviewTicket.objects.filter(status=ReviewTicket.Status.OPEN).count() == 5
    assert sorted(mail.to[0] for mail in mailoutbox) == ["rita@example.com", "sam@example.com"]
    assert mailoutbox[0].subject == "[registry] Review needed: 5 ticket(s) from MCP server acme"
    assert mailoutbox[0].body.count("/admin/reviews/reviewticket/") == 5
    acme.refresh_from_db()
    assert acme.last_sync_report["deferred"] == first.deferred

    second = mcp_server_sync(server=acme)
    third = mcp_server_sync(server=acme)
    assert (len(second.proposed), len(third.proposed), third.deferred) == (5, 2, [])
    assert len(mailoutbox) == 6  # one per reviewer per sync


def test_tickets_of_tools_gone_from_their_server_are_withdrawn(
    acme, tools_file, settings, reviewer, mailoutbox
):
    settings.MCP_MAX_NEW_TOOLS_PER_SYNC = 3
    # Fresh names at every listing: never more open tickets than one sync's cap.
    for wave in range(4):
        tools_file(named([f"w{wave}_{index}" for index in range(10)]))
        report = mcp_server_sync(server=acme)
        assert len(report.proposed) == 3
        assert len(report.withdrawn) == (3 if wave else 0)
        assert ReviewTicket.objects.filter(status=ReviewTicket.Status.OPEN).count() == 3

    withdrawn = ReviewTicket.objects.filter(status=ReviewTicket.Status.SUPERSEDED)
    assert withdrawn.count() == 9
    assert all(ticket.reason == "its server no longer declares the tool" for ticket in withdrawn)
    assert AuditEntry.objects.filter(action=AuditEntry.Action.WITHDRAWN).count() == 9
    assert len(mailoutbox) == 4  # one digest per sync, one reviewer
