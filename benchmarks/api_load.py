"""Load on the runtime API: gunicorn (2 workers) on PostgreSQL with 1,000 approved tools, driven
by wrk from another process. Prints requests/s and latency percentiles.

    .venv/bin/python benchmarks/api_load.py [--seconds 15] [--connections 32]

Needs `wrk` (Debian package) and PostgreSQL and Redis on 127.0.0.1. Uses its own database
(``registry_bench_api``, recreated).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PORT = 8765

ROTATE_LUA = """
names = {%s}
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/api/v1/tools/" .. names[(counter %% #names) + 1] .. "/")
end
"""


def wrk(
    url: str, *, seconds: int, connections: int, headers: list[str], script: str | None = None
) -> dict:
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for header in headers:
        command += ["-H", header]
    if script:
        command += ["-s", script]
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    figures = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))}
    for percentile in ("50", "90", "99"):
        match = re.search(rf"\s{percentile}%\s+([\d.]+)(us|ms|s)", output)
        value, unit = float(match.group(1)), match.group(2)
        figures[f"p{percentile}_ms"] = (
            value / 1000 if unit == "us" else value * (1000 if unit == "s" else 1)
        )
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    figures["errors"] = int(non_2xx.group(1)) if non_2xx else 0
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--tools", type=int, default=1000)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: apt-get install wrk")

    from benchmarks import database
    from demo import scaled_world as world

    env = {"REDIS_URL": "redis://127.0.0.1:6379/3", "API_THROTTLE_RATE": "1000000/min"}
    database.django_on_fresh_database("registry_bench_api", **env)
    from api.services import runtime_token_create

    registry = world.registry(args.tools)
    with tempfile.TemporaryDirectory() as tmp:
        database.import_approved(registry, tmp)
        _, token = runtime_token_create(application_name="bench", scopes=["contracts:read"])
        names = [tool["name"] for tool in registry["tools"]]
        script = Path(tmp) / "rotate.lua"
        script.write_text(ROTATE_LUA % ", ".join(f'"{name}"' for name in names))

        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--workers", "2",
             "--bind", f"127.0.0.1:{PORT}", "--log-level", "warning"],
            cwd=ROOT, env=dict(os.environ),
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{PORT}"
            auth = f"Authorization: Bearer {token}"
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"{base}/api/v1/health/")
                    break
                except OSError:
                    time.sleep(0.2)
            request = urllib.request.Request(
                f"{base}/api/v1/tools/?page_size=100", headers={"Authorization": f"Bearer {token}"}
            )
            etag = urllib.request.urlopen(request).headers["ETag"]
            common = {"seconds": args.seconds, "connections": args.connections}
            wrk(
                f"{base}/api/v1/tools/{names[0]}/", headers=[auth], seconds=3, connections=8
            )  # warm
            detail = wrk(base, headers=[auth], script=str(script), **common)
            listing = wrk(f"{base}/api/v1/tools/?page_size=100", headers=[auth], **common)
            conditional = wrk(
                f"{base}/api/v1/tools/?page_size=100",
                headers=[auth, f"If-None-Match: {etag}"],
                **common,
            )
        finally:
            server.terminate()
            server.wait(10)

    print()
    print(
        f"gunicorn 2 workers, PostgreSQL, {args.tools} approved tools, "
        f"wrk -c{args.connections} -d{args.seconds}s"
    )
    for label, figures in (
        ("GET tools/{name}/ (rotating over all tools)", detail),
        ("GET tools/?page_size=100", listing),
        ("GET tools/?page_size=100 with If-None-Match (304)", conditional),
    ):
        print(
            f"{label}: {figures['rps']:,.0f} req/s, p50 {figures['p50_ms']:.1f} ms, "
            f"p90 {figures['p90_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, "
            f"non-2xx/3xx {figures['errors']}"
        )


if __name__ == "__main__":
    main()
