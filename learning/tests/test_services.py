import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import ProtectedError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from learning.ingest import traces_fold_pending, traces_ingest
from learning.models import DriftReport, InferredContract, ToolStats, Trace
from learning.services import tool_refresh, tools_with_new_traces, traces_prune
from registry.models import RiskLevel
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db


def call(
    step: int,
    *,
    run: str = "run",
    tool: str = "calendar.get_event",
    event: str | None = None,
    extra_after: dict | None = None,
    status: str = "success",
    with_id: bool = True,
) -> dict:
    event = event or f"evt_{run}_{step}"
    before = {"event_id": event, "user_id": "u_1"} if with_id else {"user_id": "u_1"}
    after = {**before, "event_details": f"details of {event}", **(extra_after or {})}
    return {
        "trace_id": run, "step": step, "tool": tool, "args": {"event_id": event} if with_id else {},
        "status": status, "state_before": before,
        "state_after": after if status == "success" else before,
        "duration_ms": 40 + step % 20, "occurred_at": timezone.now().isoformat(),
    }  # fmt: skip


def test_it_stores_valid_traces_and_counts_duplicates(get_event):
    items = [call(i) for i in range(5)] + [call(0)]
    result = traces_ingest(items=enumerate(items))
    assert (result.accepted, result.duplicates, result.rejected) == (5, 1, [])
    result = traces_ingest(items=enumerate(items))
    assert (result.accepted, result.duplicates) == (0, 6)
    assert Trace.objects.count() == 5


def test_it_keeps_an_unknown_tool_flagged(get_event):
    traces_ingest(items=enumerate([call(1, tool="crm.lookup_account")]))
    trace = Trace.objects.get()
    assert trace.unknown_tool and trace.tool is None


def test_ingest_stores_and_the_fold_counts_each_inserted_trace_once(get_event):
    traces_ingest(items=enumerate(call(i) for i in range(40)))
    traces_ingest(items=enumerate(call(i) for i in range(45)))  # 40 duplicates, 5 new
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


def test_refresh_folds_traces_an_interrupted_ingest_left_pending(get_event):
    traces_ingest(items=enumerate(call(i) for i in range(10)))
    tool_refresh(tool_name="calendar.get_event")
    Trace.objects.filter(step__lt=3).update(aggregated=False)  # as if a fold had been lost
    assert tools_with_new_traces() == ["calendar.get_event"]
    assert tool_refresh(tool_name="calendar.get_event").folded == 3
    assert not Trace.objects.filter(aggregated=False).exists()


def test_a_faithful_tool_infers_its_contract_and_does_not_drift(get_event):
    traces_ingest(items=enumerate(call(i) for i in range(40)))
    result = tool_refresh(tool_name="calendar.get_event")
    inferred = InferredContract.objects.get(tool_name="calendar.get_event").document
    assert inferred["requires"] == ["event_id"]
    assert inferred["produces"] == ["event_details"]
    assert result.drift == []
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def drifted(n: int = 40, run: str = "drift") -> list[dict]:
    return [call(i, run=run, extra_after={"event_updated": True}) for i in range(n)]


def test_a_drifted_high_risk_tool_opens_one_ticket_with_evidence(get_event):
    traces_ingest(items=enumerate(drifted()))
    result = tool_refresh(tool_name="calendar.get_event")
    ticket = ReviewTicket.objects.get(kind="drift")
    assert result.ticket_id == ticket.pk
    assert "event_updated" in ticket.proposed.produces
    assert ticket.base == get_event.current_version
    assert any(item["field"] == "produces" for item in ticket.evidence["drift"])
    assert ticket.evidence["traces_since_version"] == 40
    # a rerun, and new evidence of the same drift: still one ticket, evidence updated
    tool_refresh(tool_name="calendar.get_event")
    traces_ingest(items=enumerate(drifted(10, run="more")))
    tool_refresh(tool_name="calendar.get_event")
    assert ReviewTicket.objects.filter(kind="drift").count() == 1
    ticket.refresh_from_db()
    assert ticket.evidence["traces_since_version"] == 50
    assert DriftReport.objects.count() == 1


