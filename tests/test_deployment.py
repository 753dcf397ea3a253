"""The production shape, run for real: gunicorn under production settings on the test database.

The server is started with the web service's own command from docker-compose.yml, and its
healthcheck is that file's own command, so neither can drift from what is tested.
"""

import http.client
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from api.errors import error_body
from api.services import runtime_token_create
from config.chunked import ChunkedBodyMiddleware
from learning.models import Trace
from tests.helpers import database_url
from tests.redis_server import free_port

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
HOST = "registry.example.com"
LIMIT = 5 * 1024 * 1024


def web_command(port: int) -> list[str]:
    """The compose web command, bound to a free local port."""
    command = list(COMPOSE["services"]["web"]["command"])
    assert command[0] == "gunicorn"
    bind = command.index("--bind")
    command[bind + 1] = f"127.0.0.1:{port}"
    # Every gunicorn of a user shares one default control socket: this one needs none.
    return [sys.executable, "-m", *command, "--no-control-socket"]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": "a-long-random-production-secret-key-for-the-deployment-test-0123456789",
        "ALLOWED_HOSTS": HOST,
        "DATABASE_URL": database_url(),
        "DATA_UPLOAD_MAX_MEMORY_SIZE": str(LIMIT),
        # An empty var/: nothing collected, as on a fresh checkout.
        "VAR_DIR": str(tmp_path_factory.mktemp("var")),
    }
    process = subprocess.Popen(web_command(port), cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, "gunicorn exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.2)
    # Up means answering: a worker's first request loads the URLs and views, which can take
    # longer than the healthcheck's 3 s on a busy machine.
    assert request(port, "GET", "/api/v1/health/")[0] == 200
    yield port, env, process.pid
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()


def request(port: int, method: str, path: str, *, body=None, headers=None, chunked=False):
    """One request as it arrives behind the TLS-terminating proxy; returns status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": HOST, "X-Forwarded-Proto": "https", **(headers or {})}
    conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
    response = conn.getresponse()
    content = response.read()
    conn.close()
    return response.status, content


def in_pieces(data: bytes, size: int = 64 * 1024):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_the_compose_healthcheck_passes(server):
    port, env, _ = server
    test = COMPOSE["services"]["web"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python"
    command = [sys.executable, *[part.replace(":8000", f":{port}") for part in test[2:]]]
    assert command != [sys.executable, *test[2:]], "the healthcheck calls the web port"
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def listening_and_connected(pid: int, port: int) -> tuple[set[int], int]:
    """The sockets on ``port`` that process ``pid`` holds: its listening ones (by inode) and
    how many connections it has accepted."""
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed since it was listed
        if target.startswith("socket:["):
            held.add(int(target[8:-1]))
    listening, connected = set(), 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = (
                int(fields[1].rsplit(":", 1)[1], 16),
                fields[3],
                int(fields[9]),
            )
            if local_port == port and inode in held:
                if state == "0A":
                    listening.add(inode)
                elif state == "01":
                    connected += 1
    return listening, connected


def test_the_workers_share_the_connections_out(server):
    """Each worker listens on a socket of its own (--reuse-port), so the kernel spreads new
    connections over them, and no worker takes every keep-alive connection while another idles
    (docs/operations.md)."""
    port, _, master = server
    workers = [
        int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()
    ]
    assert len(workers) == 2
    connections = []
    try:
        for _ in range(16):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request(
                "GET", "/api/v1/health/", headers={"Host": HOST, "X-Forwarded-Proto": "https"}
            )
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            connections.append(conn)  # kept alive
        held = [listening_and_connected(pid, port) for pid in workers]
    finally:
        for conn in connections:
            conn.close()
    (first_listening, first_connected), (second_listening, second_connected) = held
    assert first_listening and second_listening and not first_listening & second_listening
    assert first_connected + second_connected == 16
    # Spread by a hash of each connection's addresses: all 16 on one worker is 1 in 32,768.
    assert first_connected and second_connected, held


def test_it_serves_the_admin_styles_and_the_api_docs_assets(server):
    port, _, _ = server
    assert request(port, "GET", "/static/admin/css/base.css")[0] == 200
    status, page = request(port, "GET", "/api/v1/docs/")
    assert status == 200
    assets = [
        part.split('"')[0]
        for part in page.decode().split('src="')[1:] + page.decode().split('href="')[1:]
        if part.startswith("/static/")
    ]
    assert any("swagger-ui" in asset for asset in assets), page[:2000]
    for asset in assets:
        assert request(port, "GET", asset)[0] == 200, asset


def test_a_chunked_trace_batch_is_accepted(server):
    port, _, _ = server
    _, raw = runtime_token_create(application_name="assistant", scopes=["traces:write"])
    traces = [
        {
            "trace_id": "chunked-1", "step": step, "tool": "calendar.find_events",
            "args": {}, "status": "success", "state_before": {}, "state_after": {},
            "output": None, "error": None, "duration_ms": 5,
            "occurred_at": "2026-11-01T10:00:00Z",
        }
        for step in (1, 2, 3)
    ]  # fmt: skip
    status, content = request(
        port,
        "POST",
        "/api/v1/traces/",
        body=in_pieces(json.dumps(traces).encode(), size=100),
        headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/json"},
        chunked=True,
    )
    assert status == 200, content
    assert json.loads(content)["accepted"] == 3
    assert Trace.objects.filter(trace_id="chunked-1").count() == 3


def test_a_chunked_body_over_the_limit_gets_413(server):
    port, _, _ = server
    _, raw = runtime_token_create(application_name="assistant", scopes=["traces:write"])
    status, content = request(
        port,
        "POST",
        "/api/v1/traces/",
        body=in_pieces(b"[" + b" " * (10 * 1024 * 1024) + b"]"),
        headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/json"},
        chunked=True,
    )
    assert status == 413
    assert json.loads(content) == error_body(413, f"The request body is larger than {LIMIT} bytes.")
    assert not Trace.objects.exists()


@pytest.mark.parametrize("size, status", [(LIMIT, "200 OK"), (LIMIT + 1, "413")])
def test_the_limit_is_the_upload_limit_to_the_byte(settings, size, status):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    seen = {}

    def application(environ, start_response):
        seen["body"] = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        start_response("200 OK", [])
        return [b""]

    environ = {
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input_terminated": True,
        "wsgi.input": io.BytesIO(b"x" * size),
    }
    answered = []
    ChunkedBodyMiddleware(application)(environ, lambda line, headers: answered.append(line))
    assert answered[0].startswith(status)
    assert len(seen.get("body", b"")) == (size if status == "200 OK" else 0)


def test_the_image_holds_every_local_app():
    """The Dockerfile copies sources folder by folder: a new app must be among them."""
    copied = set(re.findall(r"^COPY (\S+) ", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    local = {app for app in settings.INSTALLED_APPS if (ROOT / app).is_dir()}
    assert local and local <= copied, f"not copied into the image: {sorted(local - copied)}"


def test_compose_publishes_only_nginx_and_trusts_only_it_for_addresses():
    """Straight to gunicorn, a client could name its own address in X-Forwarded-For: compose
    gives gunicorn no port, binds it to loopback inside nginx's network namespace, and trusts
    the forwarded address from nginx there alone."""
    services = COMPOSE["services"]
    published = {name: service["ports"] for name, service in services.items() if "ports" in service}
    assert published == {"nginx": ["${HTTP_PORT:-80}:80"]}
    assert "listen 80;" in (ROOT / "deploy" / "nginx.conf").read_text()
    assert "./deploy/nginx.conf:/etc/registry/nginx.conf:ro" in services["nginx"]["volumes"]
    web = services["web"]
    assert web["network_mode"] == "service:nginx"
    assert web["command"][web["command"].index("--bind") + 1] == "127.0.0.1:8000"
    assert "server 127.0.0.1:8000;" in (ROOT / "deploy" / "nginx.conf").read_text()
    for name, service in services.items():
        environment = service.get("environment", {})
        assert "NUM_PROXIES" not in environment, name
        if "DJANGO_SETTINGS_MODULE" in environment:
            assert environment["TRUSTED_PROXIES"] == "127.0.0.1", name


def test_a_count_of_proxies_is_refused_rather_than_ignored():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "NUM_PROXIES": "1"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and "TRUSTED_PROXIES" in result.stderr
