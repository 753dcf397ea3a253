"""A stand-in MCP registry on 127.0.0.1 for the tests: real server.json documents, and a hostile
registry's answers (huge, slow, malformed, redirected, compressed) when a test asks for them.

``StandinRegistry.servers`` maps a server name to its versions' server.json documents (oldest
first; the last is ``latest``); ``answers`` maps a request path to a canned answer that wins over
them; ``paths`` is every path requested, in order; ``only_v0`` serves the ``/v0`` paths alone.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    drip_seconds: float = 0.0  # a pause before each byte of the body
    gzip: bool = False


class StandinRegistry:
    def __init__(self) -> None:
        self.servers: dict[str, list[dict[str, Any]]] = {}
        self.answers: dict[str, Answer] = {}
        self.paths: list[str] = []
        self.only_v0 = False
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
                registry.paths.append(self.path)
                answer = registry.answer(self.path)
                body = gzip.compress(answer.body) if answer.gzip else answer.body
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                if answer.gzip:
                    self.send_header("Content-Encoding", "gzip")
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if not answer.drip_seconds:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if answer.drip_seconds:
                        for byte in body:
                            time.sleep(answer.drip_seconds)
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> StandinRegistry:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, raw_path: str) -> Answer:
        path = urlsplit(raw_path).path
        if path in self.answers:
            return self.answers[path]
        api, _, rest = path.lstrip("/").partition("/servers/")
        name, _, version = rest.rpartition("/versions/")
        name = unquote(name)
        versions = self.servers.get(name)
        if api not in ("v0", "v0.1") or (self.only_v0 and api != "v0") or not versions:
            return _not_found()
        version = unquote(version)
        chosen = versions[-1] if version == "latest" else None
        for server in versions:
            if server["version"] == version:
                chosen = server
        if chosen is None:
            return _not_found()
        meta = {
            "io.modelcontextprotocol.registry/official": {
                "status": "active",
                "publishedAt": "2025-11-20T10:00:00Z",
                "isLatest": chosen is versions[-1],
            }
        }
        return Answer(body=json.dumps({"server": chosen, "_meta": meta}).encode())


def _not_found() -> Answer:
    return Answer(status=404, body=b'{"title": "Not Found", "status": 404}')
