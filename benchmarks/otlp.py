"""The same calls through both doors: native traces, and OpenTelemetry GenAI spans over OTLP.

1. Inference (pure, no database): the Contract2Tool chains, the synthetic world of the tests
   and the demo's agent runs are replayed as GenAI spans (``learning.otel_replay``: an
   ``invoke_agent`` root with ``registry.state``, one ``execute_tool`` span per call with its
   arguments and result), encoded as OTLP protobuf, decoded and assembled by the receiver's own
   code (``learning.otel``), then folded and inferred exactly as native traces are. It prints
   requires/produces F1 against each world's gold contracts, and how many tools' inferred
   requires and produces are identical to the native traces' (all of them, expected).
2. Ingest speed (PostgreSQL, ``--speed``): the demo's calls, posted through the API in batches
   of 512, as native traces (``POST traces/``) and as OTLP protobuf spans (``POST
   otlp/v1/traces``, then the assembly task), in one run on a fresh database.

3. Costs (PostgreSQL, ``--costs``): what one hostile but valid runtime can make the registry
   store and hold. (a) The amplification request: a root span with a 60 KB ``registry.state``
   and 999 small tool spans; prints bytes sent against bytes stored (the traces' rows, and the
   table's growth). (b) Assembly memory: traces of 100 spans with 59 KB arguments each are
   buffered, then assembled; prints the buffered bytes and the peak Python memory of the
   assembly (tracemalloc) for several ``OTLP_ASSEMBLE_BYTES`` chunks, the largest taking
   everything at once as assembly did before it was chunked.

    .venv/bin/python -m benchmarks.otlp [--speed] [--runs 4000] [--quick]
    .venv/bin/python -m benchmarks.otlp --costs [--quick]

The speed and cost parts use their own database (``registry_bench_otlp``, recreated) on the
PostgreSQL of DATABASE_URL's host, like ``benchmarks/ingest.py``.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.contract2tool import DATA_DIR, set_f1  # noqa: E402
from learning.aggregates import aggregate_add, new_aggregate  # noqa: E402
from learning.dataflow import trace_reconstruct  # noqa: E402
from learning.inference import infer_contract  # noqa: E402
from learning.otel import request_from_protobuf, spans_decode, trace_assemble  # noqa: E402
from learning.otel_replay import export_request, spans_from_traces  # noqa: E402
from learning.traces import trace_parse  # noqa: E402

BATCH = 512
DEMO_REGISTRY = ROOT / "demo" / "registry.json"


# ------------------------------------------------------------------------- the three worlds
def contract2tool_world(data_dir: Path = DATA_DIR) -> tuple[list[dict], dict, dict, dict]:
    """(traces, gold contracts, vocabulary, schemas): the gold chains executed as in
    ``benchmarks.contract2tool.gold_traces``."""
    tools = json.loads((data_dir / "tool_registry_100.json").read_text())
    tasks = json.loads((data_dir / "tasks_102.json").read_text())
    registry = {tool["name"]: tool for tool in tools}
    traces = []
    for task in tasks:
        state = dict(task["initial_state"])
        for step, name in enumerate(task["gold_tool_chain"]):
            tool = registry[name]
            args = {key: state[key] for key in tool["input_schema"]["properties"] if key in state}
            output = task["mock_outputs"][name]
            after = {**state, **output}
            traces.append(
                {"trace_id": task["task_id"], "step": step, "tool": name, "status": "success",
                 "args": args, "state_before": dict(state), "state_after": after,
                 "output": output, "duration_ms": 100 * tool.get("cost", 1)}
            )  # fmt: skip
            state = after
    names = {n for tool in tools for n in (*tool["requires"], *tool["produces"])}
    names |= {key for task in tasks for key in task["initial_state"]}
    gold = {
        name: {"requires": t["requires"], "produces": t["produces"]} for name, t in registry.items()
    }
    schemas = {name: tool["input_schema"] for name, tool in registry.items()}
    return traces, gold, {name: name for name in names}, schemas


def synthetic_world() -> tuple[list[dict], dict, dict, dict]:
    from demo import synthetic_world as world

    traces = list(world.generate())
    vocabulary = {name: name for t in traces for s in (t["state_before"], t["state_after"])
                  for name in s}  # fmt: skip
    vocabulary |= world.ALIASES
    gold = world.gold_contracts()
    gold[world.DRIFTED] = None  # drifts half-way: no single gold contract
    return traces, gold, vocabulary, {}


def demo_world(runs: int = 2100) -> tuple[list[dict], dict, dict, dict]:
    from demo.traces import DRIFTED_TOOL, demo_traces

    registry = json.loads(DEMO_REGISTRY.read_text())
    start = datetime.now(UTC) - timedelta(hours=1)
    traces = list(demo_traces(registry, runs=runs, start=start))
    vocabulary = {}
    for variable in registry["state_variables"]:
        vocabulary[variable["name"]] = variable["name"]
        for alias in variable.get("aliases", []):
            vocabulary[alias] = variable["name"]
    gold = {tool["name"]: {"requires": tool["requires"], "produces": tool["produces"]}
            for tool in registry["tools"]}  # fmt: skip
    gold[DRIFTED_TOOL] = None
    schemas = {tool["name"]: tool["input_schema"] for tool in registry["tools"]}
    return traces, gold, vocabulary, schemas


# ------------------------------------------------------------------------------ inference
def aggregates_of(traces: Iterable[dict], vocabulary: dict) -> dict[str, dict]:
    """Fold the traces as ingest does: each run's data flow found in its steps' values."""
    runs: dict[str, list[dict]] = {}
    for item in traces:
        trace, errors = trace_parse(item, aliases=vocabulary)
        assert trace is not None, errors
        runs.setdefault(trace["trace_id"], []).append(trace)
    result: dict[str, dict] = {}
    for steps in runs.values():
        steps.sort(key=lambda step: step["step"])
        for trace, flow in zip(
            steps, trace_reconstruct(steps, aliases=vocabulary).steps, strict=True
        ):
            aggregate_add(
                result.setdefault(trace["tool"], new_aggregate()), {**trace, "dataflow": flow}
            )
    return result


def through_spans(traces: list[dict], vocabulary: dict) -> tuple[list[dict], int]:
    """The traces as spans, through OTLP protobuf and the receiver's decoding and assembly.

    Returns the assembled traces and the number of spans.
    """
    spans = spans_from_traces(traces, aliases=vocabulary)
    records = []
    for start in range(0, len(spans), BATCH):
        body = export_request(spans[start : start + BATCH]).SerializeToString()
        batch = spans_decode(request_from_protobuf(body), max_spans=BATCH)
        assert batch.rejected == 0, batch.message()
        records += batch.spans
    by_trace: dict[str, list] = {}
    for record in records:
        by_trace.setdefault(record["trace_id"], []).append(record)
    assembled = []
    for trace_id, group in by_trace.items():
        assembled += trace_assemble(trace_id=trace_id, spans=group, aliases=vocabulary).traces
    return assembled, len(spans)


def infer_all(aggregates: dict[str, dict], schemas: dict) -> dict[str, dict]:
    return {
        name: infer_contract(
            name=name, description="", input_schema=schemas.get(name), aggregate=aggregate
        )
        for name, aggregate in aggregates.items()
    }


def compare(world: str, traces: list[dict], gold: dict, vocabulary: dict, schemas: dict) -> dict:
    native = infer_all(aggregates_of(traces, vocabulary), schemas)
    assembled, spans = through_spans(traces, vocabulary)
    otel = infer_all(aggregates_of(assembled, vocabulary), schemas)
    scored = [name for name in native if gold.get(name)]

    def mean_f1(inferred: dict, key: str) -> float:
        return sum(set_f1(gold[n][key], inferred[n][key]) for n in scored) / len(scored)

    identical = [
        name
        for name in native
        if name in otel
        and native[name]["requires"] == otel[name]["requires"]
        and native[name]["produces"] == otel[name]["produces"]
    ]
    return {
        "world": world, "calls": len(traces), "spans": spans,
        "tools": len(native), "scored": len(scored), "identical": len(identical),
        "native": (mean_f1(native, "requires"), mean_f1(native, "produces")),
        "otel": (mean_f1(otel, "requires"), mean_f1(otel, "produces")),
        "different": sorted(set(native) - set(identical)),
    }  # fmt: skip


def inference_figures(*, demo_runs: int = 2100) -> list[dict]:
    return [
        compare("Contract2Tool chains", *contract2tool_world()),
        compare("synthetic world", *synthetic_world()),
        compare("demo runs", *demo_world(demo_runs)),
    ]


def print_inference(rows: list[dict]) -> None:
    print("Native traces vs the same calls as OpenTelemetry GenAI spans (OTLP protobuf)")
    print(
        f"{'':22}{'calls':>7}{'spans':>7}{'tools':>6}  {'requires F1':>17}  {'produces F1':>17}"
        f"  {'identical':>9}"
    )
    print(f"{'':22}{'':>7}{'':>7}{'':>6}  {'native':>8} {'spans':>8}  {'native':>8} {'spans':>8}")
    for row in rows:
        (nr, np_), (orq, op) = row["native"], row["otel"]
        print(
            f"{row['world']:22}{row['calls']:>7}{row['spans']:>7}{row['tools']:>6}  "
            f"{nr:>8.3f} {orq:>8.3f}  {np_:>8.3f} {op:>8.3f}  "
            f"{row['identical']:>4}/{row['tools']:<4}"
        )
        if row["different"]:
            print(f"  differs: {', '.join(row['different'])}")
    print("F1 over the tools with a gold contract (drifting tools left out); identical: tools")
    print("whose inferred requires and produces are the same from both doors.")


# ---------------------------------------------------------------------------------- speed
def speed(runs: int) -> None:
    from benchmarks import database

    database.django_on_fresh_database(
        "registry_bench_otlp", API_THROTTLE_RATE="1000000/min", ALLOWED_HOSTS="testserver"
    )
    from django.test import Client
    from django.utils import timezone

    from api.services import runtime_token_create
    from learning.otel_ingest import otel_traces_assemble
    from reviews.services import registry_import

    registry = json.loads(DEMO_REGISTRY.read_text())
    registry_import(data=registry, approve=True)
    from demo.traces import demo_traces

    calls = list(demo_traces(registry, runs=runs, start=datetime.now(UTC) - timedelta(hours=1)))
    scopes = ["traces:write"]
    _, native_token = runtime_token_create(application_name="native", scopes=scopes)
    _, otel_token = runtime_token_create(application_name="otel", scopes=scopes)
    client = Client()

    bodies = [json.dumps(calls[i : i + BATCH]) for i in range(0, len(calls), BATCH)]
    started = time.perf_counter()
    for body in bodies:
        response = client.post(
            "/api/v1/traces/", body, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {native_token}",
        )  # fmt: skip
        assert response.status_code == 200 and response.json()["rejected"] == 0
    native_seconds = time.perf_counter() - started

    spans = spans_from_traces(calls)
    requests = [
        export_request(spans[i : i + BATCH]).SerializeToString()
        for i in range(0, len(spans), BATCH)
    ]
    started = time.perf_counter()
    for body in requests:
        response = client.post(
            "/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {otel_token}",
        )  # fmt: skip
        assert response.status_code == 200 and response.content == b"", response.content
    receive_seconds = time.perf_counter() - started
    started = time.perf_counter()
    assembled = otel_traces_assemble(now=timezone.now() + timedelta(minutes=5))
    assemble_seconds = time.perf_counter() - started
    otel_seconds = receive_seconds + assemble_seconds

    from learning.models import Trace

    stored = Trace.objects.filter(application__name="otel").count()
    assert stored == len(calls), (stored, len(calls))
    n_calls, n_spans = len(calls), len(spans)
    rows = [
        ("native POST traces/", native_seconds, f"{n_calls / native_seconds:>9,.0f} calls/s"),
        ("OTLP protobuf, receive", receive_seconds, f"{n_spans / receive_seconds:>9,.0f} spans/s"),
        ("OTLP assembly + ingest", assemble_seconds, ""),
        (
            "OTLP total",
            otel_seconds,
            f"{n_spans / otel_seconds:>9,.0f} spans/s {n_calls / otel_seconds:>9,.0f} calls/s",
        ),
    ]
    print()
    print(f"Ingest through the API: {n_calls:,} calls of {assembled:,} agent runs ({n_spans:,}")
    print(f"spans: one per call, one root per run), batches of {BATCH}, PostgreSQL")
    for label, seconds, rate in rows:
        print(f"{label:26}{seconds:7.2f} s  {rate}")


# ---------------------------------------------------------------------------------- costs
def costs(*, traces: int) -> None:
    import tracemalloc
    from unittest import mock

    from benchmarks import database

    database.django_on_fresh_database(
        "registry_bench_otlp", API_THROTTLE_RATE="1000000/min", ALLOWED_HOSTS="testserver"
    )
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from api.services import runtime_token_create
    from learning.models import OtelTrace, Trace
    from learning.otel_ingest import otel_traces_assemble
    from reviews.services import registry_import
    from tests.otel_spans import agent, body, tool_call

    registry_import(data=json.loads(DEMO_REGISTRY.read_text()), approve=True)
    _, token = runtime_token_create(application_name="costs", scopes=["traces:write"])
    client = Client()

    def post(payload: bytes) -> None:
        response = client.post(
            "/api/v1/otlp/v1/traces", payload, content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
        assert response.status_code == 200, response.content

    def table_bytes() -> int:
        with connection.cursor() as cursor:
            # Summed over the partitions: a partitioned table's own size is zero.
            cursor.execute(
                "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) "
                "FROM pg_partition_tree('learning_trace')"
            )
            return int(cursor.fetchone()[0])

    def later() -> datetime:
        return timezone.now() + timedelta(minutes=5)

    # (a) one request: 60 KB of state on the root, 999 small tool calls
    # Values that do not compress, as PostgreSQL would otherwise hide what is stored.
    noise = random.Random(7)
    state = {f"note_{n}": base64.b64encode(noise.randbytes(42)).decode() for n in range(850)}
    calls = [
        tool_call(n, "calendar.find_events", args={"event_query": f"sync {n}", "pad": "p" * 190},
                  result={"eventId": f"evt_{n}"})
        for n in range(1, 1000)
    ]  # fmt: skip
    payload = body(agent(state), *calls)

    def stored(application: str, token: str) -> tuple[int, int, int]:
        before = table_bytes()
        response = client.post(
            "/api/v1/otlp/v1/traces", payload, content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
        assert response.status_code == 200, response.content
        otel_traces_assemble(now=later())
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), sum(pg_column_size(t.*)) FROM learning_trace t "
                "JOIN registry_application a ON a.id = t.application_id WHERE a.name = %s",
                [application],
            )
            steps, rows_bytes = cursor.fetchone()
        return int(steps), int(rows_bytes), table_bytes() - before

    _, whole_token = runtime_token_create(application_name="whole", scopes=["traces:write"])
    results = {"shared once (now)": stored("costs", token)}
    with mock.patch("learning.otel.SHARE_ABOVE", 10**15):  # as every step was stored before
        results["whole in every step"] = stored("whole", whole_token)
    print()
    print("Storage: one OTLP request, a root span with a 60 KB registry.state and 999 tool spans")
    print(f"  sent {len(payload):>12,} bytes")
    for label, (steps, rows_bytes, grown) in results.items():
        print(
            f"  {label:20} {steps} steps, rows {rows_bytes:>12,} bytes "
            f"({rows_bytes / len(payload):6.2f} x sent), table growth with indexes "
            f"{grown:>12,} bytes ({grown / len(payload):6.2f} x sent)"
        )

    # (b) assembly memory: buffered traces of 100 spans with 59 KB arguments
    blob = "a" * 59_000
    settings.OTLP_MAX_PENDING_BYTES = 10**12
    print()
    print(f"Assembly memory: {traces} traces of 100 spans with 59 KB arguments, buffered, then")
    print("assembled (peak Python memory of the assembly, tracemalloc)")
    for budget in (4 * 2**20, settings.OTLP_ASSEMBLE_BYTES, 10**12):
        Trace.objects.all().delete()
        OtelTrace.objects.all().delete()
        for number in range(traces):
            trace = (number + 1).to_bytes(2, "big") * 8
            spans = [
                tool_call(n, "calendar.find_events", args={"blob": blob, "n": n}, trace=trace)
                for n in range(1, 101)
            ]
            for start in range(0, 100, 50):  # requests under the 5 MB body limit
                post(body(*spans[start : start + 50]))
            post(body(agent({"a": 1}, trace=trace)))
        buffered = sum(OtelTrace.objects.values_list("span_bytes", flat=True))
        settings.OTLP_ASSEMBLE_BYTES = budget
        tracemalloc.start()
        started = time.perf_counter()
        assembled = otel_traces_assemble(now=later())
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        label = "everything at once" if budget == 10**12 else f"chunks of {budget / 2**20:.0f} MB"
        print(
            f"  {label:20} buffered {buffered / 2**20:7.1f} MB  peak {peak / 2**20:7.1f} MB  "
            f"{assembled} traces in {seconds:5.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed", action="store_true", help="also time ingest on PostgreSQL")
    parser.add_argument("--runs", type=int, default=4000, help="demo runs for the speed part")
    parser.add_argument("--costs", action="store_true", help="stored bytes, assembly memory")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check it runs")
    args = parser.parse_args()
    if args.costs:  # on its own: it sets Django up on its own database, as --speed does
        costs(traces=3 if args.quick else 12)
        return
    print_inference(inference_figures(demo_runs=300 if args.quick else 2100))
    if args.speed:
        speed(200 if args.quick else args.runs)


if __name__ == "__main__":
    main()
