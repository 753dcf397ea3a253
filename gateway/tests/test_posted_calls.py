"""Calls posted to a streamable-HTTP upstream on the gateway's own HTTP client against the same
calls through the SDK's client session: the same results, the same failures, told alike."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from gateway.upstreams import HTTP, STDIO, UpstreamFailed, UpstreamPool, UpstreamSpec
from tests.helpers import wait_for
from tests.mcp import EVERYTHING, needs_everything

SERVER = str(Path(__file__).with_name("http_server.py"))
STDIO_SERVER = str(Path(__file__).with_name("progress_server.py"))
LIMITS = {"timeout_ms": 10_000, "max_output_bytes": 100_000}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class Server:
    """``http_server.py`` on a port of its own, which a test may kill and start again."""

    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.port, self.mode = free_port(), mode
        self.log = tmp_path / "work.log"
        self.url = f"http://127.0.0.1:{self.port}/mcp/"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SERVER, str(self.port), str(self.log), self.mode]
        )
        assert wait_for(lambda: listening(self.port)), "the HTTP stand-in did not start"

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture(params=["json", "sse"])
def server(request, tmp_path):
    server = Server(tmp_path, request.param)
    server.start()
    yield server
    server.kill()


def with_upstream(url: str, work, headers: tuple[tuple[str, str], ...] = ()):
    """Run ``work(upstream)`` with the gateway's pool holding one HTTP upstream at ``url``."""

    async def main():
        async with anyio.create_task_group() as tasks:
            pool = UpstreamPool(tasks, size=1, verify_seconds=60)
            upstream = pool.get(
                UpstreamSpec(name="worker", transport=HTTP, url=url, headers=headers)
            )
            try:
                return await work(upstream)
            finally:
                pool.close()
                tasks.cancel_scope.cancel()

    return anyio.run(main)


async def outcome(call, name: str, arguments: dict, **limits):
    """What a call gave: its result and size, or the failure it was told as."""
    try:
        result, size = await call(name, arguments, **{**LIMITS, **limits})
    except UpstreamFailed as exc:
        return "failed", str(exc)
    return "answered", result.model_dump(by_alias=True, exclude_none=True), size


CASES = [
    ("echo", {"who": "Ada", "tags": ["a", 1, None, {"x": 1.5}]}, {}),
    ("broken", {}, {}),
    ("failing", {}, {}),
    ("big", {"size": 5000}, {}),
    ("big", {"size": 5000}, {"max_output_bytes": 1000}),
    ("unknown", {}, {}),
]


def test_a_posted_call_answers_as_the_sdks_session_does(server):
    async def work(upstream):
        answers = []
        for name, arguments, limits in CASES:
            posted = await outcome(upstream.call_posted, name, arguments, **limits)
            in_session = await outcome(upstream.call_in_session, name, arguments, **limits)
            answers.append((posted, in_session))
        # ``call`` posts it: the posted calls' own session is the one that served it.
        routed = await outcome(upstream.call, "echo", {"who": "Bo"})
        return answers, routed, upstream.posted.session_id

    answers, routed, session_id = with_upstream(server.url, work)
    for (name, arguments, limits), (posted, in_session) in zip(CASES, answers, strict=True):
        assert posted == in_session, (name, arguments, limits)
    kinds = [posted[0] for posted, _ in answers]
    assert kinds == ["answered", "answered", "failed", "answered", "failed", "failed"]
    assert answers[0][0][1]["structuredContent"] == {"echo": CASES[0][1]}
    assert answers[1][0][1]["isError"] is True
    assert answers[2][0][1] == "worker answered with an error: the backend is down"
    assert "more than the 1,000 the contract allows" in answers[4][0][1]
    assert routed[1]["structuredContent"] == {"echo": {"who": "Bo"}}
    assert session_id


