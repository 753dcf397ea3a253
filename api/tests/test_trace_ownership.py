"""Traces belong to the application that sent them: no application can shadow, poison or probe
another's learning through them."""

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from learning.ingest import traces_ingest
from learning.models import InferredContract, ToolStats, Trace
from learning.services import tool_refresh, traces_prune
from registry.models import Application, RiskLevel
from reviews.models import ReviewTicket
from tests.helpers import client_for, trace

pytestmark = pytest.mark.django_db


def delete_call(step: int, *, run: str = "run", extra: bool = False) -> dict:
    """A successful call of the high-risk calendar.delete_event, optionally with a new argument."""
    event = f"evt_{run}_{step}_0042"
    args = {"event_id": event, **({"force": f"yes-{step}-extra"} if extra else {})}
    return trace(
        step,
        trace_id=f"{run}-{step}",
        tool="calendar.delete_event",
        args=args,
        state_before={"event_id": event},
        state_after={"event_id": event},
        output={},
    )


def test_the_same_trace_key_from_two_applications_is_two_traces(registry, restricted):
    runtime = client_for("assistant")
    first = runtime.post("/api/v1/traces/", [trace(1)], format="json").json()
    second = restricted.post("/api/v1/traces/", [trace(1)], format="json").json()
    assert first["accepted"] == 1 and second["accepted"] == 1
    assert second["duplicates"] == 0  # the other application's key is neither shadowed nor told
    assert sorted(Trace.objects.values_list("application__name", flat=True)) == [
        "assistant",
        "restricted",
    ]


def test_traces_of_a_tool_the_application_cannot_see_never_reach_its_learning(registry, restricted):
    # calendar.delete_event is high risk; "restricted" may see medium at most.
    high = RiskLevel.objects.get(name="high")
    high.min_support = 10
    high.save()
    body = restricted.post(
        "/api/v1/traces/", [delete_call(n, extra=True) for n in range(60)], format="json"
    ).json()
    unknown = restricted.post(
        "/api/v1/traces/",
        [{**delete_call(n, run="other"), "tool": "nobody.knows_this"} for n in range(60)],
        format="json",
    ).json()
    # Exactly the answer an unregistered name gets: nothing tells the tool exists.
    assert body == unknown == {"accepted": 60, "duplicates": 0, "rejected": 0, "problems": []}
    assert not ToolStats.objects.filter(tool_name="calendar.delete_event").exists()
    result = tool_refresh(tool_name="calendar.delete_event")
    assert result.drift == [] and result.ticket_id is None
    assert not ReviewTicket.objects.filter(kind="drift").exists()
    stored = Trace.objects.filter(tool_name="calendar.delete_event")
    assert stored.count() == 60 and all(t.unknown_tool and t.tool_id is None for t in stored)


def test_past_its_allowance_an_invisible_tool_and_an_unknown_name_get_the_same_refusal(
    registry, restricted
):
    Application.objects.filter(name="restricted").update(unknown_tool_names=0)
    hidden = restricted.post("/api/v1/traces/", [delete_call(1)], format="json").json()
    unknown = restricted.post(
        "/api/v1/traces/", [{**delete_call(2), "tool": "nobody.knows_this"}], format="json"
    ).json()
    assert hidden["rejected"] == unknown["rejected"] == 1
    reasons = [hidden["problems"][0]["reason"], unknown["problems"][0]["reason"]]
    assert reasons[0].replace("calendar.delete_event", "X") == reasons[1].replace(
        "nobody.knows_this", "X"
    )
    assert hidden["problems"][0]["field"] == unknown["problems"][0]["field"] == "tool"
    assert not Trace.objects.exists()


def test_unregistered_names_are_kept_within_the_allowance_and_the_rest_refused(registry):
    runtime = client_for("assistant")
    Application.objects.filter(name="assistant").update(unknown_tool_names=3)
    items = [trace(n, trace_id=f"junk-{n}", tool=f"junk.name_{n}") for n in range(10)]
    items.append(trace(10, trace_id="good-1"))  # a registered, visible tool
    body = runtime.post("/api/v1/traces/", items, format="json").json()
    assert body["accepted"] == 4 and body["rejected"] == 7
    assert {p["index"] for p in body["problems"]} == set(range(3, 10))
    assert all("3 unregistered tool names" in p["reason"] for p in body["problems"])
    names = set(Trace.objects.filter(unknown_tool=True).values_list("tool_name", flat=True))
    assert names == {"junk.name_0", "junk.name_1", "junk.name_2"}
    # A name already used stays usable; a new one is still refused.
    again = runtime.post(
        "/api/v1/traces/",
        [
            trace(20, trace_id="junk-20", tool="junk.name_0"),
            trace(21, tool="junk.name_99"),
        ],
        format="json",
    ).json()
    assert again["accepted"] == 1 and again["problems"][0]["index"] == 1


def test_an_operator_import_is_trusted_and_unbounded(registry):
    items = [(n, trace(n, trace_id=f"op-{n}", tool=f"op.name_{n}")) for n in range(30)]
    result = traces_ingest(items=items)
    assert result.accepted == 30 and result.rejected == []


def test_pruning_takes_the_statistics_of_unregistered_names_with_their_traces(registry):
    runtime = client_for("assistant")
    runtime.post("/api/v1/traces/", [trace(1, tool="junk.name_1")], format="json")
    tool_refresh(tool_name="junk.name_1")
    assert ToolStats.objects.filter(tool_name="junk.name_1").exists()
    assert InferredContract.objects.filter(tool_name="junk.name_1").exists()
    Trace.objects.update(occurred_at=timezone.now() - timedelta(days=400))
    assert traces_prune() == 1
    assert not ToolStats.objects.filter(tool_name="junk.name_1").exists()
    assert not InferredContract.objects.filter(tool_name="junk.name_1").exists()


def test_drift_evidence_names_the_applications_whose_traces_showed_it(registry):
    high = RiskLevel.objects.get(name="high")
    high.min_support = 10
    high.save()
    traces_ingest(items=enumerate(delete_call(n, extra=True) for n in range(30)))
    assistant = client_for("assistant")
    assistant.post(
        "/api/v1/traces/",
        [delete_call(n, run="a", extra=True) for n in range(40)],
        format="json",
    )
    result = tool_refresh(tool_name="calendar.delete_event")
    assert result.ticket_id is not None
    evidence = ReviewTicket.objects.get(pk=result.ticket_id).evidence
    assert evidence["applications"] == {"assistant": 40, "operator": 30}


def test_import_traces_attributes_a_file_to_a_named_application(registry, tmp_path):
    client_for("assistant")
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(trace(n)) for n in range(3)))
    call_command("import_traces", str(path), "--application", "assistant", "--no-progress")
    assert set(Trace.objects.values_list("application__name", flat=True)) == {"assistant"}
    with pytest.raises(CommandError, match="no application 'nope'"):
        call_command("import_traces", str(path), "--application", "nope", "--no-progress")
