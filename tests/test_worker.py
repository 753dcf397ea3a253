"""End to end through a real Celery worker on the configured broker and database.

Traces go in over the API, the periodic task runs on the worker (it fans out one task per tool),
and exactly one drift ticket is opened for the drifted high-risk tool, none for the others, none
duplicated when the task runs twice.
"""

import time
from pathlib import Path

import pytest
from django.conf import settings

from learning.models import ToolStats, Trace
from learning.tasks import refresh_contracts
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract, wait_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ROOT = Path(__file__).resolve().parent.parent


def drift_world():
    """The demo: a drifted high-risk payments tool among tools that keep their contracts."""
    import json

    from demo.traces import demo_traces
    from reviews.services import registry_import

    registry = json.loads((ROOT / "demo" / "registry.json").read_text())
    registry_import(data=registry, approve=True)
    return list(demo_traces(registry, seed=7))


@pytest.mark.slow  # the whole demo's traces through a real worker: `make test-slow`
def test_the_periodic_refresh_opens_exactly_one_drift_ticket(worker, runtime_client_factory):
    traces = drift_world()
    client = runtime_client_factory("assistant")
    for start in range(0, len(traces), 1000):
        response = client.post(
            "/api/v1/traces/", _jsonable(traces[start : start + 1000]), format="json"
        )
        assert response.status_code == 200, response.content
    assert Trace.objects.count() == len(traces)
    # Stored and answered; the worker folds them after.
    assert wait_for(lambda: not Trace.objects.filter(aggregated=False).exists())
    assert ToolStats.objects.filter(dirty=True).count() == 39  # 38 tools and one unknown

    refresh_contracts.delay()
    assert wait_for(lambda: not ToolStats.objects.filter(dirty=True).exists()), "refresh never ran"
    assert wait_for(lambda: ReviewTicket.objects.filter(kind="drift").exists())
    time.sleep(2)  # let the last fanned-out tasks finish
    drift = ReviewTicket.objects.filter(kind="drift")
    assert [ticket.tool.name for ticket in drift] == ["payments.refund_charge"]
    ticket = drift.get()
    assert ticket.evidence["drift"] and ticket.status == "open"

    # Twice more, with nothing new and with a retried fan-out: still one ticket.
    refresh_contracts.delay()
    from learning.tasks import tool_refresh

    tool_refresh.delay("payments.refund_charge")
    tool_refresh.delay("payments.refund_charge")
    time.sleep(5)
    assert ReviewTicket.objects.filter(kind="drift").count() == 1
    assert settings.CELERY_TASK_ALWAYS_EAGER is False

    # A shadow tool reaches support, and a high-risk tool's outputs stop matching its contract.
    shadow = [t for t in traces if t["tool"] == "crm.lookup_account"]
    charges = [t for t in traces if t["tool"] == "payments.charge_card" and t["output"]]
    more = [{**t, "trace_id": f"more-{t['trace_id']}"} for t in shadow[:10]]
    more += [
        {**t, "trace_id": f"bad-{t['trace_id']}", "output": {**t["output"], "charge_status": "??"}}
        for t in charges
    ]
    response = client.post("/api/v1/traces/", _jsonable(more), format="json")
    assert response.status_code == 200, response.content
    refresh_contracts.delay()
    refresh_contracts.delay()  # twice at once: still one proposal, one ticket
    assert wait_for(lambda: ReviewTicket.objects.filter(kind="new_tool", status="open").exists())
    assert wait_for(lambda: ReviewTicket.objects.filter(kind="drift").count() == 2)
    time.sleep(3)
    proposal = ReviewTicket.objects.get(kind="new_tool", status="open")
    assert proposal.tool.name == "crm.lookup_account" and proposal.tool.current_version is None
    assert proposal.evidence["applications"] == {"assistant": len(shadow) + 10}
    output = ReviewTicket.objects.get(kind="drift", tool__name="payments.charge_card")
    item = next(item for item in output.evidence["drift"] if item["field"] == "output")
    assert item["detail"].startswith("output no longer matches its contract")
    assert item["observed"]["paths"] == {"output.charge_status (enum)": len(charges)}
    assert ReviewTicket.objects.filter(kind="new_tool", status="open").count() == 1


def _jsonable(traces: list[dict]) -> list[dict]:
    return [
        {
            **trace,
            "occurred_at": trace["occurred_at"].isoformat()
            if hasattr(trace["occurred_at"], "isoformat")
            else trace["occurred_at"],
        }
        for trace in traces
    ]


def test_a_tool_is_re_inferred_by_the_worker_within_the_debounce_window(
    worker, runtime_client_factory, settings
):
    from django.utils import timezone

    from learning.models import InferredContract
    from registry.models import Permission, StateVariable

    settings.LEARNING_REFRESH_DEBOUNCE_SECONDS = 3
    for name in ("event_id", "event_details", "event_owner"):
        StateVariable.objects.get_or_create(name=name)
    Permission.objects.get_or_create(name="read")
    registry_import(
        data=[contract("calendar.get_event", requires=["event_id"], produces=["event_details"])],
        approve=True,
    )
    client = runtime_client_factory("assistant")

    def traces(start: int, after: dict) -> list[dict]:
        return [
            {"trace_id": f"run-{n}", "step": 0, "tool": "calendar.get_event",
             "status": "success", "args": {"event_query": "sync"},
             "state_before": {"event_id": "evt"}, "state_after": {"event_id": "evt", **after},
             "occurred_at": timezone.now().isoformat()}
            for n in range(start, start + 30)
        ]  # fmt: skip

    def inferred():
        row = InferredContract.objects.filter(tool_name="calendar.get_event").first()
        return row and (row.support, sorted(row.document["produces"]))

    assert (
        client.post("/api/v1/traces/", traces(0, {"event_details": 1}), format="json").status_code
        == 200
    )
    # No sweep is queued: the ingest's commit scheduled the tool's own refresh.
    assert wait_for(lambda: inferred() == (30, ["event_details"]), timeout=60), inferred()
    assert not ToolStats.objects.get(tool_name="calendar.get_event").dirty

    # The calls start producing a new variable: the inferred contract follows within the window.
    more = traces(30, {"event_details": 1, "event_owner": "ana"})
    assert client.post("/api/v1/traces/", more, format="json").status_code == 200
    assert wait_for(lambda: "event_owner" in (inferred() or (0, []))[1], timeout=60), inferred()
