import logging

import pytest
from django.db import OperationalError

from registry.queueing import TRANSIENT, durable_task, task_send, task_send_on_commit


def refused() -> None:
    raise ConnectionRefusedError("broker down")


def test_it_sends_and_says_so():
    sent = []
    assert task_send(lambda: sent.append(1), what="a message") is True
    assert sent == [1]


def test_a_refusing_broker_is_logged_never_raised(caplog):
    with caplog.at_level(logging.WARNING, logger="registry.queueing"):
        assert task_send(refused, what="refresh of x") is False
    assert "refresh of x not queued: ConnectionRefusedError: broker down" in caplog.text


@pytest.mark.django_db
def test_on_commit_it_sends_only_once_the_transaction_commits(
    django_capture_on_commit_callbacks, caplog
):
    sent = []
    with django_capture_on_commit_callbacks() as callbacks:
        task_send_on_commit(lambda: sent.append(1), what="one")
        task_send_on_commit(refused, what="two")
        assert sent == []
    assert len(callbacks) == 2
    for callback in callbacks:
        callback()  # the refused one does not raise into the commit
    assert sent == [1]
    assert "two not queued" in caplog.text


def test_a_durable_task_retries_on_transient_errors_and_takes_overrides():
    @durable_task(soft_time_limit=5, time_limit=10, max_retries=9)
    def probe(self) -> None:
        pass

    assert probe.acks_late is True
    assert probe.autoretry_for == TRANSIENT and OperationalError in TRANSIENT
    assert probe.max_retries == 9
    assert (probe.soft_time_limit, probe.time_limit) == (5, 10)
