"""Work per call as the registry grows: one trace's ingest, one tool's refresh, a sweep.

    .venv/bin/python benchmarks/scale.py [--sizes 1000,10000,100000] [--repeats 5] [--sweep 50]

On its own PostgreSQL database (``--database``, recreated) on DATABASE_URL's server, with
Redis databases ``--redis-db`` (broker) and the next (cache), both flushed. The registry grows
in one run, 1k, then 10k, then 100k approved tools of the scaled world (``demo.scaled_world``),
with their state variables: loaded with ``bulk_create`` (and one ``UPDATE`` for the tools'
current versions, one revision bump), not through the import, which would take an hour at
100k. At each size, in this process:

- ``ingest``: ``traces_ingest`` of one new trace for an application that sees every tool
  (store only; the median of ``--repeats``), then ``fold``: ``traces_fold`` of it;
- ``refresh``: ``tool_refresh`` of one high-risk tool with 40 traces since its version that
  add an argument it does not declare (so drift is judged, its baseline risk suggested and a
  ticket opened or updated): ``cold`` is the first refresh after the registry grew (this
  process reads and indexes every label it has not read before), ``warm`` the median of the
  next ``--repeats``, each after one more trace is folded, and ``after a publication`` the
  first refresh after the revision moved once more (what an approval does: which contracts are
  approved is read again, and only what changed since);
- ``sweep``: ``tool_refresh`` of ``--sweep`` dirty tools one by one, as the periodic sweep's
  tasks do, per tool.

Each figure is printed with its ratio against the 1k figure of the same run; the queries of
one ingest and one warm refresh are counted too (``queries``), which the machine's load does not
move.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = "high"  # the refreshed tool's level: drift opens a ticket, never publishes alone


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep", type=int, default=50)
    parser.add_argument("--database", default="registry_bench_scale")
    parser.add_argument("--redis-db", type=int, default=8)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    from benchmarks import database

    for db in (args.redis_db, args.redis_db + 1):
        subprocess.run(["redis-cli", "-n", str(db), "flushdb"], check=True, capture_output=True)
    database.django_on_fresh_database(
        args.database,
        REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
        CACHE_REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db + 1}",
    )
    from demo import scaled_world
    from registry.models import Application

    world = scaled_world.registry(max(sizes))
    application = Application.objects.create(name="bench", all_tools=True, all_permissions=True)
    loaded = 0
    figures: dict[int, dict[str, float]] = {}
    for size in sizes:
        started = time.perf_counter()
        _load(world, loaded, size)
        loaded = size
        print(f"{size:>7} tools loaded in {time.perf_counter() - started:.1f} s", flush=True)
        figures[size] = _measure(world, size, application, args.repeats, args.sweep)
        print(f"{size:>7} " + "  ".join(f"{k} {_shown(k, v)}" for k, v in figures[size].items()))
    _report(figures)


def _load(world: dict[str, Any], start: int, end: int) -> None:
    from django.db import connection, transaction

    from registry.models import ContractVersion, Permission, RiskLevel, StateVariable, Tool
    from registry.revision import revision_bump
    from registry.validation import export_name

    tools = world["tools"][start:end]
    wanted = {f"var_{index}" for index in range(end + 50)}
    for document in tools:
        wanted.update(document["requires"], document["produces"])
    with transaction.atomic():
        have = set(StateVariable.objects.values_list("name", flat=True))
        StateVariable.objects.bulk_create(
            [StateVariable(name=name) for name in sorted(wanted - have)], batch_size=5000
        )
        for name in ("read", "write"):
            Permission.objects.get_or_create(name=name)
        risks = {risk.name: risk for risk in RiskLevel.objects.all()}
        created = Tool.objects.bulk_create(
            [Tool(name=doc["name"], export_name=export_name(doc["name"])) for doc in tools],
            batch_size=5000,
        )
        approved_at = datetime.now(UTC) - timedelta(days=1)
        versions = []
        for tool, doc in zip(created, tools, strict=True):
            version = ContractVersion(
                tool=tool, number=1, description=doc["description"],
                input_schema=doc["input_schema"], requires=doc["requires"],
                produces=doc["produces"], risk=risks[doc["risk"]], cost=doc["cost"],
                permissions=doc["permissions"], status=ContractVersion.Status.APPROVED,
                source=ContractVersion.Source.IMPORT, approved_at=approved_at,
            )  # fmt: skip
            version.content_hash = version.compute_hash()
            versions.append(version)
        ContractVersion.objects.bulk_create(versions, batch_size=5000)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE registry_tool AS t SET current_version_id = v.id "
                "FROM registry_contractversion AS v "
                "WHERE v.tool_id = t.id AND t.current_version_id IS NULL AND v.status = 'approved'"
            )
        revision_bump()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _trace(tool: dict[str, Any], run: str, *, extra: bool = False) -> dict[str, Any]:
    state = {name: f"{name}-value-{run}" for name in tool["requires"]}
    args: dict[str, Any] = {name: state[name] for name in tool["requires"]}
    if extra:
        args["dry_run"] = False  # an argument the contract does not declare: drift
    return {
        "trace_id": run, "step": 0, "tool": tool["name"], "args": args, "status": "success",
        "state_before": state, "state_after": {**state, tool["produces"][0]: f"out-{run}"},
        "output": {"ok": True}, "error": None, "duration_ms": 80,
        "occurred_at": datetime.now(UTC).isoformat(),
    }  # fmt: skip


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _queries(call: Callable[[], Any]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        call()
    return len(queries)


def _measure(
    world: dict[str, Any], size: int, application: Any, repeats: int, sweep: int
) -> dict[str, float]:
    from django.db import transaction

    from learning.fold import traces_fold
    from learning.ingest import traces_ingest
    from learning.services import tool_refresh
    from registry.revision import revision_bump

    tools = world["tools"][:size]
    # One tool of each kind per size, so each size's refresh starts from a tool never refreshed.
    target = next(t for t in reversed(tools) if t["risk"] == TARGET)

    def ingest(tool: dict[str, Any], run: str, *, extra: bool = False) -> None:
        result = traces_ingest(items=[(0, _trace(tool, run, extra=extra))], application=application)
        assert result.accepted == 1, result

    ingests, folds = [], []
    for repeat in range(repeats):
        ingests.append(_timed(partial(ingest, tools[repeat], f"{size}-one-{repeat}")))
        folds.append(_timed(traces_fold))
    for number in range(40):
        ingest(target, f"{size}-target-{number}", extra=True)
    traces_fold()
    cold = _timed(lambda: tool_refresh(tool_name=target["name"]))
    refresh = partial(tool_refresh, tool_name=target["name"])
    warm = []
    for repeat in range(repeats):
        ingest(target, f"{size}-more-{repeat}", extra=True)
        traces_fold()
        warm.append(_timed(refresh))
    ingest(target, f"{size}-counted", extra=True)
    traces_fold()
    refresh_queries = _queries(refresh)
    ingest_queries = _queries(partial(ingest, tools[0], f"{size}-counted-one"))
    traces_fold()
    with transaction.atomic():
        revision_bump()
    published = _timed(refresh)
    figures = {
        "ingest": statistics.median(ingests),
        "fold": statistics.median(folds),
        "refresh cold": cold,
        "refresh warm": statistics.median(warm),
        "refresh after a publication": published,
        "ingest, queries": ingest_queries,
        "refresh warm, queries": refresh_queries,
    }
    if sweep:
        dirty = tools[size // 2 : size // 2 + sweep]
        for tool in dirty:
            for number in range(3):
                ingest(tool, f"{size}-sweep-{tool['name']}-{number}")
        traces_fold()
        total = sum(_timed(partial(tool_refresh, tool_name=tool["name"])) for tool in dirty)
        figures["sweep, per tool"] = total / len(dirty)
    return figures


def _shown(what: str, value: float) -> str:
    return f"{value:.0f}" if what.endswith("queries") else f"{value * 1000:,.1f} ms"


def _report(figures: dict[int, dict[str, float]]) -> None:
    sizes = sorted(figures)
    reference = figures[sizes[0]]
    print()
    print("| what | " + " | ".join(f"{size:,} tools" for size in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for what in reference:
        cells = []
        for size in sizes:
            value = figures[size].get(what)
            if value is None:
                cells.append("")
                continue
            ratio = value / reference[what]
            cells.append(f"{_shown(what, value)} ({ratio:.2f}×)")
        print(f"| {what} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