def test_a_drift_that_grows_while_its_ticket_is_open_stays_on_that_ticket(get_event):
    traces_ingest(items=enumerate(drifted()))
    tool_refresh(tool_name="calendar.get_event")
    ticket = ReviewTicket.objects.get(kind="drift")
    first = (ticket.fingerprint, ticket.proposed_id)
    more = {"event_updated": True, "new_time": "2026-12-01T09:30"}
    traces_ingest(items=enumerate(call(i, run="more", extra_after=more) for i in range(200)))
    result = tool_refresh(tool_name="calendar.get_event")
    assert ReviewTicket.objects.filter(kind="drift").count() == 1
    ticket.refresh_from_db()
    assert result.ticket_id == ticket.pk and ticket.status == "open"
    assert {"event_updated", "new_time"} <= set(ticket.proposed.produces)
    assert (ticket.fingerprint, ticket.proposed_id) != first
    assert ticket.audit_entries.filter(action="proposal_updated").count() == 1


def test_drift_waits_for_min_support(get_event):
    traces_ingest(items=enumerate(drifted(10)))
    assert tool_refresh(tool_name="calendar.get_event").drift == []
    assert (
        not ReviewTicket.objects.exists() or not ReviewTicket.objects.filter(kind="drift").exists()
    )


def test_drift_on_a_medium_tool_is_a_report_not_a_ticket(get_event):
    RiskLevel.objects.filter(name="high").update(ticket_on_drift=False)
    traces_ingest(items=enumerate(drifted()))
    tool_refresh(tool_name="calendar.get_event")
    assert DriftReport.objects.get().ticket is None
    assert not ReviewTicket.objects.filter(kind="drift").exists()


def test_a_level_with_auto_approve_publishes_a_clean_inferred_change(get_event):
    RiskLevel.objects.filter(name="high").update(ticket_on_drift=False, auto_approve_inferred=True)
    traces_ingest(items=enumerate(drifted()))
    result = tool_refresh(tool_name="calendar.get_event")
    assert result.published
    get_event.refresh_from_db()
    assert "event_updated" in get_event.current_version.produces
    assert get_event.current_version.source == "inferred"


def test_prune_deletes_only_folded_traces_past_retention(get_event):
    traces_ingest(items=enumerate(call(i) for i in range(40)))
    traces_fold_pending()
    Trace.objects.filter(step__lt=30).update(occurred_at=timezone.now() - timedelta(days=90))
    Trace.objects.filter(step__lt=5).update(aggregated=False)  # not folded yet: kept
    assert traces_prune(older_than=timedelta(days=30)) == 25
    assert Trace.objects.count() == 15
    assert ToolStats.objects.get().traces_total == 40  # the aggregates survive


def test_import_traces_reports_bad_lines_and_keeps_good_ones(get_event, tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    lines = [
        json.dumps(call(1)),
        "{broken",
        json.dumps(call(2, status="maybe")),
        "",
        json.dumps(call(3)),
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match="2 bad line"):
        call_command("import_traces", str(path), "--no-progress")
    captured = capsys.readouterr()
    assert "line 2: (line): not valid JSON" in captured.err
    assert "line 3: status: must be 'success' or 'error'" in captured.err
    assert Trace.objects.count() == 2


def test_import_traces_is_idempotent(get_event, tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(call(i)) for i in range(30)) + "\n")
    call_command("import_traces", str(path), "--no-progress", "--batch-size", "7")
    call_command("import_traces", str(path), "--no-progress")
    assert "0 traces stored, 30 duplicates skipped" in capsys.readouterr().out
    assert Trace.objects.count() == 30


def test_export_contracts_prints_the_approved_contracts_as_a_json_list(get_event, capsys):
    call_command("export_contracts")
    documents = json.loads(capsys.readouterr().out)
    assert [document["name"] for document in documents] == ["calendar.get_event"]


