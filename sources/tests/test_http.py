"""Streamable HTTP servers: header values from the environment, the byte cap on bodies, the
allowlist compared normalised and redirects never followed (real local HTTP servers)."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ValidationError

from reviews.models import ReviewTicket
from sources.client import url_allowed
from sources.models import McpServer
from sources.services import mcp_server_add, mcp_server_sync


class Flood(BaseHTTPRequestHandler):
    """Answers every POST with 50 MB of JSON, and remembers the headers it was sent."""

    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
        Flood.seen.append(dict(self.headers))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            self.wfile.write(b'{"jsonrpc": "2.0", "id": 0, "result": {"x": "')
            for _ in range(50 * 16):
                self.wfile.write(b"x" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flood():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Flood.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()


def test_a_flooding_http_server_is_cut_at_the_byte_cap_and_headers_come_from_the_environment(
    db, settings, flood, monkeypatch
):
    settings.MCP_URL_ALLOWLIST = [flood]
    settings.MCP_SECRET_DESTINATIONS = {"MCP_FLOOD_TOKEN": [flood]}
    settings.MCP_MAX_BYTES = 1024 * 1024
    monkeypatch.setenv("MCP_FLOOD_TOKEN", "Bearer s3cret")
    server = mcp_server_add(name="flood", url=flood, headers={"Authorization": "MCP_FLOOD_TOKEN"})

    started = time.monotonic()
    report = mcp_server_sync(server=server)

    assert time.monotonic() - started < 20
    assert report.outcome == McpServer.Outcome.FAILED
    assert report.error == "the server sent more than 1,048,576 bytes"
    assert Flood.seen[0]["Authorization"] == "Bearer s3cret"
    server.refresh_from_db()
    assert server.headers == {"Authorization": "MCP_FLOOD_TOKEN"}  # the name, never the value
    assert "s3cret" not in str(server.last_sync_report) + server.last_sync_error
    assert ReviewTicket.objects.count() == 0


class Redirector(BaseHTTPRequestHandler):
    """Answers every request with ``Redirector.status`` to ``Redirector.location`` (a path on
    itself or a full URL), and remembers what it was sent."""

    seen: list[tuple[str, dict]] = []
    status = 307
    location = "/mcp"

    def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
        Redirector.seen.append((self.path, dict(self.headers)))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(Redirector.status)
        self.send_header("Location", Redirector.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def redirector():
    Redirector.seen = []
    server, origin = serve(Redirector)
    yield origin
    server.shutdown()


@pytest.fixture
def elsewhere():
    """A second server, the target of redirects: it must never be asked anything."""
    Flood.seen = []
    server, origin = serve(Flood)
    yield origin
    server.shutdown()


@pytest.mark.parametrize(
    ("status", "location"),
    [
        (307, "/mcp"),  # the same address, again and again
        (307, "/private"),  # the same origin, outside the allowlisted path
        (308, "/mcp/../private"),
        (302, "ELSEWHERE/mcp"),  # another server (another port)
    ],
    ids=["307-loop", "307-same-origin", "308-dot-segments", "302-elsewhere"],
)
def test_no_redirect_is_followed_and_no_header_crosses_one(
    db, settings, redirector, elsewhere, monkeypatch, status, location
):
    Redirector.status = status
    Redirector.location = location.replace("ELSEWHERE", elsewhere)
    settings.MCP_URL_ALLOWLIST = [f"{redirector}/mcp", f"{elsewhere}/mcp"]
    settings.MCP_SECRET_DESTINATIONS = {"MCP_TOKEN": [f"{redirector}/mcp"]}
    monkeypatch.setenv("MCP_TOKEN", "Bearer s3cret")
    server = mcp_server_add(
        name="moved", url=f"{redirector}/mcp", headers={"Authorization": "MCP_TOKEN"}
    )

    report = mcp_server_sync(server=server)

    assert report.outcome == McpServer.Outcome.FAILED
    assert report.error.startswith(f"the server answered {status}, a redirect to ")
    assert "no redirect is followed" in report.error
    assert [path for path, _ in Redirector.seen] == ["/mcp"]  # one request, never repeated
    assert Flood.seen == []  # nothing, and no secret, went where it pointed
    assert ReviewTicket.objects.count() == 0


@pytest.mark.parametrize(
    "path",
    [
        "/mcp/../private",
        "/mcp/%2e%2e/private",
        "/mcp/%2E%2e/private",
        "/mcp/.%2e/private",
        "/mcp/%2e/../private",
        "/mcp%2f..%2fprivate",
        "/mcp/%252e%252e/private",
        "/mcp/..\\private",
        "/mcp/%5c..%5cprivate",
    ],
)
def test_it_refuses_a_url_a_server_could_read_as_another_path(db, settings, path):
    settings.MCP_URL_ALLOWLIST = ["https://mcp.example.com/mcp"]

    with pytest.raises(ValidationError) as caught:
        mcp_server_add(name="dots", url=f"https://mcp.example.com{path}")

    assert "MCP_URL_ALLOWLIST" in caught.value.message_dict["url"][0]
    assert mcp_server_add(name="ok", url="https://mcp.example.com/mcp/a.b/c..d").pk


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://mcp.example.com/mcp", True),
        ("https://mcp.example.com:443/mcp", True),
        ("https://MCP.example.com/mcp/x", True),
        ("https://mcp.example.com:6379/mcp", False),  # an entry's missing port is the scheme's
        ("http://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcpx", False),
        ("ftp://mcp.example.com/mcp", False),
    ],
)
def test_the_allowlist_compares_scheme_host_port_and_path(url, allowed):
    assert url_allowed(url, ["https://mcp.example.com/mcp"]) is allowed
