"""What operators do with servers: environments, failed starts, edits, removal."""

import json
import shlex
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from registry.models import Application, Tool
from reviews.models import ReviewTicket
from sources.models import McpServer

RAW_SERVER = str(Path(__file__).with_name("raw_server.py"))
TOOL = {"name": "lookup", "description": "Look a record up.", "inputSchema": {"type": "object"}}


def run(*args: str) -> str:
    out = StringIO()
    call_command("mcp_servers", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([TOOL]))
    return path


def stdio(tools: Path) -> str:
    return shlex.join([sys.executable, RAW_SERVER, str(tools)])


def test_add_says_how_often_the_server_is_synced(db, tools):
    assert "; synced every 60 minutes by beat." in run("add", "acme", "--stdio", stdio(tools))


def test_a_stdio_servers_environment_is_read_at_each_sync_and_never_stored(db, tools, monkeypatch):
    tools.write_text(json.dumps([{**TOOL, "description": "Key ends ${API_KEY}."}]))
    run("add", "acme", "--stdio", stdio(tools), "--env", "API_KEY=MCP_ACME_KEY")
    server = McpServer.objects.get(name="acme")
    assert server.env == {"API_KEY": "MCP_ACME_KEY"}

    monkeypatch.delenv("MCP_ACME_KEY", raising=False)
    with pytest.raises(CommandError):
        run("sync", "acme")
    server.refresh_from_db()
    assert server.last_sync_error == "env API_KEY: the environment variable MCP_ACME_KEY is unset"

    monkeypatch.setenv("MCP_ACME_KEY", "v4lue-9")
    run("sync", "acme")
    proposed = ReviewTicket.objects.get().proposed
    assert proposed.description == "Key ends v4lue-9."  # it reached the server's environment
    server.refresh_from_db()
    stored = json.dumps([server.env, server.headers, server.command, server.last_sync_report])
    assert "v4lue-9" not in stored and "v4lue-9" not in run("list")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "API_KEY=s3cret"], "starting with MCP_"),
        (["--env", "API_KEY"], "NAME=ENV_VAR"),
        (["--env", "BAD-NAME=MCP_X"], "not an environment variable name"),
    ],
)
def test_an_environment_names_variables_never_values(db, tools, args, message):
    with pytest.raises(CommandError) as caught:
        run("add", "acme", "--stdio", stdio(tools), *args)
    assert message in str(caught.value)
    assert not McpServer.objects.exists()


def test_a_failed_start_shows_the_end_of_the_servers_stderr_on_its_record(db, admin_client):
    program = (
        "import sys; print('reading config', file=sys.stderr); "
        "sys.exit('MCP_ACME_KEY is not set: add it')"
    )
    run("add", "acme", "--stdio", shlex.join([sys.executable, "-c", program]))
    with pytest.raises(CommandError):
        run("sync", "acme")
    server = McpServer.objects.get(name="acme")
    assert server.last_sync_outcome == McpServer.Outcome.FAILED
    reason, _, stderr = server.last_sync_error.partition("\n")
    assert reason.startswith("the server")
    assert stderr.splitlines() == [
        "The server's stderr ended with:",
        "reading config",
        "MCP_ACME_KEY is not set: add it",
    ]
    page = admin_client.get(reverse("admin:sources_mcpserver_change", args=[server.pk]))
    assert "MCP_ACME_KEY is not set: add it" in page.content.decode()


def test_remove_proposes_the_retirement_of_its_tools_and_keeps_them(db, tools):
    run("add", "acme", "--stdio", stdio(tools))
    run("sync", "acme", "--approve")
    schedule = McpServer.objects.get(name="acme").schedule_id

    said = run("remove", "acme")

    assert said == "Removed acme; 1 tool(s) proposed for retirement: acme.lookup\n"
    assert not McpServer.objects.exists()
    assert not PeriodicTask.objects.filter(pk=schedule).exists()
    retirement = ReviewTicket.objects.get(kind=ReviewTicket.Kind.RETIREMENT)
    assert retirement.tool.name == "acme.lookup" and retirement.status == "open"
    assert Tool.objects.get(name="acme.lookup").lifecycle == Tool.Lifecycle.ACTIVE
    with pytest.raises(CommandError, match="unknown MCP server: acme"):
        run("remove", "acme")


def test_edit_replaces_only_what_it_is_given(db, tools, tmp_path):
    Application.objects.create(name="assistant")
    run("add", "acme", "--stdio", stdio(tools), "--env", "API_KEY=MCP_ACME_KEY")
    other = tmp_path / "other.json"
    other.write_text("[]")

    run("edit", "acme", "--stdio", stdio(other), "--application", "assistant", "--disable")

    server = McpServer.objects.get(name="acme")
    assert server.command[-1] == str(other)
    assert server.env == {"API_KEY": "MCP_ACME_KEY"}  # not given: kept
    assert [a.name for a in server.applications.all()] == ["assistant"]
    assert server.enabled is False and server.schedule.enabled is False
    run("edit", "acme", "--no-env", "--enable")
    server.refresh_from_db()
    assert server.env == {} and server.enabled and server.schedule.enabled
    with pytest.raises(CommandError, match="Only a stdio server has an environment"):
        run("edit", "acme", "--url", "https://mcp.example.com/mcp", "--env", "A=MCP_A")


def test_the_admin_shows_how_its_tools_are_named(admin_client, db, tools):
    run("add", "acme", "--stdio", stdio(tools))
    server = McpServer.objects.get(name="acme")
    page = admin_client.get(reverse("admin:sources_mcpserver_change", args=[server.pk]))
    assert "each is the contract &lt;server&gt;.&lt;tool&gt;." in page.content.decode()


def test_a_ticket_names_its_server_what_it_calls_itself_and_what_runs(admin_client, db, tools):
    run("add", "acme", "--stdio", stdio(tools))
    run("add", "other", "--stdio", stdio(tools))
    run("sync")
    ticket = ReviewTicket.objects.get(tool__name="acme.lookup")
    assert ticket.evidence["server_info"] == {"name": "raw-stand-in", "version": "1.2.3"}
    assert ticket.evidence["runs"] == stdio(tools)

    page = admin_client.get(reverse("admin:reviews_reviewticket_change", args=[ticket.pk]))
    html = page.content.decode()
    assert "<strong>raw-stand-in</strong> version <code>1.2.3</code>" in html
    assert RAW_SERVER in html

    listing = reverse("admin:reviews_reviewticket_changelist")
    shown = admin_client.get(listing, {"server": "acme"}).content.decode()
    assert "acme.lookup" in shown and "other.lookup" not in shown
    assert "source server" in admin_client.get(listing).content.decode()
