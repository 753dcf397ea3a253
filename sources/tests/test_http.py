"""Streamable HTTP servers: header values from the environment, and the byte cap on bodies."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reviews.models import ReviewTicket
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
    settings.MCP_URL_ALLOWLIST = ["http://127.0.0.1"]
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
