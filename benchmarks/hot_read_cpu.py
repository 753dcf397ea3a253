"""CPU time of one hot read inside the WSGI application, without a server or a load tool.

``benchmarks/api_load.py`` measures the hot reads under gunicorn and wrk, where the machine's
other work moves requests/s by a third from one round to the next. This calls
``config.wsgi.application`` directly, in a process of its own with production settings, on
PostgreSQL and Redis with 100 approved tools and the application's bundle rendered, and prints
the CPU time per request (best of nine runs of 2,000; the response is closed, so Django's
``request_finished`` receivers run as under a server), for ``revision/`` and ``tools/{name}/``:

    .venv/bin/python benchmarks/hot_read_cpu.py [--database NAME] [--redis-db N]

It measures the code of the checkout it lives in: copied into another checkout with
``benchmarks/database.py``, its set-up, it measures that one (docs/benchmarks.md). Uses its
own database (``registry_bench_cpu``, recreated) and Redis databases 6 (broker) and 7 (cache,
flushed) unless told others.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RUNS, REQUESTS, WARM_UP = 9, 2000, 300


def environ(path: str, token: str) -> dict:
    return {
        "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "HTTP_HOST": "127.0.0.1:8000",
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
        "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
        "HTTP_AUTHORIZATION": f"Bearer {token}",
    }  # fmt: skip


def measure(token: str, paths: list[str]) -> None:
    """In the child: time the application on each path."""
    from config.wsgi import application

    statuses: list[str] = []

    def call(path: str) -> None:
        body = application(
            environ(path, token), lambda status, headers, *_: statuses.append(status)
        )
        b"".join(body)
        if hasattr(body, "close"):  # as a WSGI server does
            body.close()

    for path in paths:
        for _ in range(WARM_UP):  # the first request of a token goes through Django
            call(path)
        assert statuses[-1].startswith("200"), (path, statuses[-1])
        best = float("inf")
        for _ in range(RUNS):
            started = time.process_time()
            for _ in range(REQUESTS):
                call(path)
            best = min(best, (time.process_time() - started) / REQUESTS)
        print(f"| `GET {path.replace('/api/v1/', '')}` | {best * 1e6:.1f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="registry_bench_cpu")
    parser.add_argument("--redis-db", type=int, default=6, help="the broker's; the cache: +1")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        job = json.loads(args.child)
        measure(job["token"], job["paths"])
        return

    from benchmarks import database

    registry, raw = database.hot_reads_world(args.database, redis_db=args.redis_db, tools=100)
    paths = ["/api/v1/revision/", f"/api/v1/tools/{registry['tools'][0]['name']}/"]
    child_env = {**os.environ, **database.SERVER_SETTINGS}
    print("CPU time per request in config.wsgi.application, production settings, best of "
          f"{RUNS} runs of {REQUESTS:,}")  # fmt: skip
    print("| read | CPU per request |\n|---|---:|")
    sys.stdout.flush()
    job = json.dumps({"token": raw, "paths": paths})
    subprocess.run([sys.executable, __file__, "--child", job], cwd=ROOT, env=child_env, check=True)


if __name__ == "__main__":
    main()
