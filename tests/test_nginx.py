"""deploy/nginx.conf, the production front of the bundles (docs/operations.md), is valid nginx:
checked by Debian's nginx-light itself (installed by .ci/run)."""

import shutil
import subprocess
from pathlib import Path

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


def test_nginx_tells_the_api_it_sends_the_files():
    from api.fast import ACCEL_HEADER, ACCEL_VALUE

    header = ACCEL_HEADER.removeprefix("HTTP_").replace("_", "-").title()
    assert f"proxy_set_header {header} {ACCEL_VALUE};" in CONFIG.read_text()
