"""The gateway's two ways of forwarding a call to a streamable-HTTP upstream, in one process.

    .venv/bin/python benchmarks/gateway_forwarding.py [--calls 2000] [--rounds 2]

The upstream is the one ``benchmarks/gateway.py`` starts (the SDK's low-level server with one
``echo`` tool, stateless, under uvicorn). This process holds the gateway's pool
(``gateway/upstreams.py``) with that upstream and calls it ``--calls`` times through each path,
one call after another and from 20 concurrent tasks, the paths alternating ``--rounds`` times:
``call_in_session`` (the SDK's client session) and ``call_posted`` (the JSON-RPC call posted on
the upstream's own HTTP clients). Printed per path and load: the CPU time per call of this
process's event loop thread (what forwarding costs the gateway, whatever else runs on the
machine) and calls/s (which the machine's load moves).
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONCURRENCY = (1, 20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from benchmarks.gateway import free_port, wait_listening

    port = free_port()
    upstream = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
            f"from benchmarks.gateway import serve_upstream; serve_upstream({port})",
        ]
    )
    try:
        wait_listening(port)
        figures = forward(f"http://127.0.0.1:{port}/mcp", args.calls, args.rounds)
    finally:
        upstream.terminate()
        upstream.wait(10)
    print(f"{args.calls} calls per path, load and round; CPU of the event loop thread")
    for (path, tasks), runs in sorted(figures.items()):
        shown = "; ".join(f"{cpu:.3f} ms/call, {rate:,.0f} calls/s" for cpu, rate in runs)
        print(f"{path:<8} {tasks:>2} at once: {shown}")


def forward(url: str, calls: int, rounds: int) -> dict[tuple[str, int], list[tuple[float, float]]]:
    import anyio

    from gateway.upstreams import HTTP, UpstreamPool, UpstreamSpec

    for name in ("httpx2", "httpcore2", "mcp"):
        logging.getLogger(name).setLevel(logging.WARNING)
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}

    async def run() -> None:
        async with anyio.create_task_group() as tasks:
            pool = UpstreamPool(tasks, size=2, verify_seconds=60)
            upstream = pool.get(UpstreamSpec(name="bench", transport=HTTP, url=url))
            await upstream.live_pins()
            paths = {"session": upstream.call_in_session, "posted": upstream.call_posted}
            for _ in range(rounds):
                for path, call in paths.items():
                    await call(
                        "echo", {"message": "warm"}, timeout_ms=10_000, max_output_bytes=10**6
                    )
                    for concurrent in CONCURRENCY:
                        each = calls // concurrent

                        async def session(call=call, each=each) -> None:
                            for index in range(each):
                                await call(
                                    "echo",
                                    {"message": f"call {index}"},
                                    timeout_ms=10_000,
                                    max_output_bytes=10**6,
                                )

                        cpu, started = time.thread_time(), time.perf_counter()
                        async with anyio.create_task_group() as sessions:
                            for _ in range(concurrent):
                                sessions.start_soon(session)
                        cpu, elapsed = time.thread_time() - cpu, time.perf_counter() - started
                        done = each * concurrent
                        figures.setdefault((path, concurrent), []).append(
                            (cpu * 1000 / done, done / elapsed)
                        )
            pool.close()
            tasks.cancel_scope.cancel()

    anyio.run(run)
    return figures


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    main()
