"""Faults on real PostgreSQL, Redis, gunicorn and Celery workers: what holds, with figures.

    .venv/bin/python benchmarks/faults.py [--traces 200000] [--quick]

Scenarios (each prints what was tried and what held; the exit status is 1 if anything failed):
1. ingest under load: 8 clients post traces in batches of 1,000 with duplicates and retries,
   while refreshes run on a Celery worker that is SIGKILLed mid-refresh and restarted, and Redis
   is restarted once; then every accepted trace is stored once and folded once, and the drifted
   demo tool has exactly one drift ticket;
2. broker down: with Redis stopped, reads and trace ingest still answer 200; the refresh
   catches up once Redis is back;
3. database down: with PostgreSQL stopped, requests answer 503 in the error shape within a
   bound, nothing is half-written, and service resumes by itself;
4. concurrent reviewers: many simultaneous approvals and rejections publish each proposal at
   most once and never leave two approved versions of a tool.

Runs on a PostgreSQL cluster and a Redis server of its own, created in a temporary folder on
ports 55432 and 6390 and removed at the end: the machine's own servers are never touched, so it
may run beside anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PORT = 8766
BASE = f"http://127.0.0.1:{PORT}/api/v1"
# The scenarios stop and start PostgreSQL and Redis: servers of their own, on ports of their own,
# so nothing else on the machine (the machine's own servers, another test run) is disturbed.
PG_PORT = 55432
REDIS_PORT = 6390
RESULTS: list[tuple[str, bool, str]] = []


def record(name: str, held: bool, detail: str) -> None:
    RESULTS.append((name, held, detail))
    print(f"  [{'held' if held else 'FAILED'}] {name}: {detail}", flush=True)


class Servers:
    """A private PostgreSQL cluster and Redis server in a temporary folder, for the run only."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.data = self.folder / "pgdata"
        bindir = Path("/usr/lib/postgresql") / sorted(os.listdir("/usr/lib/postgresql"))[-1] / "bin"
        self.pg_ctl, self.initdb = str(bindir / "pg_ctl"), str(bindir / "initdb")
        # PostgreSQL refuses to run as root: as root, its programs run as the postgres user.
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def create(self) -> None:
        self.data.mkdir()
        if self.as_owner:
            shutil.chown(self.folder, "postgres")
            shutil.chown(self.data, "postgres")
        subprocess.run(
            [*self.as_owner, self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
        )
        self.postgres("start")
        self.redis("start")

    def postgres(self, action: str) -> None:
        options = f"-p {PG_PORT} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        command = [*self.as_owner, self.pg_ctl, "-D", str(self.data), "-w", "-m", "fast"]
        running = subprocess.run([*command, "status"], capture_output=True).returncode == 0
        if running == (action == "start"):
            return
        if action == "start":
            command += ["-o", options, "-l", str(self.folder / "postgres.log")]
        subprocess.run([*command, action], check=action == "start", capture_output=True)

    def redis_up(self) -> bool:
        ping = ["redis-cli", "-h", "127.0.0.1", "-p", str(REDIS_PORT), "ping"]
        return subprocess.run(ping, capture_output=True).returncode == 0

    def redis(self, action: str) -> None:
        if action == "stop":
            shutdown = ["redis-cli", "-h", "127.0.0.1", "-p", str(REDIS_PORT), "shutdown", "nosave"]
            subprocess.run(shutdown, capture_output=True)
        elif not self.redis_up():
            subprocess.run(
                ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1",
                 "--port", str(REDIS_PORT), "--save", "", "--appendonly", "no",
                 "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
                check=True,
                capture_output=True,
            )  # fmt: skip
        for _ in range(50):
            if self.redis_up() == (action == "start"):
                return
            time.sleep(0.1)

    def destroy(self) -> None:
        self.redis("stop")
        self.postgres("stop")


def call(method: str, path: str, token: str, body=None, timeout: float = 15.0):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        BASE + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def probe_trace(trace_id: str) -> dict:
    """One small, valid trace posted while a service is down."""
    return {
        "trace_id": trace_id,
        "step": 0,
        "tool": "calendar.find_events",
        "args": {},
        "status": "success",
        "state_before": {},
        "state_after": {},
    }


class Services:
    def __init__(self, servers: Servers, env: dict):
        self.servers = servers
        self.env = env
        self.web = self.worker = None

    def start_web(self) -> None:
        command = f"gunicorn config.wsgi:application --workers 2 --bind 127.0.0.1:{PORT}"
        self.web = subprocess.Popen(
            [sys.executable, "-m", *command.split(), "--log-level", "warning", "--timeout", "60"],
            cwd=ROOT,
            env=self.env,
        )
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{BASE}/health/", timeout=2)
                return
            except OSError:
                time.sleep(0.2)

    def start_worker(self) -> None:
        command = "celery -A config worker --concurrency 2 --loglevel WARNING"
        self.worker = subprocess.Popen(
            [sys.executable, "-m", *command.split(), "--without-gossip", "--without-mingle"],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )

    def keep_worker(self) -> bool:
        """What a process supervisor does (compose: restart: unless-stopped)."""
        if self.worker.poll() is not None:
            self.start_worker()
            return True
        return False

    def kill_worker(self) -> None:
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait()

    def stop(self) -> None:
        for process in (self.web, self.worker):
            if process and process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()


def workload(total: int) -> list[dict]:
    """The demo's traces (with its drifted tool), repeated under new trace ids up to ``total``."""
    from demo.traces import demo_traces

    registry = json.loads((ROOT / "demo/registry.json").read_text())
    base = list(demo_traces(registry))
    traces = []
    round_ = 0
    while len(traces) < total:
        for trace in base:
            traces.append(dict(trace, trace_id=f"{trace['trace_id']}-r{round_}"))
            if len(traces) == total:
                break
        round_ += 1
    return traces


def scenario_ingest(services: Services, token: str, total: int) -> None:
    from django.db.models import Sum

    from learning.models import ToolStats, Trace
    from learning.tasks import refresh_contracts
    from reviews.models import ReviewTicket

    print(f"1. ingest under load: {total:,} traces, 8 clients, worker SIGKILL, Redis restart")
    traces = workload(total)
    batches = [traces[i : i + 980] for i in range(0, len(traces), 980)]  # + 20 repeats = 1,000
    rng = random.Random(5)
    sent: set[tuple[str, int]] = set()
    counts = {"accepted": 0, "duplicates": 0, "rejected": 0, "retries": 0, "errors": 0}
    lock = threading.Lock()
    queue = list(enumerate(batches))
    done = threading.Event()

    def client() -> None:
        while True:
            with lock:
                if not queue:
                    return
                index, batch = queue.pop()
            # Deliberate duplicates inside a batch, and re-posts as if a request had timed out.
            body = batch + rng.sample(batch, 20)
            for attempt in range(6):
                try:
                    status, answer = call("POST", "/traces/", token, body, timeout=30)
                except OSError:
                    status, answer = 0, None
                if status == 200:
                    with lock:
                        for key in ("accepted", "duplicates", "rejected"):
                            counts[key] += answer[key]
                        sent.update((t["trace_id"], t["step"]) for t in batch)
                    if rng.random() < 0.05:  # the answer "got lost": retry the same batch
                        counts["retries"] += 1
                        continue
                    break
                with lock:
                    counts["errors"] += 1
                time.sleep(0.5 * (attempt + 1))

    restarts = 0

    def chaos() -> None:
        nonlocal restarts
        killed = restarted = False
        while not done.is_set():
            restarts += services.keep_worker()
            try:
                refresh_contracts.delay()
            except Exception as error:  # the broker is being restarted
                print(f"   refresh not queued: {error.__class__.__name__}", flush=True)
            progress = 1 - len(queue) / len(batches)
            if not killed and progress > 0.3:
                time.sleep(0.5)  # let the refresh start, then kill the worker under it
                services.kill_worker()
                services.start_worker()
                killed = True
                print("   worker SIGKILLed mid-refresh and restarted", flush=True)
            if not restarted and progress > 0.6:
                services.servers.redis("stop")
                time.sleep(1)
                services.servers.redis("start")
                restarted = True
                print("   Redis restarted", flush=True)
            time.sleep(1)

    started = time.monotonic()
    chaos_thread = threading.Thread(target=chaos)
    chaos_thread.start()
    clients = [threading.Thread(target=client) for _ in range(8)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    done.set()
    chaos_thread.join()
    seconds = time.monotonic() - started
    print(f"   posted in {seconds:.1f} s ({total / seconds:,.0f} traces/s), {counts}")
    print(f"   worker restarted by the supervisor {restarts} time(s) besides the SIGKILL")

    services.keep_worker()
    refresh_contracts.delay()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (
        ToolStats.objects.filter(dirty=True).exists()
        or Trace.objects.filter(aggregated=False).exists()
    ):
        time.sleep(1)
        refresh_contracts.delay()
    stored = set(
        Trace.objects.filter(trace_id__in={k[0] for k in sent}).values_list("trace_id", "step")
    )
    record(
        "every accepted trace stored exactly once",
        stored == sent and Trace.objects.count() == len(sent),
        f"{len(sent):,} distinct sent and answered, {Trace.objects.count():,} stored",
    )
    folded = ToolStats.objects.aggregate(n=Sum("traces_total"))["n"] or 0
    record(
        "every trace folded exactly once",
        folded == Trace.objects.count() and not Trace.objects.filter(aggregated=False).exists(),
        f"aggregates count {folded:,} traces",
    )
    record(
        "the refresh completed",
        not ToolStats.objects.filter(dirty=True).exists(),
        "no tool left with unrefreshed aggregates",
    )
    drift = list(ReviewTicket.objects.filter(kind="drift").values_list("tool__name", flat=True))
    record(
        "one drift ticket, none duplicated or lost",
        drift == ["payments.refund_charge"],
        f"drift tickets: {drift}",
    )


def scenario_broker_down(services: Services, token: str) -> None:
    from learning.models import ToolStats
    from learning.tasks import refresh_contracts

    print("2. broker down")
    services.servers.redis("stop")
    try:
        started = time.monotonic()
        read, _ = call("GET", "/tools/?page_size=5", token)
        trace = probe_trace("broker-down")
        posted, answer = call("POST", "/traces/", token, [trace])
        seconds = time.monotonic() - started
    finally:
        services.servers.redis("start")
    record(
        "reads and ingest without Redis",
        read == 200 and posted == 200 and answer["accepted"] == 1,
        f"GET {read}, POST {posted}, both in {seconds:.2f} s",
    )
    time.sleep(2)
    services.keep_worker()
    refresh_contracts.delay()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and ToolStats.objects.filter(dirty=True).exists():
        time.sleep(1)
    record(
        "the refresh catches up when Redis returns",
        not ToolStats.objects.filter(dirty=True).exists(),
        "no dirty aggregates left",
    )


def scenario_database_down(servers: Servers, token: str) -> None:
    from learning.models import Trace

    print("3. database down")
    before = None
    servers.postgres("stop")
    try:
        latencies, shapes, statuses = [], [], []
        trace = probe_trace("db-down")
        for method, path, body in (
            ("GET", "/tools/?page_size=7", None),
            ("POST", "/traces/", [trace]),
            ("GET", "/health/", None),
        ):
            started = time.monotonic()
            try:
                status, answer = call(method, path, token, body, timeout=30)
            except OSError as error:
                status, answer = 0, {"transport": str(error)}
            latencies.append(time.monotonic() - started)
            statuses.append(f"{method} {path.split('?')[0]} {status}")
            shapes.append(status == 503 and set(answer or {}) == {"error"})
        record(
            "503 in the error shape while PostgreSQL is down",
            all(shapes),
            f"{', '.join(statuses)}; slowest answer {max(latencies):.2f} s",
        )
    finally:
        servers.postgres("start")
    started = time.monotonic()
    while time.monotonic() - started < 60:
        try:
            if urllib.request.urlopen(f"{BASE}/health/", timeout=5).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    recovered = time.monotonic() - started
    from django.db import connection

    connection.close()
    before = Trace.objects.filter(trace_id="db-down").count()
    status, _ = call("GET", "/tools/?page_size=3", token)
    record(
        "service resumes by itself; nothing half-written",
        status == 200 and before == 0,
        f"healthy {recovered:.1f} s after PostgreSQL restarted; db-down traces stored: {before}",
    )


def scenario_reviewers() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from registry.models import ContractVersion, Tool
    from reviews.models import ReviewError, ReviewTicket
    from reviews.services import ProposalSeen, contract_propose, review_approve, review_reject

    print("4. concurrent reviewers")
    users = get_user_model()
    group = Group.objects.get(name="Reviewers")
    proposer = users.objects.create_user("faults-proposer")
    reviewers = []
    for index in range(8):
        user = users.objects.create_user(f"faults-reviewer-{index}")
        user.groups.add(group)
        reviewers.append(user)
    tickets = []
    for tool in Tool.objects.filter(current_version__risk__name="low").order_by("name")[:6]:
        for variant in range(2):  # two competing proposals per tool
            document = tool.current_version.document()
            document["description"] += f" (variant {variant})"
            tickets.append(contract_propose(document=document, author=proposer))

    def decide(ticket, reviewer, approve):
        try:
            if approve:
                return (
                    "published"
                    if review_approve(
                        ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket)
                    )
                    else "approved"
                )
            review_reject(
                ticket=ticket,
                reviewer=reviewer,
                reason="Racing rejection.",
                seen=ProposalSeen.of(ticket),
            )
            return "rejected"
        except ReviewError:
            return "refused"
        finally:
            connection.close()

    rng = random.Random(9)
    jobs = [(ticket, reviewer, rng.random() < 0.8) for ticket in tickets for reviewer in reviewers]
    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(lambda job: decide(*job), jobs))
    published = outcomes.count("published")
    twice = [
        t.pk
        for t in ReviewTicket.objects.filter(pk__in=[t.pk for t in tickets])
        if t.audit_entries.filter(action="published").count() > 1
    ]
    doubles = [
        tool.name
        for tool in Tool.objects.all()
        if ContractVersion.objects.filter(tool=tool, status="approved").count() > 1
    ]
    record(
        "each proposal published at most once, one approved version per tool",
        not twice and not doubles and published <= len(tickets),
        f"{len(jobs)} decisions on {len(tickets)} tickets: {published} published, "
        f"{outcomes.count('rejected')} rejected, {outcomes.count('refused')} refused",
    )


