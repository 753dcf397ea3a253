"""A fold committed while a refresh runs keeps its tool dirty, and schedules one refresh.

Ingest stores traces; the fold its commit queues (run eagerly here) adds them to the tool's
statistics and schedules the refresh."""

import threading

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from learning import services, tasks
from learning.fold import traces_fold_pending
from learning.ingest import traces_ingest
from learning.models import ToolStats


def trace(n: int) -> dict:
    return {
        "trace_id": f"race-{n}", "step": 0, "tool": "calendar.get_event", "status": "success",
        "args": {"event_id": f"evt_{n}"}, "state_before": {"event_id": f"evt_{n}"},
        "state_after": {"event_id": f"evt_{n}", "event_details": {"n": n}},
        "occurred_at": timezone.now().isoformat(),
    }  # fmt: skip


def ingest_in_another_connection(n: int) -> None:
    """Ingest and fold from another thread, hence another database connection."""

    def run():
        try:
            traces_ingest(items=[(0, trace(n))])
            traces_fold_pending()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="interleaves two connections: PostgreSQL (CI)"
)
def test_it_keeps_a_tool_dirty_when_traces_are_folded_while_it_is_refreshed(get_event, monkeypatch):
    traces_ingest(items=[(0, trace(1))])
    real_infer = services.infer_contract
    interleaved = []

    def infer_while_an_ingest_commits(**kwargs):
        # The refresh has read the statistics; a runtime's traces commit before it finishes.
        if not interleaved:
            interleaved.append(True)
            ingest_in_another_connection(2)
        return real_infer(**kwargs)

    monkeypatch.setattr(services, "infer_contract", infer_while_an_ingest_commits)

    services.tool_refresh(tool_name="calendar.get_event")

    stats = ToolStats.objects.get(tool_name="calendar.get_event")
    assert interleaved and stats.traces_total == 2
    assert stats.dirty is True  # the second trace was not in this inference
    assert stats.inferred_at is not None
    assert services.tools_with_new_traces() == ["calendar.get_event"]

    services.tool_refresh(tool_name="calendar.get_event")  # nothing in between this time

    stats.refresh_from_db()
    assert stats.dirty is False


def ingest_and_commit(n: int, capture) -> None:
    with capture(execute=True):
        traces_ingest(items=[(0, trace(n))])


@pytest.mark.django_db
@override_settings(LEARNING_REFRESH_DEBOUNCE_SECONDS=30)
def test_it_schedules_one_refresh_per_tool_however_many_ingests_commit(
    get_event, monkeypatch, django_capture_on_commit_callbacks, eager
):
    sent = []
    monkeypatch.setattr(
        tasks.tool_refresh_due, "apply_async", lambda *a, **kw: sent.append((a, kw))
    )

    for n in range(3):
        ingest_and_commit(n, django_capture_on_commit_callbacks)

    assert sent == [((("calendar.get_event",),), {"countdown": 30, "retry": False})]
    tasks.tool_refresh_due.run("calendar.get_event")  # the refresh clears the pending mark
    ingest_and_commit(9, django_capture_on_commit_callbacks)
    assert len(sent) == 2


@pytest.mark.django_db
def test_a_broker_that_refuses_the_message_leaves_the_tool_to_be_scheduled_again(
    get_event, monkeypatch, django_capture_on_commit_callbacks, eager
):
    def refuse(*args, **kwargs):
        raise ConnectionError("broker away")

    monkeypatch.setattr(tasks.tool_refresh_due, "apply_async", refuse)

    with django_capture_on_commit_callbacks(execute=True):
        result = traces_ingest(items=[(0, trace(1))])

    assert result.accepted == 1
    assert ToolStats.objects.get(tool_name="calendar.get_event").dirty is True
    sent = []
    monkeypatch.setattr(tasks.tool_refresh_due, "apply_async", lambda *a, **kw: sent.append(a))
    ingest_and_commit(2, django_capture_on_commit_callbacks)
    assert sent == [(("calendar.get_event",),)]


@pytest.mark.django_db
@override_settings(LEARNING_REFRESH_DEBOUNCE_SECONDS=30)
def test_the_tool_page_says_when_inference_ran_on_how_many_traces_and_what_came_since(
    get_event, admin_client
):
    from django.urls import reverse

    traces_ingest(items=enumerate(trace(n) for n in range(3)))
    services.tool_refresh(tool_name="calendar.get_event")
    traces_ingest(items=[(0, trace(3))])
    traces_fold_pending()

    page = admin_client.get(reverse("admin:registry_tool_health", args=[get_event.pk]))

    text = " ".join(page.content.decode().split())
    assert "Inferred from 3 traces 0 minutes ago (" in text
    assert "4 received in all, newer ones re-inferred within 30 seconds" in text


@pytest.mark.django_db
def test_a_folds_tools_are_marked_pending_in_one_cache_call_and_only_new_ones_scheduled(
    monkeypatch,
):
    marked = []
    real = tasks.cache_add_many
    monkeypatch.setattr(
        tasks,
        "cache_add_many",
        lambda cache, keys, *a, **kw: marked.append(keys) or real(cache, keys, *a, **kw),
    )
    sent = []
    monkeypatch.setattr(tasks.tool_refresh_due, "apply_async", lambda *a, **kw: sent.append(a[0]))

    assert tasks.tool_refresh_soon(tool_names=["t.a", "t.b", "t.c"]) == 3
    assert tasks.tool_refresh_soon(tool_names=["t.b", "t.c", "t.d"]) == 1  # b, c pending

    assert [len(keys) for keys in marked] == [3, 3]  # one cache call per fold
    assert sent == [("t.a",), ("t.b",), ("t.c",), ("t.d",)]
