"""The worker survives a broker restart while it holds countdown tasks, and runs them.

A real Celery worker (the production settings' transport, ``config/broker.py``) on a private
redis-server that keeps its data on disk as the production broker does; countdown tasks are
delivered to it and wait there, unacknowledged; the broker is stopped and started again. Before
the fix the worker stopped with ``Unrecoverable error: AttributeError("'NoneType' object has no
attribute 'hostname'")`` and the tasks waited for someone to restart it.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from celery import Celery

from tests.helpers import database_url, wait_for
from tests.redis_server import needs_redis_server, redis_server

pytestmark = [needs_redis_server, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
ROOT = Path(__file__).resolve().parent.parent
COUNTDOWN = 8  # long enough that the worker still holds the tasks when the broker goes away


def health(env: dict, *args: str) -> subprocess.CompletedProcess:
    """docker-compose.yml's own worker healthcheck (under a supervising restart policy)."""
    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    assert worker["restart"] == "unless-stopped"
    kind, program, *command = worker["healthcheck"]["test"]
    assert (kind, program) == ("CMD", "python")
    return subprocess.run(
        [sys.executable, *command, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_worker_survives_a_broker_restart_and_runs_the_countdown_tasks_it_held(tmp_path):
    log = tmp_path / "worker.log"
    with redis_server(data_dir=str(tmp_path)) as broker:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url(),
            "REDIS_URL": broker.url(0),
        }
        with log.open("w") as output:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
                 "--loglevel", "INFO", "--without-heartbeat", "--without-gossip",
                 "--without-mingle"],
                cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            assert wait_for(lambda: " ready." in log.read_text(), 30), log.read_text()
            sender = Celery(broker=broker.url(0), set_as_current=False)
            ids = [
                sender.send_task("learning.tasks.prune_traces", countdown=COUNTDOWN).id
                for _ in range(3)
            ]
            sender.close()

            def received() -> int:
                return sum(f"[{task_id}] received" in log.read_text() for task_id in ids)

            assert wait_for(lambda: received() == 3, 15), log.read_text()
            assert not any(f"[{task_id}] succeeded" in log.read_text() for task_id in ids)

            broker.restart(down_seconds=1)

            def succeeded() -> list[int]:
                text = log.read_text()
                return [len(re.findall(rf"\[{task_id}\] succeeded", text)) for task_id in ids]

            assert wait_for(lambda: succeeded() == [1, 1, 1], 30), log.read_text()
            assert worker.poll() is None, log.read_text()
            time.sleep(1)  # nothing runs twice
            assert succeeded() == [1, 1, 1]
            text = log.read_text()
            assert "Unrecoverable error" not in text and "Connection to broker lost" in text
            # compose's healthcheck finds it answering.
            assert health(env).returncode == 0
        finally:
            worker.terminate()
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()


def test_the_healthcheck_stops_a_worker_that_does_not_answer_but_not_for_a_broker_down(tmp_path):
    with redis_server() as broker:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
               "DATABASE_URL": database_url(), "REDIS_URL": broker.url(0)}  # fmt: skip
        stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            args = ("--node", "celery@stuck", "--pid", str(stuck.pid), "--pause", "0")
            result = health(env, *args, "--timeout", "0.5")
            assert result.returncode == 1 and "did not answer" in result.stderr
            assert stuck.wait(10) == -3  # SIGQUIT: Celery's cold shutdown
        finally:
            stuck.kill()

        broker.kill()
        alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            result = health(env, "--node", "celery@any", "--pid", str(alive.pid), "--timeout", "1")
            assert result.returncode == 1 and "broker unreachable" in result.stderr
            assert alive.poll() is None  # left alone: it reconnects when the broker is back
        finally:
            alive.kill()
