"""Render time of the reviewer's pages on a crowded registry, on PostgreSQL.

    .venv/bin/python benchmarks/admin_pages.py [--tickets 10000] [--traces 1000000] [--tools 200]
    .venv/bin/python benchmarks/admin_pages.py --quick      # 1,000 tickets, 20,000 traces

Uses its own database (``registry_bench_admin``, recreated) on the PostgreSQL of DATABASE_URL's
host. Traces go in through ``import_traces`` (the ingest path, which also folds the per-day
statistics), then a refresh infers contracts and opens drift reports; tickets are written in
bulk; every tool gets 90 days of history. Each page is rendered through Django's test client
as a logged-in reviewer (the whole request: middleware, queries, template); the figures are the
median and the slowest of the repeats, with the number of queries.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tickets", type=int, default=10_000)
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1,000 tickets, 20,000 traces")
    args = parser.parse_args()
    if args.quick:
        args.tickets, args.traces, args.tools = 1_000, 20_000, 50

    from benchmarks import database
    from demo import scaled_world as world

    database.django_on_fresh_database("registry_bench_admin", ALLOWED_HOSTS="testserver")
    from django.core.management import call_command

    registry = world.registry(args.tools)
    with tempfile.TemporaryDirectory() as tmp:
        registry_path = database.import_approved(registry, tmp)
        traces_path = Path(tmp) / "traces.jsonl"
        subprocess.run(
            [sys.executable, "-m", "demo.scaled_world", str(registry_path), str(traces_path),
             str(args.traces), "2", "run"],
            cwd=ROOT, check=True,
        )  # fmt: skip
        started = time.perf_counter()
        call_command("import_traces", str(traces_path), "--no-progress")
        print(f"setup: {args.traces:,} traces imported in {time.perf_counter() - started:.1f} s")
    call_command("refresh_contracts", "--no-progress")
    tool = _crowd(args.tickets)
    pages = _pages(tool)

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(_reviewer())
    print(f"\n{args.tickets:,} tickets, {args.traces:,} traces, {args.tools} tools (PostgreSQL)")
    print(f"{'page':<34} {'median ms':>10} {'max ms':>8} {'queries':>8}")
    for name, url in pages:
        client.get(url)  # warm: templates compiled, connection open
        timings = []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        print(
            f"{name:<34} {statistics.median(timings):>10.1f} {max(timings):>8.1f} "
            f"{len(queries.captured_queries):>8}"
        )


def _reviewer():
    from django.contrib.auth.models import Group, User

    user, _ = User.objects.get_or_create(username="bench-reviewer", defaults={"is_staff": True})
    user.groups.add(Group.objects.get(name="Reviewers"))
    return user


def _crowd(tickets: int):
    """``tickets`` open and decided tickets over the tools, and 90 days of history for each."""
    from django.db.models import Max
    from django.utils import timezone

    from learning.models import ToolDayStats, ToolStats
    from registry.models import ContractVersion, RiskLevel, Tool
    from reviews.models import Approval, ReviewTicket

    tools = list(
        Tool.objects.select_related("current_version")
        .annotate(last=Max("versions__number"))
        .order_by("name")
    )
    risks = list(RiskLevel.objects.order_by("rank"))
    numbers = {tool.pk: tool.last for tool in tools}
    versions = []
    for n in range(tickets):
        tool = tools[n % len(tools)]
        numbers[tool.pk] += 1
        versions.append(
            ContractVersion(
                tool=tool, number=numbers[tool.pk], description=f"variant {n}",
                input_schema={"type": "object"}, risk=risks[n % len(risks)], status="proposed",
                based_on=tool.current_version, content_hash=f"{n:064}",
            )
        )  # fmt: skip
    versions = ContractVersion.objects.bulk_create(versions, batch_size=2000)
    rows = ReviewTicket.objects.bulk_create(
        [
            ReviewTicket(
                tool_id=version.tool_id,
                base_id=version.based_on_id,
                proposed=version,
                kind=("new_tool", "change", "drift")[n % 3],
                status="open" if n % 5 else "rejected",
                needs_rebase=n % 7 == 0,
                approvals_required=2 if version.risk.name == "high" else 1,
                evidence={
                    "drift": [
                        {
                            "field": "produces",
                            "added": ["var_1"],
                            "counts": {"var_1": 9},
                            "total": 10,
                            "example_trace_ids": ["run-1", "run-2"],
                        }
                    ]
                },
            )
            for n, version in enumerate(versions)
        ],  # fmt: skip
        batch_size=2000,
    )
    user = _reviewer()
    Approval.objects.bulk_create(
        [Approval(ticket=ticket, reviewer=user) for ticket in rows[1::9] if ticket.status == "open"]
    )
    today = timezone.now().date()
    ToolDayStats.objects.bulk_create(
        [
            ToolDayStats(
                tool_name=tool.name,
                tool=tool,
                day=today - timedelta(days=d),
                calls=500,
                errors=d % 7,
                durations={"28": 300, "32": 150, "36": 50},
            )
            for tool in tools
            for d in range(1, 90)
        ],  # fmt: skip
        batch_size=5000,
        ignore_conflicts=True,
    )
    busiest = ToolStats.objects.filter(tool__isnull=False).order_by("-traces_total").first()
    return busiest.tool if busiest else tools[0]


def _pages(tool) -> list[tuple[str, str]]:
    from reviews.models import ReviewTicket

    ticket = ReviewTicket.objects.filter(status="open", kind="drift").order_by("-pk").first()
    return [
        ("home (reviewer's desk)", "/admin/"),
        ("ticket page", f"/admin/reviews/reviewticket/{ticket.pk}/change/"),
        ("tool page (health)", f"/admin/registry/tool/{tool.pk}/health/"),
        ("ticket list, awaiting my approval", "/admin/reviews/reviewticket/?awaiting=mine"),
        ("trace list, one tool", f"/admin/learning/trace/?tool_name={tool.name}"),
        ("tool statistics list", "/admin/learning/toolstats/"),
    ]


if __name__ == "__main__":
    main()
