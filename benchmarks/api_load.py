"""Load on the runtime API's hot reads, beside nginx sending the same body as a static file.

gunicorn (2 workers, production settings, ``--reuse-port`` as deployed) on PostgreSQL and Redis
with 1,000 approved tools, and nginx (Debian's nginx-light, a temporary config) serving one
contract's JSON body, exactly the bytes ``tools/{name}/`` answers, as a file; wrk drives each in
turn from another process on the same machine. Prints requests/s, p50 and p99 of each read, its
ratio to nginx's figure, and the CPU time gunicorn's processes spent per request (from /proc:
far steadier than requests/s on a busy machine).

    .venv/bin/python benchmarks/api_load.py [--seconds 15] [--connections 32] [--tools 1000]
        [--worker-class gthread] [--threads 4] [--quick] [--database NAME] [--redis-db N]
        [--against PATH [--rounds 8]]

``--quick`` (3 s per read, 100 tools) checks that it all runs. Needs ``wrk`` and ``nginx``
(Debian packages) and PostgreSQL and Redis on 127.0.0.1. Uses its own database
(``registry_bench_api``, recreated) and Redis databases 3 (broker) and 4 (cache, flushed);
``--database`` and ``--redis-db`` (the broker's; the cache takes the next) choose others.

``--against PATH`` compares this checkout with another (say, ``git worktree add --detach
../base <commit>``): both serve at once, on databases and Redis databases of their own, and
the two hot reads alternate between them for ``--rounds`` rounds; it prints the medians, the
change, and every round. The other checkout needs nothing copied into it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

ROTATE_LUA = """
names = {%s}
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/api/v1/tools/" .. names[(counter %% #names) + 1] .. "/")
end
"""

NGINX_CONF = """
worker_processes 2;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path {folder};
    proxy_temp_path {folder};
    fastcgi_temp_path {folder};
    uwsgi_temp_path {folder};
    scgi_temp_path {folder};
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {folder}; default_type application/json; }}
    }}
}}
"""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its children so far, from /proc."""
    total = 0.0
    for task in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{task}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def wrk(
    url: str,
    *,
    seconds: int,
    connections: int,
    headers: list[str],
    script: str | None = None,
    server: int | None = None,
) -> dict:
    """wrk's figures; with ``server`` (a pid), also that process tree's CPU per request, which
    depends much less than requests/s on what else the machine is doing."""
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for header in headers:
        command += ["-H", header]
    if script:
        command += ["-s", script]
    cpu_before = cpu_seconds(server) if server else 0.0
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    figures = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))}
    if server:
        requests = int(re.search(r"(\d+) requests in", output).group(1))
        figures["cpu_us"] = (cpu_seconds(server) - cpu_before) / max(requests, 1) * 1e6
    for percentile in ("50", "99"):
        match = re.search(rf"\s{percentile}%\s+([\d.]+)(us|ms|s)", output)
        value, unit = float(match.group(1)), match.group(2)
        figures[f"p{percentile}_ms"] = (
            value / 1000 if unit == "us" else value * (1000 if unit == "s" else 1)
        )
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    figures["errors"] = (int(non_2xx.group(1)) if non_2xx else 0) + (
        sum(int(n) for n in socket.groups()) if socket else 0
    )
    return figures


def free_port() -> int:
    # Other people's servers may hold any fixed port on a shared machine.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, headers: dict[str, str]) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def wait_until_up(url: str) -> None:
    for _ in range(150):
        try:
            urllib.request.urlopen(url)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} never answered")


@contextlib.contextmanager
def gunicorn(root: Path, environ: dict, args: argparse.Namespace, token: str, first: str):
    """The checkout at ``root`` served by gunicorn as deployed, its token's first read made
    (it goes through Django, which writes the token's record); yields the process and URL."""
    from benchmarks import database

    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application", "--workers", "2",
        "--worker-class", args.worker_class, "--threads", str(args.threads),
        "--bind", f"127.0.0.1:{port}", "--reuse-port", "--log-level", "warning",
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=root, env={**environ, **database.SERVER_SETTINGS})
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(f"{base}/api/v1/health/")
        auth = {"Authorization": f"Bearer {token}"}
        for path in ("/api/v1/revision/", f"/api/v1/tools/{first}/"):
            status, _, answer = get(f"{base}{path}", auth)
            assert server.poll() is None and status == 200, (path, status, answer)
        yield server, base
    finally:
        server.terminate()
        server.wait(10)