def test_refresh_contracts_command_and_inferred_export(get_event, capsys):
    traces_ingest(items=enumerate(call(i) for i in range(40)))
    call_command("refresh_contracts", "--no-progress")
    call_command("export_contracts", "--inferred")
    out = capsys.readouterr().out
    documents = json.loads(out[out.index("[") :])
    assert documents[0]["name"] == "calendar.get_event"
    assert documents[0]["support"] == 40
    assert {"requires", "produces", "risk", "input_schema", "cost"} <= set(documents[0])


def test_refresh_contracts_says_which_names_are_not_in_the_registry(get_event, capsys):
    traces_ingest(items=enumerate(call(i) for i in range(3)))
    traces_ingest(items=enumerate(call(i, run="x", tool="calendar.unheard_of") for i in range(2)))
    call_command("refresh_contracts", "--no-progress")
    assert capsys.readouterr().out.strip() == (
        "Refreshed 2 tool(s): 1 in the registry and 1 seen only in traces (not registered; "
        "0 proposed as a new tool). 0 drifted, 0 with a review ticket."
    )


def test_refresh_of_an_unknown_tool_name_is_a_clear_error(get_event):
    with pytest.raises(CommandError, match="no traces"):
        call_command("refresh_contracts", "--tool", "nope.nothing", "--no-progress")


def test_a_declared_destructive_tool_approved_at_medium_drifts_nothing_on_a_second_refresh(
    vocabulary,
):
    RiskLevel.objects.filter(name="medium").update(ticket_on_drift=True, min_support=20)
    registry_import(
        data=[
            contract(
                name="calendar.update_event",
                description="Update one calendar event.",
                requires=["event_id"],
                produces=["event_details"],
                input_schema={
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}},
                    "required": ["event_id"],
                },
                annotations={"destructiveHint": True, "readOnlyHint": False},
                risk="medium",  # the reviewer's label, below what the hint alone says
            )
        ],
        approve=True,
    )
    traces_ingest(items=enumerate(call(i, tool="calendar.update_event") for i in range(40)))

    first = tool_refresh(tool_name="calendar.update_event")
    second = tool_refresh(tool_name="calendar.update_event")

    assert first.drift == [] and second.drift == []
    assert not DriftReport.objects.exists()
    assert not ReviewTicket.objects.filter(kind="drift").exists()
    inferred = InferredContract.objects.get(tool_name="calendar.update_event").document
    assert inferred["risk"] == "high"  # the hint is still read: only no drift is made of it


def test_an_effect_the_traces_add_still_raises_the_risk_above_the_approved_label(vocabulary):
    registry_import(
        data={
            "state_variables": [{"name": "deleted_event_id"}],
            "tools": [
                contract(
                    name="calendar.update_event",
                    description="Update one calendar event.",
                    requires=["event_id"],
                    produces=["event_details"],
                    input_schema={
                        "type": "object",
                        "properties": {"event_id": {"type": "string"}},
                        "required": ["event_id"],
                    },
                    risk="medium",
                )
            ],
        },
        approve=True,
    )
    traces = [
        call(i, tool="calendar.update_event", extra_after={"deleted_event_id": f"evt_{i}"})
        for i in range(40)
    ]
    traces_ingest(items=enumerate(traces))

    result = tool_refresh(tool_name="calendar.update_event")

    risk = [item for item in result.drift if item["field"] == "risk"]
    assert risk and risk[0]["added"] == ["high"]


def test_a_tool_traces_name_is_never_deleted_so_traces_need_no_index_by_tool(get_event):
    """``Trace.tool`` has no index: the traces that name a tool arrived after its approval, whose
    audit entries protect it, so deleting it is refused before any query reads the traces."""
    traces_ingest(items=enumerate([call(1)]))
    assert Trace.objects.get().tool == get_event
    with CaptureQueriesContext(connection) as captured, pytest.raises(ProtectedError):
        get_event.delete()
    assert not [query for query in captured if "learning_trace" in query["sql"]]
    assert Trace.objects.get().tool == get_event
