"""A burst of changes costs one revision move per transaction and one render per application,
and a render claim dies with the worker that held it (#23.7)."""

import os
import signal
import time

import pytest
from django.core.cache import caches
from django.db import transaction
from django_redis.cache import RedisCache

from api import bundles, tasks
from api.services import runtime_token_create

# The API's fixtures, used by name below (hence F811 for the whole file).
from registry import revision
from registry.models import Application
from registry.revision import revision_bump, revision_stored
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db

needs_redis_cache = pytest.mark.skipif(
    not isinstance(caches["default"], RedisCache),
    reason="bundles live in a Redis cache: run with REDIS_URL set (CI does)",
)


def forget_callbacks(callbacks) -> list:
    """The revision's own commit callbacks among those captured."""
    return [c for c in callbacks if getattr(c, "func", c) is revision._forget_everywhere]


def test_an_import_of_many_tools_moves_the_revision_once(
    vocabulary, django_capture_on_commit_callbacks
):
    before = revision_stored()
    documents = [contract(name=f"bulk.tool_{index}") for index in range(30)]
    with django_capture_on_commit_callbacks() as callbacks:
        result = registry_import(data=documents, approve=True)
    assert len(result.published) == 30
    assert revision_stored() == before + 1  # was one per tool and more (three here)
    assert len(forget_callbacks(callbacks)) == 1  # so one fan-out of renders, not 30


def test_each_transaction_moves_it_and_a_rolled_back_savepoint_takes_its_move_along(
    vocabulary, django_capture_on_commit_callbacks
):
    before = revision_stored()
    with django_capture_on_commit_callbacks() as callbacks:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    revision_bump()
                    raise RuntimeError("rolled back")
            except RuntimeError:
                pass
            assert revision_stored() == before  # the move went with its savepoint
            revision_bump()
            revision_bump()
        with transaction.atomic():
            revision_bump()
        revision_bump()  # no transaction of its own: a move of its own
    assert revision_stored() == before + 3
    assert len(forget_callbacks(callbacks)) == 3


@pytest.fixture
def queued(monkeypatch):
    """What would reach the broker: (task name, application) per message."""
    sent: list[tuple[str, int | None]] = []
    monkeypatch.setattr(
        tasks.bundles_render, "apply_async", lambda **kwargs: sent.append(("all", None))
    )
    monkeypatch.setattr(
        tasks.bundle_render,
        "apply_async",
        lambda args, **kwargs: sent.append(("one", args[0])),
    )
    return sent


@needs_redis_cache
def test_a_burst_of_changes_queues_one_render_per_application(
    registry, queued, django_capture_on_commit_callbacks
):
    for name in ("assistant", "second"):
        runtime_token_create(application_name=name, scopes=["contracts:read"])
    queued.clear()
    applications = bundles.bundle_applications()
    assert len(applications) == 2
    for _ in range(5):  # five changes, each committed, before any worker ran
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            Application.objects.get(name="assistant").save()
    assert queued == [("all", None)]  # was five fan-outs
    tasks.bundles_render()  # the worker runs the fan-out
    assert queued[1:] == [("one", pk) for pk in applications]
    # Changes while those renders wait: one more fan-out, which adds no second render.
    with django_capture_on_commit_callbacks(execute=True):
        revision_bump()
    tasks.bundles_render()
    assert queued[1 + len(applications) :] == [("all", None)]
    # A render that started clears its mark: the next change renders again.
    assert bundles.bundle_render(application_id=applications[0]) is not None
    with django_capture_on_commit_callbacks(execute=True):
        revision_bump()
    tasks.bundles_render()
    assert queued[-2:] == [("all", None), ("one", applications[0])]


@needs_redis_cache
def test_a_killed_renderer_blocks_the_next_one_only_until_its_claim_lapses(registry, monkeypatch):
    monkeypatch.setattr(bundles, "CLAIM_SECONDS", 1)
    runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    application = Application.objects.get(name="assistant").pk
    revision = revision_stored()
    claim = bundles._claim_key(application, revision)
    child = os.fork()
    if child == 0:  # a worker rendering that is killed mid-render: it never lets go itself
        try:
            with bundles.bundle_claim(application, revision):
                time.sleep(600)
        finally:
            os._exit(0)
    try:
        client = bundles.bundle_client()
        deadline = time.monotonic() + 10
        while not client.exists(claim):
            assert time.monotonic() < deadline, "the child never claimed"
            time.sleep(0.05)
        # Alive, it renews its claim past CLAIM_SECONDS: nobody else renders.
        time.sleep(2.5)
        assert bundles.bundle_render(application_id=application) is None
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        started = time.monotonic()
        while bundles.bundle_render(application_id=application) is None:
            assert time.monotonic() - started < 3, "the dead worker's claim outlived it"
            time.sleep(0.1)
    finally:
        try:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    assert client.hexists(bundles.bundle_key(application, revision), bundles.COMPLETE)