def rotation(script: Path, names: list[str]) -> str:
    """``script``, written as a wrk script reading ``tools/{name}/`` of each name in turn."""
    script.write_text(ROTATE_LUA % ", ".join(f'"{name}"' for name in names))
    return str(script)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="3 s per read, 100 tools")
    parser.add_argument("--database", default="registry_bench_api")
    parser.add_argument("--redis-db", type=int, default=3, help="the broker's; the cache: +1")
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout: both serve at once and each hot read alternates between them",
    )
    parser.add_argument("--rounds", type=int, default=8, help="with --against")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.tools = 3, 100
    for program in ("wrk", NGINX):
        if not shutil.which(program):
            sys.exit(f"{program} is not installed: apt-get install wrk nginx-light")

    from benchmarks import database

    registry, raw = database.hot_reads_world(
        args.database, redis_db=args.redis_db, tools=args.tools
    )
    names = [tool["name"] for tool in registry["tools"]]
    if args.against:
        compare(args, raw, names)
    else:
        alone(args, raw, names)


def alone(args: argparse.Namespace, raw: str, names: list[str]) -> None:
    """Every read of this checkout in turn, beside nginx sending the same body."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        gunicorn(ROOT, dict(os.environ), args, raw, names[0]) as (server, base),
    ):
        auth = {"Authorization": f"Bearer {raw}"}
        _, _, body = get(f"{base}/api/v1/tools/{names[0]}/", auth)
        # nginx: the very same bytes, as a static file.
        folder = Path(tmp) / "nginx"
        folder.mkdir()
        # nginx's workers drop to an unprivileged user when started as root: let them read.
        for readable in (Path(tmp), folder):
            readable.chmod(0o755)
        (folder / "contract.json").write_bytes(body)
        nginx_port = free_port()
        (folder / "nginx.conf").write_text(NGINX_CONF.format(folder=folder, port=nginx_port))
        nginx = subprocess.Popen(
            [NGINX, "-c", str(folder / "nginx.conf"), "-p", str(folder),
             "-e", str(folder / "error.log"), "-g", "daemon off;"],
        )  # fmt: skip
        try:
            static = f"http://127.0.0.1:{nginx_port}/contract.json"
            wait_until_up(static)
            assert urllib.request.urlopen(static).read() == body

            tags = {
                path: get(f"{base}{path}", auth)[1]["ETag"]
                for path in ("/api/v1/revision/", f"/api/v1/tools/{names[0]}/",
                             "/api/v1/export/openai/")
            }  # fmt: skip
            bearer = f"Authorization: Bearer {raw}"
            common = {"seconds": args.seconds, "connections": args.connections}
            measured = {**common, "server": server.pid}
            wrk(f"{base}/api/v1/revision/", headers=[bearer], seconds=2, connections=8)  # warm
            runs = [
                ("nginx, the same body as a static file", wrk(static, headers=[], **common)),
                ("GET revision/", wrk(f"{base}/api/v1/revision/", headers=[bearer], **measured)),
                (
                    f"GET tools/{{name}}/, rotating over all {len(names):,} tools",
                    wrk(
                        base,
                        headers=[bearer],
                        script=rotation(Path(tmp) / "rotate.lua", names),
                        **measured,
                    ),
                ),
                (
                    "GET tools/ (first page)",
                    wrk(f"{base}/api/v1/tools/", headers=[bearer], **measured),
                ),
                (
                    "GET export/openai/",
                    wrk(f"{base}/api/v1/export/openai/", headers=[bearer], **measured),
                ),
            ]
            for path, tag in tags.items():
                label = path.replace("/api/v1/", "").replace(names[0], "{name}")
                runs.append(
                    (
                        f"GET {label} with If-None-Match (304)",
                        wrk(f"{base}{path}", headers=[bearer, f"If-None-Match: {tag}"], **measured),
                    )
                )
        finally:
            nginx.terminate()
            nginx.wait(10)

    print()
    print(setting(args))
    reference = runs[0][1]["rps"]
    print("| read | requests/s | p50 | p99 | errors | vs nginx | gunicorn CPU per request |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, figures in runs:
        ratio = "1" if figures is runs[0][1] else f"1/{reference / figures['rps']:.0f}"
        cpu = f"{figures['cpu_us']:.0f} µs" if "cpu_us" in figures else ""
        print(
            f"| {label} | {figures['rps']:,.0f} | {figures['p50_ms']:.2f} ms | "
            f"{figures['p99_ms']:.2f} ms | {figures['errors']} | {ratio} | {cpu} |"
        )
    slower = min(runs[1][1]["rps"], runs[2][1]["rps"])
    worst_p99 = max(runs[1][1]["p99_ms"], runs[2][1]["p99_ms"])
    print(
        f"\nslower of revision/ and tools/{{name}}/: 1/{reference / slower:.0f} of nginx "
        f"(target 1/40 or better), p99 {worst_p99:.1f} ms (target 25 ms or less)"
    )


def compare(args: argparse.Namespace, raw: str, names: list[str]) -> None:
    """The two hot reads of this checkout and of ``args.against``, both served at once (an idle
    server costs nothing), wrk alternating between them round after round, so that whatever else
    the machine does falls on both alike. The other checkout is set up by this checkout's
    ``benchmarks/database.py`` run with the other's code, on its own database and Redis
    databases, and served by the same virtualenv."""
    other = args.against.resolve()
    setup = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "database.py"), f"{args.database}_against",
         str(args.redis_db + 2), str(args.tools)],
        cwd=other, env={**os.environ, "PYTHONPATH": str(other)}, capture_output=True, text=True,
    )  # fmt: skip
    if setup.returncode:
        sys.exit(f"setting up {other} failed:\n{setup.stderr}")
    world = json.loads(setup.stdout.splitlines()[-1])
    reads = ("GET revision/", f"GET tools/{{name}}/, rotating over all {len(names):,} tools")
    figures: dict[tuple[str, str], list[dict]] = {
        (side, read): [] for side in ("here", "there") for read in reads
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        gunicorn(ROOT, dict(os.environ), args, raw, names[0]) as here,
        gunicorn(
            other, {**os.environ, **world["environ"]}, args, world["token"], world["names"][0]
        ) as there,
    ):
        sides = {
            "here": (
                *here,
                f"Authorization: Bearer {raw}",
                rotation(Path(tmp) / "here.lua", names),
            ),
            "there": (
                *there,
                f"Authorization: Bearer {world['token']}",
                rotation(Path(tmp) / "there.lua", world["names"]),
            ),
        }
        for _server, base, bearer, _script in sides.values():
            wrk(f"{base}/api/v1/revision/", headers=[bearer], seconds=2, connections=8)  # warm
        common = {"seconds": args.seconds, "connections": args.connections}
        for round_ in range(args.rounds):
            order = ("here", "there") if round_ % 2 == 0 else ("there", "here")
            for read in reads:
                for side in order:
                    server, base, bearer, script = sides[side]
                    if read == reads[0]:
                        url, extra = f"{base}/api/v1/revision/", {}
                    else:
                        url, extra = base, {"script": script}
                    figures[(side, read)].append(
                        wrk(url, headers=[bearer], server=server.pid, **common, **extra)
                    )

    print()
    print(setting(args))
    print(f"here: {ROOT} ({revision_of(ROOT)}); there: {other} ({revision_of(other)})")
    print(f"{args.rounds} rounds, each read alternating between the two (here first in odd rounds)")
    print("| read | here | there | change |")
    print("|---|---:|---:|---:|")
    for read in reads:
        for figure, label, unit in (
            ("rps", "requests/s", ""),
            ("cpu_us", "gunicorn CPU per request", " µs"),
        ):
            mine = statistics.median(run[figure] for run in figures[("here", read)])
            theirs = statistics.median(run[figure] for run in figures[("there", read)])
            change = f"{mine / theirs - 1:+.1%}"
            print(
                f"| {read}, {label} (median) | {mine:,.0f}{unit} | {theirs:,.0f}{unit} | {change} |"
            )
    print("\nEach round, here against there:")
    for read in reads:
        for figure, unit in (("rps", "/s"), ("cpu_us", " µs")):
            pairs = zip(figures[("here", read)], figures[("there", read)], strict=True)
            rounds = "; ".join(
                f"{mine[figure]:,.0f} / {theirs[figure]:,.0f}" for mine, theirs in pairs
            )
            print(f"- {read} ({unit.strip()}): {rounds}")
    errors = sum(run["errors"] for runs in figures.values() for run in runs)
    print(f"\nerrors: {errors}")


def setting(args: argparse.Namespace) -> str:
    return (
        f"gunicorn 2 {args.worker_class} workers"
        + (f" x {args.threads} threads" if args.worker_class == "gthread" else "")
        + f", production settings, PostgreSQL + Redis, {args.tools:,} approved tools; "
        f"wrk -t2 -c{args.connections} -d{args.seconds}s"
    )


def revision_of(root: Path) -> str:
    def git(*command: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *command], capture_output=True, text=True
        ).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (
        " with changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    )


if __name__ == "__main__":
    main()