def test_a_posted_call_sends_the_servers_credentials(server):
    async def work(upstream):
        return [
            await outcome(call, "whoami", {})
            for call in (upstream.call_posted, upstream.call_in_session)
        ]

    posted, in_session = with_upstream(
        server.url, work, headers=(("Authorization", "Bearer upstream-secret"),)
    )
    assert posted == in_session
    assert posted[1]["content"][0]["text"] == "Bearer upstream-secret"


def test_a_posted_call_past_its_timeout_is_cancelled_on_its_upstream_as_in_a_session(server):
    async def work(upstream):
        slow = [
            await outcome(call, "work", {"steps": steps, "step_ms": 100}, timeout_ms=500)
            for call, steps in ((upstream.call_posted, 40), (upstream.call_in_session, 41))
        ]
        after = await outcome(upstream.call_posted, "echo", {"who": "Cy"})
        # The sessions stay open until the upstream has ended both calls: the SDK's session
        # queues its notice for its transport, and a transport closed at once drops it.
        await anyio.to_thread.run_sync(lambda: wait_for(ended, timeout=15))
        return slow, after

    def ended():
        done = {e["steps"]: e for e in server.entries() if not e.get("started")}
        return done if len(done) == 2 else None

    (posted, in_session), after = with_upstream(server.url, work)
    assert posted == ("failed", in_session[1].replace("41", "40"))
    assert posted[1] == (
        "worker did not answer within 500 ms (the contract's timeout_ms); the call was cancelled"
    )
    assert after[0] == "answered"
    done = ended()
    assert done is not None, server.entries()
    # Both upstream calls stopped at once, told by notifications/cancelled.
    assert done[40]["cancelled"] and done[40]["at"] < 40
    assert done[41]["cancelled"] and done[41]["at"] < 41


def test_an_upstream_dying_mid_call_is_told_alike_and_the_next_call_starts_again(server):
    async def killed_during(call, steps):
        async with anyio.create_task_group() as tasks:
            answers = []

            async def slow():
                answers.append(await outcome(call, "work", {"steps": steps, "step_ms": 100}))

            tasks.start_soon(slow)
            with anyio.fail_after(30):
                while not any(e.get("steps") == steps for e in server.entries()):
                    await anyio.sleep(0.05)
            await anyio.to_thread.run_sync(server.kill)
        await anyio.to_thread.run_sync(server.start)
        return answers[0]

    async def work(upstream):
        first = await outcome(upstream.call_posted, "echo", {"who": "Ada"})
        posted = await killed_during(upstream.call_posted, 50)
        next_posted = await outcome(upstream.call_posted, "echo", {"who": "Bo"})
        await outcome(upstream.call_in_session, "echo", {"who": "Ada"})
        in_session = await killed_during(upstream.call_in_session, 51)
        next_in_session = await outcome(upstream.call_in_session, "echo", {"who": "Bo"})
        return first, posted, in_session, next_posted, next_in_session

    first, posted, in_session, next_posted, next_in_session = with_upstream(server.url, work)
    assert first[0] == "answered"
    assert posted == in_session
    assert posted[1].startswith("worker closed the connection before it answered")
    assert next_posted == next_in_session
    assert next_posted[1]["structuredContent"] == {"echo": {"who": "Bo"}}


def test_a_posted_call_whose_session_the_upstream_forgot_starts_a_new_one(server):
    async def work(upstream):
        before = await outcome(upstream.call_posted, "echo", {"who": "Ada"})
        session_id = upstream.posted.session_id
        await anyio.to_thread.run_sync(server.kill)
        await anyio.to_thread.run_sync(server.start)  # a new process: the session is gone
        after = await outcome(upstream.call_posted, "echo", {"who": "Bo"})
        return before, after, session_id, upstream.posted.session_id

    before, after, old, new = with_upstream(server.url, work)
    assert before[0] == after[0] == "answered"
    assert after[1]["structuredContent"] == {"echo": {"who": "Bo"}}
    assert old and new and old != new


