"""deploy/nginx.conf, the production front of the bundles (docs/operations.md), is valid nginx:
checked by Debian's nginx-light itself (installed by .ci/run)."""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf"


def test_the_nginx_config_passes_nginx_t(tmp_path):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    result = subprocess.run(
        [nginx, "-t", "-c", str(CONFIG), "-p", str(tmp_path), "-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def test_the_bundle_location_is_internal_and_where_the_api_redirects():
    from django.conf import settings

    text = CONFIG.read_text()
    location = text.split(f"location {settings.API_BUNDLE_URL} {{", 1)[1].split("}", 1)[0]
    assert "internal;" in location
    assert "alias /var/lib/registry/bundles/;" in location


@pytest.fixture
def nginx_in_front(live_server, tmp_path):
    """deploy/nginx.conf itself, on a free port in front of the live server."""
    from tests.redis_server import free_port

    port = free_port()
    upstream = live_server.url.rsplit(":", 1)[1]
    text = (
        CONFIG.read_text()
        .replace("listen 80;", f"listen 127.0.0.1:{port};")
        .replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream};")
        .replace("pid /run/nginx-registry.pid;", f"pid {tmp_path}/nginx.pid;")
        .replace("worker_processes auto;", "worker_processes 1;")
    )
    assert f"listen 127.0.0.1:{port};" in text and f":{upstream};" in text
    config = tmp_path / "nginx.conf"
    config.write_text(text)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    process = subprocess.Popen(
        [nginx, "-c", str(config), "-p", str(tmp_path), "-e", str(tmp_path / "error.log"),
         "-g", "daemon off;"],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            requests.get(f"{base}/admin/login/", timeout=1)
            break
        except requests.ConnectionError:
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.1)
    yield base
    process.terminate()
    process.wait(10)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_reviewer_logs_in_to_the_admin_through_nginx_on_a_port_of_its_own(
    nginx_in_front, reviewer
):
    base = nginx_in_front
    session = requests.Session()
    form = session.get(f"{base}/admin/login/", timeout=10)
    assert form.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    # What a browser sends with the form: its Origin and Referer carry the port.
    answer = session.post(
        f"{base}/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": "rita", "password": "pw-rita"},
        headers={"Origin": base, "Referer": f"{base}/admin/login/"},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302, answer.text[:500]
    assert answer.headers["Location"] == "/admin/"
    desk = session.get(f"{base}/admin/", timeout=10)
    assert desk.status_code == 200 and 'id="user-tools"' in desk.text


def test_nginx_tells_the_api_it_sends_the_files():
    from api.fast import ACCEL_HEADER, ACCEL_VALUE

    header = ACCEL_HEADER.removeprefix("HTTP_").replace("_", "-").title()
    assert f"proxy_set_header {header} {ACCEL_VALUE};" in CONFIG.read_text()
