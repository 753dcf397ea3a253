"""A stdio server runs under a launcher that holds no secret, and nothing it starts outlives
its sync."""

import os
import signal
import subprocess
import sys

import pytest

from reviews.models import ReviewTicket
from sources.services import mcp_server_add, mcp_server_sync
from tests.helpers import wait_for
from tests.mcp import STANDIN


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def daemon_pid(tmp_path):
    record = tmp_path / "daemon.pid"
    yield record
    if record.exists() and alive(pid := int(record.read_text())):
        os.kill(pid, 9)  # never leave one behind, even when the test fails


def test_a_stdio_server_reads_no_secret_from_its_parent_and_leaves_no_daemon(
    db, tools_file, daemon_pid, monkeypatch
):
    monkeypatch.setenv("MCP_GITHUB_AUTH", "Bearer ghp_secret")
    monkeypatch.setenv("DATABASE_URL_PROBE", "postgres://user:password@db/registry")
    server = mcp_server_add(
        name="escape",
        command=[sys.executable, STANDIN, str(tools_file({"contain": str(daemon_pid)}))],
    )

    report = mcp_server_sync(server=server)

    assert report.outcome == "ok", report.error
    read = ReviewTicket.objects.get().proposed.description
    parent = int(read.split()[1].rstrip(":"))
    assert parent != os.getpid()  # the launcher, not the process holding the secrets
    names = set(read.split(":", 1)[1].split())
    assert names and names <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}, names
    pid = int(daemon_pid.read_text())
    assert wait_for(lambda: not alive(pid), timeout=30), f"daemon {pid} outlived the sync"


def test_the_launcher_asked_to_stop_takes_every_descendant_with_it():
    from sources.client import LAUNCHER

    # A server that never exits, with a daemon of its own in another session.
    script = "setsid sleep 600 & echo $!; exec sleep 600"
    launcher = subprocess.Popen(
        [sys.executable, "-I", LAUNCHER, "/bin/sh", "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    daemon = int(launcher.stdout.readline())
    try:
        assert alive(daemon)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(30) == 128 + signal.SIGTERM
        assert wait_for(lambda: not alive(daemon), timeout=30)
    finally:
        if alive(daemon):
            os.kill(daemon, signal.SIGKILL)
