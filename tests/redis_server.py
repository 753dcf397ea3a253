"""A throwaway Redis server for tests that stop, hang or kill it."""

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server")
needs_redis_server = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    def __init__(self, data_dir: str | None = None) -> None:
        """``data_dir``: keep the data there, as the production broker does (append-only file),
        so it survives ``restart``; else nothing is kept."""
        self.port = free_port()
        self.data_dir = data_dir
        self.start()

    def start(self) -> None:
        keep = ["--appendonly", "yes", "--dir", self.data_dir] if self.data_dir else []
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", *keep],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise
                time.sleep(0.05)
            finally:
                client.close()

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def pause(self) -> None:
        """Hung, not dead: the kernel still accepts connections, nothing ever answers."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self, down_seconds: float = 0) -> None:
        """Stop it as an operator would (SIGTERM: it saves and closes every connection), stay
        down a while, start it again on the same port."""
        self.process.terminate()
        self.process.wait(10)
        time.sleep(down_seconds)
        self.start()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.kill()
            self.process.wait(10)


@contextmanager
def redis_server(data_dir: str | None = None) -> Iterator[RedisServer]:
    server = RedisServer(data_dir)
    try:
        yield server
    finally:
        server.kill()
