"""``learning.ingest.traces_ingest`` and the fold: stored once, counted once."""

import gc

import pytest
from django.db import connection
from django.db.models import ProtectedError
from django.test.utils import CaptureQueriesContext

from learning import ingest
from learning.fold import traces_fold_pending
from learning.ingest import traces_ingest
from learning.models import ToolStats, Trace
from learning.services import tool_refresh, tools_with_new_traces
from tests.helpers import event_call

pytestmark = pytest.mark.django_db


def test_it_stores_valid_traces_and_counts_duplicates(get_event):
    items = [event_call(i) for i in range(5)] + [event_call(0)]
    result = traces_ingest(items=enumerate(items))
    assert (result.accepted, result.duplicates, result.rejected) == (5, 1, [])
    result = traces_ingest(items=enumerate(items))
    assert (result.accepted, result.duplicates) == (0, 6)
    assert Trace.objects.count() == 5


def test_it_keeps_an_unknown_tool_flagged(get_event):
    traces_ingest(items=enumerate([event_call(1, tool="crm.lookup_account")]))
    trace = Trace.objects.get()
    assert trace.unknown_tool and trace.tool is None


def test_ingest_stores_and_the_fold_counts_each_inserted_trace_once(get_event):
    traces_ingest(items=enumerate(event_call(i) for i in range(40)))
    traces_ingest(items=enumerate(event_call(i) for i in range(45)))  # 40 duplicates, 5 new
    assert Trace.objects.filter(aggregated=False).count() == 45
    assert not ToolStats.objects.exists()  # stored and answered; folded after

    assert traces_fold_pending() == {"calendar.get_event": 45}

    stats = ToolStats.objects.get(tool_name="calendar.get_event")
    assert stats.traces_total == 45
    assert stats.aggregate["total"] == 45
    assert not Trace.objects.filter(aggregated=False).exists()
    assert tools_with_new_traces() == ["calendar.get_event"]
    tool_refresh(tool_name="calendar.get_event")
    assert tools_with_new_traces() == []


def test_a_tool_traces_name_is_never_deleted_so_traces_need_no_index_by_tool(get_event):
    """``Trace.tool`` has no index: the traces that name a tool arrived after its approval, whose
    audit entries protect it, so deleting it is refused before any query reads the traces."""
    traces_ingest(items=enumerate([event_call(1)]))
    assert Trace.objects.get().tool == get_event
    with CaptureQueriesContext(connection) as captured, pytest.raises(ProtectedError):
        get_event.delete()
    assert not [query for query in captured if "learning_trace" in query["sql"]]
    assert Trace.objects.get().tool == get_event


def test_it_pauses_the_garbage_collector_while_a_batch_is_stored(get_event, monkeypatch):
    seen = []
    store = ingest._store

    def storing(*args, **kwargs):
        seen.append(gc.isenabled())
        store(*args, **kwargs)

    monkeypatch.setattr(ingest, "_store", storing)

    traces_ingest(items=enumerate([event_call(1)]))
    assert seen == [False] and gc.isenabled()

    gc.disable()
    try:
        traces_ingest(items=enumerate([event_call(2)]))
        assert not gc.isenabled()  # off already: left off
    finally:
        gc.enable()
    assert Trace.objects.count() == 2
