"""MCP servers in the admin: a record to read and edit within bounds, and "sync now" through a
real Celery worker."""

import json
import sys

import pytest
from django.urls import reverse

from reviews.models import ReviewTicket
from sources.models import McpServer
from sources.services import mcp_server_add
from tests.helpers import wait_for
from tests.mcp import GREET, STANDIN


@pytest.fixture
def http_server(db, settings):
    settings.MCP_URL_ALLOWLIST = ["https://mcp.example.com/"]
    settings.MCP_SECRET_DESTINATIONS = {"MCP_TOKEN": ["https://mcp.example.com/mcp"]}
    return mcp_server_add(
        name="remote", url="https://mcp.example.com/mcp", headers={"Authorization": "MCP_TOKEN"}
    )


def test_it_shows_the_command_but_offers_no_field_to_change_it(admin_client, db, tmp_path):
    server = mcp_server_add(name="clock", command=[sys.executable, "-m", "mcp_server_time"])
    page = admin_client.get(reverse("admin:sources_mcpserver_change", args=[server.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "mcp_server_time" in html
    assert 'name="command"' not in html and 'name="transport"' not in html
    assert admin_client.get(reverse("admin:sources_mcpserver_add")).status_code == 403
    listing = admin_client.get(reverse("admin:sources_mcpserver_changelist"))
    assert listing.status_code == 200 and "never synced" in listing.content.decode()


def change_form(server: McpServer, **overrides) -> dict:
    data = {
        "name": server.name,
        "url": server.url,
        "headers": '{"Authorization": "MCP_TOKEN"}',
        "enabled": "on",
        "declared_tools-TOTAL_FORMS": "0",
        "declared_tools-INITIAL_FORMS": "0",
    }
    return {**data, **overrides}


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("url", "http://169.254.169.254/latest/meta-data", "MCP_URL_ALLOWLIST"),
        ("url", "https://mcp.example.com.evil.net/mcp", "MCP_URL_ALLOWLIST"),
        ("headers", '{"Authorization": "SECRET_KEY"}', "starting with MCP_"),
        ("headers", '{"Authorization": "Bearer abc123"}', "starting with MCP_"),
    ],
)
def test_the_form_refuses_addresses_and_secrets_it_may_not_take(
    admin_client, http_server, field, value, reason
):
    url = reverse("admin:sources_mcpserver_change", args=[http_server.pk])
    answer = admin_client.post(url, change_form(http_server, **{field: value}))
    assert answer.status_code == 200  # the form again, with its error
    assert reason in answer.content.decode()
    http_server.refresh_from_db()
    assert http_server.url == "https://mcp.example.com/mcp"
    assert http_server.headers == {"Authorization": "MCP_TOKEN"}


def test_a_header_names_an_environment_variable_and_an_unset_one_fails_the_sync(http_server):
    from sources.services import mcp_server_sync

    report = mcp_server_sync(server=http_server)
    assert report.outcome == McpServer.Outcome.FAILED
    assert report.error == "header Authorization: the environment variable MCP_TOKEN is unset"
    assert ReviewTicket.objects.count() == 0


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_sync_now_runs_on_the_worker(admin_client, worker, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([GREET]))
    server = mcp_server_add(name="acme", command=[sys.executable, STANDIN, str(tools)])

    answer = admin_client.post(
        reverse("admin:sources_mcpserver_changelist"),
        {"action": "sync_now", "_selected_action": [server.pk]},
        follow=True,
    )

    assert "Queued a sync of 1 enabled server(s)." in answer.content.decode()

    def synced() -> bool:
        server.refresh_from_db()
        return server.last_sync_outcome == McpServer.Outcome.OK

    assert wait_for(synced, timeout=90)
    assert server.tool_count == 1
    ticket = ReviewTicket.objects.get(tool__name="acme.greet")
    assert ticket.kind == ReviewTicket.Kind.NEW_TOOL and ticket.status == ReviewTicket.Status.OPEN


def test_the_tool_page_shows_what_the_server_now_declares(admin_client, db, tmp_path):
    from registry.models import Tool
    from sources.services import mcp_server_sync

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([GREET]))
    server = mcp_server_add(name="acme", command=[sys.executable, STANDIN, str(tools)])
    mcp_server_sync(server=server, approve=True)
    tool = Tool.objects.get(name="acme.greet")
    url = reverse("admin:registry_tool_health", args=[tool.pk])

    page = admin_client.get(url).content.decode()
    assert 'id="declared-drift"' in page and "declares the approved definition" in page

    tools.write_text(json.dumps([{**GREET, "description": "Say hi."}]))
    mcp_server_sync(server=server)
    ticket = ReviewTicket.objects.get(tool=tool, kind=ReviewTicket.Kind.CHANGE)
    page = admin_client.get(url).content.decode()
    assert "declares another definition than the approved one" in page
    assert f"ticket #{ticket.pk}</a> (Change, open)" in page