def test_an_upstream_that_does_not_answer_is_told_alike(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/mcp/"

    async def work(upstream):
        return [
            await outcome(call, "echo", {})
            for call in (upstream.call_posted, upstream.call_in_session)
        ]

    posted, in_session = with_upstream(url, work)
    assert posted == in_session
    assert posted[1].startswith("cannot start a session with worker: ConnectError")


def test_a_call_with_progress_to_pass_on_goes_through_the_sdks_session(server):
    heard = []

    async def progress(value, total, message):
        heard.append(value)

    async def work(upstream):
        result = await upstream.call(
            "work", {"steps": 3, "step_ms": 10}, **LIMITS, progress=progress
        )
        return result, upstream.posted.session_id

    (result, size), session_id = with_upstream(server.url, work)
    assert result.structured_content == {"steps": 3}
    # An upstream answering in JSON has no stream to report progress on.
    assert heard == ([1, 2, 3] if server.mode == "sse" else [])
    assert session_id is None  # the posted calls' session never started


@needs_everything
def test_a_posted_call_to_server_everything_answers_as_its_session_does():
    port = free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: listening(port)), "server-everything did not start"
        cases = [
            ("echo", {"message": "hi"}),
            ("get-sum", {"a": 2, "b": 3}),
            ("echo", {}),
            ("no-such-tool", {}),
        ]

        async def work(upstream):
            return [
                (
                    await outcome(upstream.call_posted, name, arguments),
                    await outcome(upstream.call_in_session, name, arguments),
                )
                for name, arguments in cases
            ]

        answers = with_upstream(f"http://127.0.0.1:{port}/mcp", work)
    finally:
        process.terminate()
        process.wait(10)
    for (name, arguments), (posted, in_session) in zip(cases, answers, strict=True):
        assert posted == in_session, (name, arguments)
    assert "hi" in answers[0][0][1]["content"][0]["text"]


def test_a_call_in_a_session_the_upstream_forgot_starts_a_new_one(server):
    heard = []

    async def progress(value, total, message):
        heard.append(value)

    async def work(upstream):
        before = await outcome(upstream.call, "echo", {"who": "Ada"}, progress=progress)
        old = upstream.connections[0]
        await anyio.to_thread.run_sync(server.kill)
        await anyio.to_thread.run_sync(server.start)  # a new process: the session is gone
        after = await outcome(upstream.call, "echo", {"who": "Bo"}, progress=progress)
        return before, after, old, upstream.connections[0]

    before, after, old, new = with_upstream(server.url, work)
    assert before[0] == after[0] == "answered"
    assert after[1]["structuredContent"] == {"echo": {"who": "Bo"}}
    assert old.expired and old.dead and new is not old and not new.expired


def test_a_call_to_a_stdio_upstream_timed_out_or_cancelled_is_cancelled_on_it(tmp_path):
    log = tmp_path / "work.log"
    spec = UpstreamSpec(
        name="worker", transport=STDIO, command=(sys.executable, STDIO_SERVER, str(log))
    )

    def entries():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def ended():
        done = {e["steps"]: e for e in entries() if not e.get("started")}
        return done if len(done) == 2 else None

    async def main():
        async with anyio.create_task_group() as tasks:
            pool = UpstreamPool(tasks, size=1, verify_seconds=60)
            upstream = pool.get(spec)
            try:
                slow = await outcome(upstream.call, "work", {"steps": 40}, timeout_ms=500)
                with anyio.move_on_after(0.5):  # the caller goes away
                    await outcome(upstream.call, "work", {"steps": 41})
                await anyio.to_thread.run_sync(lambda: wait_for(ended, timeout=15))
                return slow
            finally:
                pool.close()
                tasks.cancel_scope.cancel()

    slow = anyio.run(main)
    assert slow[1] == (
        "worker did not answer within 500 ms (the contract's timeout_ms); the call was cancelled"
    )
    done = ended()
    assert done is not None, entries()
    assert done[40]["cancelled"] and done[40]["at"] < 40
    assert done[41]["cancelled"] and done[41]["at"] < 41
