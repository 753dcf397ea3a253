"""What a person sees in the first minutes after `make run`: the logins and the token as the
last lines, mail in a file under var/, each 4xx logged once, a favicon."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# `make run` itself, from install to token, and the server it starts: `make test-slow`.
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_env(var_dir: Path) -> dict:
    env = {
        key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**env, "DJANGO_SETTINGS_MODULE": "config.settings.local", "VAR_DIR": str(var_dir),
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, "the server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)


def stop(process: subprocess.Popen, *, seconds: float = 30) -> str:
    """Ctrl-C to the process's group (started with ``start_new_session``), then SIGKILL if it
    outlives ``seconds``: a test that fails or times out never leaves a server listening."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        return process.communicate(timeout=seconds)[0] or ""
    except ProcessLookupError:
        return process.communicate()[0] or ""
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.communicate()[0] or ""


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_each_4xx_is_logged_once_and_the_favicon_answers(tmp_path):
    env = local_env(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload",
         "--skip-checks"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    output = ""
    try:
        wait_for_port(port, server)
        assert get(f"http://127.0.0.1:{port}/no-such-page") == 404
        assert get(f"http://127.0.0.1:{port}/admin/login/") == 200
        assert get(f"http://127.0.0.1:{port}/favicon.ico") == 200  # after its redirect
        time.sleep(0.5)
    finally:
        output = stop(server)
    assert output.count("/no-such-page") == 1, output
    assert output.count("/admin/login/") == 1, output


def test_make_run_ends_with_the_logins_and_the_token(tmp_path):
    env = local_env(tmp_path)
    manage("migrate", "--noinput", "-v", "0", env=env)
    loaded = manage("load_demo", "--welcome", "--no-traces", env=env)
    assert "runtime token" in loaded.stdout
    port, gateway = free_port(), free_port()
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--welcome", "--addr", f"127.0.0.1:{port}",
         "--gateway", f"127.0.0.1:{gateway}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = serve.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("API docs:"):
                lines.append(serve.stdout.readline().rstrip("\n"))  # the closing rule
                break
    finally:
        stop(serve, seconds=60)
    tail = lines[-7:]
    assert tail[0].startswith("Admin:") and "admin / admin-demo-2026" in tail[0], lines
    assert f"http://127.0.0.1:{port}/admin/" in tail[0]  # the address it listens on
    assert f"Serving admin and API at http://127.0.0.1:{port} (Ctrl-C stops)" in lines
    assert any(line.startswith(f"MCP gateway at http://127.0.0.1:{gateway}/mcp/") for line in lines)
    assert tail[1].startswith("Reviewer:") and tail[2].startswith("Proposer:")
    assert tail[3].startswith("Runtime token") and tail[3].split()[-1].startswith("trk_")
    assert tail[4].startswith("E-mails:") and "outbox.log" in tail[4]
    assert set(tail[6]) == {"─"}
    # The welcome holds a token: printed once, then gone. Mail went to the file, not here.
    assert not (tmp_path / "welcome.txt").exists()
    assert (tmp_path / "mail" / "outbox.log").read_text().count("Subject:") >= 1
    assert not any(line.startswith("Subject:") for line in lines)
    assert (tmp_path / "log" / "worker.log").exists()


def test_a_taken_port_stops_serve_at_once_and_keeps_the_token_unprinted(tmp_path):
    env = local_env(tmp_path)
    (tmp_path / "welcome.txt").write_text("Runtime token (application assistant): trk_secret\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = subprocess.run(
            [sys.executable, "manage.py", "serve", "--welcome", "--addr", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        check = subprocess.run(
            [sys.executable, "manage.py", "serve", "--check", "--addr", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    for answer in (serve, check):
        assert answer.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in answer.stderr
        assert f"make run PORT={port + 1}" in answer.stderr
        assert "trk_" not in answer.stdout + answer.stderr and "Serving" not in answer.stdout
    assert (tmp_path / "welcome.txt").exists()  # printed by the next serve that comes up
