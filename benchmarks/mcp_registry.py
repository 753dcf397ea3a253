"""The MCP Registry API's list (/v0.1/servers) against the MCP export of the same tools.

    .venv/bin/python benchmarks/mcp_registry.py [--servers 10] [--tools 50] [--rounds 20]

Uses its own database (``registry_bench_mcpreg``, recreated) on the PostgreSQL of DATABASE_URL's
host. ``--servers`` stand-in MCP servers (``sources/tests/standin_server.py`` over stdio) each
declare ``--tools`` generated tools, published on first use for one application. Each round
reads, with the response cache emptied first (so every read renders its body), the first page of
``GET /v0.1/servers`` (``limit=100``: every server) and, as the reference, ``GET
/api/v1/export/mcp/`` (the same tools as one MCP ``tools/list``); the figures are the median
time of each read, their ratio, and the SQL queries of one read of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    from benchmarks import database

    database.django_on_fresh_database(
        "registry_bench_mcpreg",
        MCP_MAX_NEW_TOOLS_PER_SYNC=str(args.tools),
        API_FAST_READS="false",
        ALLOWED_HOSTS="testserver",
    )
    from django.core.cache import cache
    from django.db import connection
    from rest_framework.test import APIClient

    from api.services import runtime_token_create
    from registry.models import Application
    from sources.services import mcp_server_add, mcp_server_sync

    Application.objects.create(name="bench")
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "tools.json"
        spec.write_text(json.dumps({"tools": args.tools}))
        standin = ROOT / "sources/tests/standin_server.py"
        for index in range(args.servers):
            server = mcp_server_add(
                name=f"server-{index:03d}",
                command=[sys.executable, str(standin), str(spec)],
                applications=["bench"],
            )
            report = mcp_server_sync(server=server, approve=True)
            assert len(report.published) == args.tools, report
    _, token = runtime_token_create(application_name="bench", scopes=["contracts:read"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    reads = {
        "GET /v0.1/servers?limit=100": "/v0.1/servers?limit=100",
        "GET /api/v1/export/mcp/ (reference)": "/api/v1/export/mcp/",
    }
    timings: dict[str, list[float]] = {label: [] for label in reads}
    queries: dict[str, int] = {}
    for label, path in reads.items():  # a first read of each warms what every read shares
        cache.clear()
        seen: list[str] = []
        with connection.execute_wrapper(
            lambda run, sql, *rest, seen=seen: seen.append(sql) or run(sql, *rest)
        ):
            response = client.get(path)
        assert response.status_code == 200, response.content[:300]
        queries[label] = len(seen)
    body = client.get("/v0.1/servers?limit=100").json()
    assert len(body["servers"]) == args.servers
    for _ in range(args.rounds):
        for label, path in reads.items():
            cache.clear()
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            timings[label].append(time.perf_counter() - started)
    print(
        f"{args.servers} MCP servers x {args.tools} approved tools, one application "
        f"(PostgreSQL, {args.rounds} rounds, bodies rendered each time)"
    )
    print(f"{'read':<40} {'median ms':>10} {'queries':>8}")
    for label in reads:
        print(f"{label:<40} {statistics.median(timings[label]) * 1000:>10.1f} {queries[label]:>8}")
    servers, export = (statistics.median(timings[label]) for label in reads)
    print(f"ratio /v0.1/servers : export/mcp/ = {servers / export:.2f}")


if __name__ == "__main__":
    main()