def run(servers: Servers, total: int) -> None:
    from benchmarks import database

    env = {
        "REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0",
        "API_THROTTLE_RATE": "1000000/min",
        "REVISION_LOCAL_SECONDS": "0",
    }
    database.django_on_fresh_database("registry_faults", port=PG_PORT, **env)
    from django.core.management import call_command

    from api.services import runtime_token_create

    call_command("load_demo", "--no-traces", verbosity=0)
    _, token = runtime_token_create(
        application_name="faults", scopes=["contracts:read", "traces:write"]
    )
    services = Services(servers, dict(os.environ))
    services.start_web()
    services.start_worker()
    try:
        scenario_ingest(services, token, total)
        scenario_broker_down(services, token)
        scenario_database_down(servers, token)
        scenario_reviewers()
    finally:
        services.stop()
        servers.postgres("start")
        servers.redis("start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20,000 traces (for CI)")
    args = parser.parse_args()
    total = 20_000 if args.quick else args.traces

    with tempfile.TemporaryDirectory(prefix="registry-faults-") as folder:
        servers = Servers(folder)
        servers.create()
        try:
            run(servers, total)
        finally:
            servers.destroy()
    print("\nsummary")
    for name, held, detail in RESULTS:
        print(f"  {'held  ' if held else 'FAILED'} {name}: {detail}")
    sys.exit(0 if all(held for _, held, _ in RESULTS) else 1)


if __name__ == "__main__":
    main()
