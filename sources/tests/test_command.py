"""manage.py mcp_servers add | list | sync, and what reviewers then do with the tickets."""

import json
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from registry.models import Application, Tool
from reviews.models import ReviewTicket
from reviews.services import ProposalSeen, review_approve
from sources.models import McpServer
from sources.services import SyncBusy, mcp_server_sync
from tests.mcp import GREET, POISONED, STANDIN


def run(*args: str) -> str:
    out = StringIO()
    call_command("mcp_servers", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([GREET]))
    return path


def test_add_list_and_sync(db, tools):
    Application.objects.create(name="assistant")
    added = run("add", "acme", "--stdio", f"{sys.executable} {STANDIN} {tools}",
                "--application", "assistant")  # fmt: skip
    assert added.startswith("Added acme (stdio")
    server = McpServer.objects.get(name="acme")
    assert server.command == [sys.executable, STANDIN, str(tools)]
    schedule = PeriodicTask.objects.get(pk=server.schedule_id)
    assert schedule.task == "sources.tasks.mcp_server_sync" and json.loads(schedule.args) == [
        server.pk
    ]

    assert run("list").startswith("acme\tstdio\t")
    synced = run("sync", "acme")
    assert "1 declared, 1 proposed" in synced
    assert "\tok\t1 tools" in run("list")
    assert Application.objects.get(name="assistant").enabled_tools.get().name == "acme.greet"

    server.delete()
    assert not PeriodicTask.objects.filter(pk=schedule.pk).exists()
    assert Tool.objects.filter(name="acme.greet").exists()  # its tools stay, with their tickets


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "x", "--url", "http://10.0.0.1/mcp"], "MCP_URL_ALLOWLIST"),
        (["add", "x", "--stdio", "run", "--application", "nowhere"], "unknown application"),
        (["add", "bad name", "--stdio", "run"], "name:"),
        (["add", "x", "--stdio", "run", "--header", "Authorization"], "NAME=ENV_VAR"),
        (["sync", "nowhere"], "unknown MCP server(s): nowhere"),
    ],
)
def test_it_says_what_is_wrong(db, args, message):
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert message in str(caught.value)
    assert McpServer.objects.filter(name="x").count() == 0


def test_a_failed_sync_is_an_error_of_the_command_on_the_record_and_the_desk(
    db, tmp_path, admin_client
):
    run("add", "gone", "--stdio", str(tmp_path / "no-such-program"))
    with pytest.raises(CommandError):
        run("sync")
    server = McpServer.objects.get(name="gone")
    assert server.last_sync_outcome == McpServer.Outcome.FAILED
    assert server.last_sync_error.startswith("cannot start the server")
    desk = admin_client.get(reverse("admin:index")).content.decode()
    assert 'id="desk-mcp-failures"' in desk and "cannot start the server" in desk


def test_two_syncs_of_one_server_do_not_run_at_once(db, tools):
    run("add", "acme", "--stdio", f"{sys.executable} {STANDIN} {tools}")
    server = McpServer.objects.get(name="acme")
    from django.utils import timezone

    McpServer.objects.filter(pk=server.pk).update(sync_started_at=timezone.now())
    with pytest.raises(SyncBusy):
        mcp_server_sync(server=server)
    assert ReviewTicket.objects.count() == 0


def test_reviewers_read_the_tickets_and_approving_a_retirement_deprecates_the_tool(
    db, tools, reviewer, admin_client
):
    run("add", "acme", "--stdio", f"{sys.executable} {STANDIN} {tools}")
    run("sync", "--approve")
    tools.write_text(json.dumps([{**GREET, "description": POISONED}]))
    run("sync")
    change = ReviewTicket.objects.get(kind=ReviewTicket.Kind.CHANGE)
    page = admin_client.get(reverse("admin:reviews_reviewticket_change", args=[change.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "IMPORTANT" in html and 'id="declared-source"' in html
    assert 'id="compatible"' in html and change.evidence["definition_hash"] in html

    required = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    tools.write_text(json.dumps([{**GREET, "description": POISONED, "inputSchema": required}]))
    run("sync")
    html = admin_client.get(
        reverse("admin:reviews_reviewticket_change", args=[change.pk])
    ).content.decode()
    assert "breaks callers" in html and "who: now required" in html

    tools.write_text("[]")
    run("sync")
    retirement = ReviewTicket.objects.get(kind=ReviewTicket.Kind.RETIREMENT)
    page = admin_client.get(reverse("admin:reviews_reviewticket_change", args=[retirement.pk]))
    assert page.status_code == 200
    desk = admin_client.get(reverse("admin:index")).content.decode()
    assert "desk-mcp-failures" not in desk

    review_approve(ticket=retirement, reviewer=reviewer, seen=ProposalSeen.of(retirement))
    tool = Tool.objects.get(name="acme.greet")
    assert tool.lifecycle == Tool.Lifecycle.DEPRECATED
    assert tool.current_version == retirement.proposed
