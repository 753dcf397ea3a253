import json

import pytest
from django.core.management import CommandError, call_command

from registry.models import Application, ContractVersion, StateVariable, Tool
from registry.services import ImportInvalid, contracts_export
from reviews.models import AuditEntry, ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db

VOCABULARY = [
    {"name": "event_query", "description": "What the user asked to find"},
    {"name": "event_id", "aliases": ["eventId"]},
    {"name": "event_details"},
]


def registry_file(*tools, **extra) -> dict:
    return {
        "state_variables": VOCABULARY,
        "permissions": [{"name": "read"}],
        "tools": list(tools),
        **extra,
    }


def test_it_publishes_with_approve():
    result = registry_import(data=registry_file(contract()), approve=True)
    assert result.published == ["calendar.find_events"]
    tool = Tool.objects.get(name="calendar.find_events")
    assert tool.current_version.status == ContractVersion.Status.APPROVED
    assert tool.current_version.number == 1
    assert AuditEntry.objects.filter(tool=tool, action="published").count() == 1


def test_it_proposes_without_approve():
    registry_import(data=registry_file(contract()), approve=True)
    changed = contract(description="Find events by text; returns the best match.")
    result = registry_import(data=registry_file(changed))
    assert result.proposed == ["calendar.find_events"]
    ticket = ReviewTicket.objects.get(status="open")
    assert ticket.kind == ReviewTicket.Kind.CHANGE
    assert ticket.proposed.status == ContractVersion.Status.PROPOSED
    assert ticket.base.number == 1
    assert Tool.objects.get().current_version.number == 1


def test_it_opens_a_new_tool_ticket_for_an_unknown_tool():
    registry_import(data=registry_file(contract()))
    ticket = ReviewTicket.objects.get()
    assert ticket.kind == ReviewTicket.Kind.NEW_TOOL
    assert ticket.base is None
    assert Tool.objects.get().current_version is None


def test_it_skips_an_unchanged_contract():
    registry_import(data=registry_file(contract()), approve=True)
    result = registry_import(data=registry_file(contract()))
    assert result.unchanged == ["calendar.find_events"]
    assert ReviewTicket.objects.filter(status="open").count() == 0


def test_it_writes_nothing_when_one_tool_is_invalid():
    bad = contract(name="calendar.get_event", requires=["missing_var"], risk="extreme")
    with pytest.raises(ImportInvalid) as caught:
        registry_import(data=registry_file(contract(), bad), approve=True)
    assert (
        "calendar.get_event: requires: unknown state variable 'missing_var'"
        in caught.value.problems
    )
    assert any(
        p.startswith("calendar.get_event: risk: unknown risk level") for p in caught.value.problems
    )
    assert Tool.objects.count() == 0
    assert StateVariable.objects.count() == 0


def test_it_accepts_a_bare_list_of_contracts(vocabulary):
    result = registry_import(data=[contract()], approve=True)
    assert result.published == ["calendar.find_events"]


def test_it_resolves_dependencies_within_the_file():
    first = contract()
    second = contract(
        name="calendar.get_event",
        requires=["eventId"],
        produces=["event_details"],
        dependencies=["calendar.find_events"],
    )
    registry_import(data=registry_file(first, second), approve=True)
    version = Tool.objects.get(name="calendar.get_event").current_version
    assert version.requires == ["event_id"]
    assert version.dependencies == ["calendar.find_events"]


def test_it_reports_a_dependency_cycle_across_the_file():
    first = contract(dependencies=["calendar.get_event"])
    second = contract(name="calendar.get_event", dependencies=["calendar.find_events"])
    with pytest.raises(ImportInvalid) as caught:
        registry_import(data=registry_file(first, second), approve=True)
    assert any("cycle:" in problem for problem in caught.value.problems)


def test_it_imports_applications_and_policies():
    application = {
        "name": "clinical",
        "max_risk": "medium",
        "allowed_permissions": ["read"],
        "enabled_tools": ["calendar.find_events"],
        "policy": {"mandate": "Cite sources.", "rules": [], "config_params": []},
    }
    registry_import(data=registry_file(contract(), applications=[application]), approve=True)
    clinical = Application.objects.get(name="clinical")
    assert clinical.max_risk.name == "medium"
    assert list(clinical.enabled_tools.values_list("name", flat=True)) == ["calendar.find_events"]
    assert clinical.policy.mandate == "Cite sources."


def test_it_round_trips_every_field_through_export():
    full = contract(
        output_schema={"type": "object", "properties": {"event_id": {"type": "string"}}},
        effects={
            "event_id": {
                "merge": "replace",
                "preserve_across_turns": True,
                "prompt_template_var": "event",
            }
        },
        resource_limits={"timeout_ms": 2000, "memory_mb": 64, "max_output_bytes": 65536},
        config_params=[{"key": "max_results", "default": 10, "normalizer": "int"}],
        status="active",
    )
    registry_import(data=registry_file(full), approve=True)
    exported = contracts_export()
    assert len(exported) == 1
    assert exported[0]["version"] == 1
    for key, value in full.items():
        assert exported[0][key] == value, key
    # and back in: unchanged
    result = registry_import(data=registry_file(*exported))
    assert result.unchanged == ["calendar.find_events"]


def test_the_command_exits_non_zero_and_lists_every_problem(tmp_path, capsys):
    path = tmp_path / "registry.json"
    bad = contract(requires=["nope"], permissions=["fly"])
    path.write_text(json.dumps(registry_file(bad)))
    with pytest.raises(CommandError, match="2 problem"):
        call_command("import_tools", str(path), "--approve")
    err = capsys.readouterr().err
    assert "calendar.find_events: requires: unknown state variable 'nope'" in err
    assert "calendar.find_events: permissions: unknown permission 'fly'" in err
    assert Tool.objects.count() == 0


def test_the_command_reports_invalid_json(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("import_tools", str(path))
