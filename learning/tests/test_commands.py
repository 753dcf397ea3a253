"""learning's commands: ``import_traces``, ``refresh_contracts``, ``export_contracts``."""

import json

import pytest
from django.core.management import CommandError, call_command

from learning.ingest import traces_ingest
from learning.models import Trace
from tests.helpers import event_call

pytestmark = pytest.mark.django_db


def test_import_traces_reports_bad_lines_and_keeps_good_ones(get_event, tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    lines = [
        json.dumps(event_call(1)),
        "{broken",
        json.dumps(event_call(2, status="maybe")),
        "",
        json.dumps(event_call(3)),
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
    path.write_text("\n".join(json.dumps(event_call(i)) for i in range(30)) + "\n")
    call_command("import_traces", str(path), "--no-progress", "--batch-size", "7")
    call_command("import_traces", str(path), "--no-progress")
    assert "0 traces stored, 30 duplicates skipped" in capsys.readouterr().out
    assert Trace.objects.count() == 30


def test_export_contracts_prints_the_approved_contracts_as_a_json_list(get_event, capsys):
    call_command("export_contracts")
    documents = json.loads(capsys.readouterr().out)
    assert [document["name"] for document in documents] == ["calendar.get_event"]


def test_refresh_contracts_command_and_inferred_export(get_event, capsys):
    traces_ingest(items=enumerate(event_call(i) for i in range(40)))
    call_command("refresh_contracts", "--no-progress")
    call_command("export_contracts", "--inferred")
    out = capsys.readouterr().out
    documents = json.loads(out[out.index("[") :])
    assert documents[0]["name"] == "calendar.get_event"
    assert documents[0]["support"] == 40
    assert {"requires", "produces", "risk", "input_schema", "cost"} <= set(documents[0])


def test_refresh_contracts_says_which_names_are_not_in_the_registry(get_event, capsys):
    traces_ingest(items=enumerate(event_call(i) for i in range(3)))
    traces_ingest(
        items=enumerate(event_call(i, run="x", tool="calendar.unheard_of") for i in range(2))
    )
    call_command("refresh_contracts", "--no-progress")
    assert capsys.readouterr().out.strip() == (
        "Refreshed 2 tool(s): 1 in the registry and 1 seen only in traces (not registered; "
        "0 proposed as a new tool). 0 drifted, 0 with a review ticket."
    )
