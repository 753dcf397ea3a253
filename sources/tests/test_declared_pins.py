"""Pins over what a server sent, and changes judged on what they propose."""

import hashlib
import json
import sys
from pathlib import Path

import pytest

from registry.models import RiskLevel, Tool
from registry.pins import canonical_json
from reviews.models import ReviewTicket
from reviews.services import ProposalSeen, review_approve
from sources.models import DeclaredTool
from sources.services import mcp_server_add, mcp_server_sync

RAW_SERVER = str(Path(__file__).with_name("raw_server.py"))
PIN = "tool-contract-registry/definitionHash"
# As chrome-devtools declares its tools: an annotation key of its own, and more the SDKs drop.
CLICK = """[{"name": "click", "title": "Click",
  "description": "Clicks on the provided element.",
  "inputSchema": {"type": "object", "properties": {"uid": {"type": "string"}},
                  "required": ["uid"]},
  "annotations": {"category": "Input automation", "readOnlyHint": false},
  "outputSchema": null, "x-vendor": {"weight": 1.50, "big": 1E3}}]"""


@pytest.fixture
def raw_tools(tmp_path):
    """Write the raw server's listing as text (numbers and keys as a server writes them)."""
    path = tmp_path / "tools.json"

    def write(text: str) -> Path:
        path.write_text(text)
        return path

    write(CLICK)
    return write


@pytest.fixture
def raw(db, raw_tools):
    from registry.models import Application

    Application.objects.create(name="assistant")
    return mcp_server_add(
        name="chromedev",
        command=[sys.executable, RAW_SERVER, str(raw_tools(CLICK))],
        applications=["assistant"],
    )


def sha256_jcs(text: str) -> str:
    return hashlib.sha256(canonical_json(json.loads(text))).hexdigest()


def open_tickets(kind: str) -> list[ReviewTicket]:
    return list(ReviewTicket.objects.filter(kind=kind, status=ReviewTicket.Status.OPEN))


def test_the_pin_is_the_hash_of_the_tool_exactly_as_its_server_sent_it(raw, runtime_client_factory):
    report = mcp_server_sync(server=raw, approve=True)

    assert report.published == ["chromedev.click"], report
    (sent,) = json.loads(CLICK)
    version = Tool.objects.get(name="chromedev.click").current_version
    assert version.definition == sent
    expected = sha256_jcs(CLICK[1:-1])
    assert version.definition_hash == expected
    assert DeclaredTool.objects.get(name="click").definition_hash == expected
    runtime = runtime_client_factory("assistant")
    (tool,) = runtime.get("/api/v1/export/mcp/").json()["tools"]
    assert tool["_meta"][PIN] == expected
    assert tool["annotations"] == {"category": "Input automation", "readOnlyHint": False}
    assert tool["title"] == "Click"
    (row,) = runtime.get("/api/v1/tools/").json()["results"]
    assert row["definition_hash"] == expected


def test_a_change_outside_the_contract_still_needs_a_review(raw, raw_tools):
    mcp_server_sync(server=raw, approve=True)
    raw_tools(CLICK.replace('"big": 1E3', '"big": 2'))

    report = mcp_server_sync(server=raw)

    assert report.changed == ["chromedev.click"]
    (change,) = open_tickets(ReviewTicket.Kind.CHANGE)
    assert change.proposed.definition["x-vendor"] == {"weight": 1.5, "big": 2}
    assert change.evidence["definition_hash"] == change.proposed.definition_hash


def test_a_pin_stored_before_definitions_were_kept_is_recorded_at_the_next_sync(raw):
    mcp_server_sync(server=raw, approve=True)
    version = Tool.objects.get(name="chromedev.click").current_version
    # What the migration leaves: no definition on the version, the last seen pin cleared, and
    # the annotations as syncs then stored them (the top-level title copied in).
    legacy = {**version.annotations, "title": "Click"}
    type(version).objects.filter(pk=version.pk).update(definition=None, annotations=legacy)
    DeclaredTool.objects.update(definition_hash="")
    tickets = ReviewTicket.objects.count()

    report = mcp_server_sync(server=raw)

    assert report.repinned == ["chromedev.click"] and report.changed == []
    assert ReviewTicket.objects.count() == tickets
    version.refresh_from_db()
    assert version.definition_hash == sha256_jcs(CLICK[1:-1])
    assert mcp_server_sync(server=raw).unchanged == 1


READ_ONLY = """[{"name": "list_pages", "description": "Get a list of pages open in the browser.",
  "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]"""


def test_a_hint_flip_to_destructive_raises_the_ticket_and_is_flagged(
    raw, raw_tools, reviewer, second_reviewer
):
    raw_tools(READ_ONLY)
    mcp_server_sync(server=raw, approve=True)
    approved = Tool.objects.get(name="chromedev.list_pages").current_version
    assert approved.risk.name == "low"

    raw_tools(READ_ONLY.replace('"readOnlyHint": true', '"destructiveHint": true'))
    report = mcp_server_sync(server=raw)

    assert report.changed == ["chromedev.list_pages"]
    (change,) = open_tickets(ReviewTicket.Kind.CHANGE)
    high = RiskLevel.objects.get(name="high")
    assert change.proposed.risk == high
    assert change.approvals_required == high.approvals_required == 2
    widened = [flag for flag in change.evidence["poisoning"] if flag["code"] == "hint_widened"]
    assert {flag["where"] for flag in widened} == {
        "annotations.readOnlyHint",
        "annotations.destructiveHint",
    }
    assert (
        review_approve(ticket=change, reviewer=reviewer, seen=ProposalSeen.of(change)) is None
    )  # one is not enough
    assert (
        review_approve(ticket=change, reviewer=second_reviewer, seen=ProposalSeen.of(change))
        is not None
    )
    assert Tool.objects.get(name="chromedev.list_pages").current_version.risk == high


def test_a_hint_that_narrows_keeps_the_approved_risk_and_raises_no_flag(raw, raw_tools):
    raw_tools(READ_ONLY.replace('"readOnlyHint": true', '"openWorldHint": true'))
    mcp_server_sync(server=raw, approve=True)
    approved = Tool.objects.get(name="chromedev.list_pages").current_version

    raw_tools(READ_ONLY)
    mcp_server_sync(server=raw)

    (change,) = open_tickets(ReviewTicket.Kind.CHANGE)
    assert change.proposed.risk == approved.risk
    assert change.approvals_required == approved.risk.approvals_required
    assert not [flag for flag in change.evidence["poisoning"] if flag["code"] == "hint_widened"]
