"""A header's secret goes only to the addresses an operator bound it to, checked when a server
is saved and again at every sync; *Sync now* needs the permission to change servers."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.urls import reverse

from sources.models import McpServer
from sources.services import mcp_server_add, mcp_server_sync

GITHUB = "https://api.githubcopilot.com/mcp/"


class Recorder(BaseHTTPRequestHandler):
    """Remembers every request (path and headers) and answers 404."""

    seen: list[tuple[str, dict]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
        Recorder.seen.append((self.path, dict(self.headers)))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def recorder():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Recorder.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def operator(settings, recorder, monkeypatch):
    """Two allowed servers, the GitHub token bound to GitHub's, another token to the recorder."""
    settings.MCP_URL_ALLOWLIST = [GITHUB, f"{recorder}/mine"]
    settings.MCP_SECRET_DESTINATIONS = {
        "MCP_GITHUB_AUTH": [GITHUB],
        "MCP_MINE_TOKEN": [f"{recorder}/mine"],
    }
    monkeypatch.setenv("MCP_GITHUB_AUTH", "Bearer ghp_secret")
    monkeypatch.setenv("MCP_MINE_TOKEN", "Bearer mine")
    return settings


def test_it_refuses_a_header_naming_a_secret_bound_elsewhere_or_nowhere(db, operator, recorder):
    for variable, reason in (
        ("MCP_GITHUB_AUTH", f"MCP_GITHUB_AUTH may be sent only to {GITHUB}"),
        ("MCP_UNBOUND", "MCP_UNBOUND is bound to no address"),
    ):
        with pytest.raises(ValidationError) as caught:
            mcp_server_add(
                name="mine", url=f"{recorder}/mine/mcp", headers={"Authorization": variable}
            )
        assert reason in caught.value.message_dict["headers"][0]
    assert not McpServer.objects.exists()
    server = mcp_server_add(
        name="mine", url=f"{recorder}/mine/mcp", headers={"Authorization": "MCP_MINE_TOKEN"}
    )
    assert server.headers == {"Authorization": "MCP_MINE_TOKEN"}


def test_a_stdio_server_takes_no_header_secret(db, operator):
    with pytest.raises(ValidationError) as caught:
        mcp_server_add(name="local", command=["true"], headers={"Authorization": "MCP_MINE_TOKEN"})
    assert "MCP_MINE_TOKEN may be sent only to" in caught.value.message_dict["headers"][0]


def test_the_admin_form_cannot_send_another_servers_secret_to_its_own(
    db, operator, recorder, client, outsider
):
    server = mcp_server_add(
        name="mine", url=f"{recorder}/mine/mcp", headers={"Authorization": "MCP_MINE_TOKEN"}
    )
    outsider.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_mcpserver", "change_mcpserver"])
    )
    client.force_login(outsider)

    answer = client.post(
        reverse("admin:sources_mcpserver_change", args=[server.pk]),
        {
            "url": server.url,
            "headers": '{"Authorization": "MCP_GITHUB_AUTH"}',
            "enabled": "on",
            "declared_tools-TOTAL_FORMS": "0",
            "declared_tools-INITIAL_FORMS": "0",
        },
    )

    assert answer.status_code == 200
    assert "MCP_GITHUB_AUTH may be sent only to" in answer.content.decode()
    server.refresh_from_db()
    assert server.headers == {"Authorization": "MCP_MINE_TOKEN"}


@pytest.mark.parametrize("change", ["binding-withdrawn", "row-rewritten", "allowlist-shrunk"])
def test_every_sync_checks_again_and_sends_nothing_when_refused(db, operator, recorder, change):
    server = mcp_server_add(
        name="mine", url=f"{recorder}/mine/mcp", headers={"Authorization": "MCP_MINE_TOKEN"}
    )
    mcp_server_sync(server=server)
    assert [path for path, _ in Recorder.seen] == ["/mine/mcp"]  # it was reachable
    Recorder.seen = []
    if change == "binding-withdrawn":
        operator.MCP_SECRET_DESTINATIONS = {"MCP_GITHUB_AUTH": [GITHUB]}
        reason = "MCP_MINE_TOKEN is bound to no address"
    elif change == "row-rewritten":
        McpServer.objects.filter(pk=server.pk).update(headers={"Authorization": "MCP_GITHUB_AUTH"})
        server.refresh_from_db()
        reason = f"MCP_GITHUB_AUTH may be sent only to {GITHUB}"
    else:
        operator.MCP_URL_ALLOWLIST = [GITHUB]
        reason = "not under any address of MCP_URL_ALLOWLIST"

    report = mcp_server_sync(server=server)

    assert report.outcome == McpServer.Outcome.FAILED
    assert reason in report.error and report.error.endswith("; nothing was sent")
    assert Recorder.seen == []
    assert "ghp_secret" not in report.error


def test_sync_now_needs_the_permission_to_change_servers(
    db, operator, recorder, client, outsider, django_capture_on_commit_callbacks
):
    server = mcp_server_add(name="mine", url=f"{recorder}/mine/mcp")
    outsider.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client.force_login(outsider)
    changelist = reverse("admin:sources_mcpserver_changelist")
    action = {"action": "sync_now", "_selected_action": [server.pk]}

    with django_capture_on_commit_callbacks() as queued:
        answer = client.post(changelist, action, follow=True)
    assert answer.status_code == 200 and queued == []
    assert "sync_now" not in client.get(changelist).content.decode()

    outsider.user_permissions.add(Permission.objects.get(codename="change_mcpserver"))
    with django_capture_on_commit_callbacks() as queued:
        answer = client.post(changelist, action, follow=True)
    assert "Queued a sync of 1 enabled server(s)." in answer.content.decode()
    assert len(queued) == 1
