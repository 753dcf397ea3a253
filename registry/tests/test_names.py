"""Names are checked whole, and no two tools reach a model under one function name."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from registry.models import StateVariable, Tool
from registry.services import (
    ImportInvalid,
    contract_validate,
    contract_version_create,
    registry_file_check,
    state_variables_add,
)
from registry.validation import ContractInvalid, RegistryContext, contract_check
from tests.helpers import contract

pytestmark = pytest.mark.django_db

TRAILING = ["\n", "\r\n", " ", "\t"]


@pytest.mark.parametrize("tail", TRAILING, ids=repr)
def test_it_refuses_a_tool_name_with_a_trailing_newline_or_space(vocabulary, tail):
    Tool.objects.create(name="calendar.find_events")
    with pytest.raises(ContractInvalid) as caught:
        contract_validate(document=contract(name=f"calendar.find_events{tail}"))
    assert "name" in caught.value.errors
    with pytest.raises(ValidationError) as refused:
        Tool(name=f"calendar.list_events{tail}").full_clean()
    assert "name" in refused.value.message_dict
    assert list(Tool.objects.values_list("name", flat=True)) == ["calendar.find_events"]


@pytest.mark.parametrize("tail", TRAILING, ids=repr)
def test_it_refuses_a_state_variable_name_with_a_trailing_newline(vocabulary, tail):
    with pytest.raises(ValidationError) as refused:
        StateVariable(name=f"calendar_query{tail}").full_clean()
    assert "name" in refused.value.message_dict
    assert state_variables_add(names=[f"calendar_query{tail}"], description="") == {}
    with pytest.raises(ImportInvalid) as caught:
        registry_file_check(data={"state_variables": [{"name": f"calendar_query{tail}"}]})
    assert any("not a valid variable name" in line for line in caught.value.problems)
    assert not StateVariable.objects.filter(name__startswith="calendar_query").exists()


def test_it_refuses_a_name_exporting_as_another_tools_and_names_that_tool():
    context = RegistryContext(
        variables={"event_query", "event_id"}, risks={"low"}, permissions={"read"},
        tools={"aa_.y"},
    )  # fmt: skip
    _, errors = contract_check(contract(name="aa._y"), context=context)
    assert errors["name"] == [
        "exports as 'aa___y', the function name of the tool 'aa_.y': "
        "a model could not tell the two apart"
    ]
    _, errors = contract_check(contract(name="aa_.y"), context=context)  # itself, changed
    assert "name" not in errors


def test_one_import_cannot_bring_two_names_that_export_alike(vocabulary):
    with pytest.raises(ImportInvalid) as caught:
        registry_file_check(data=[contract(name="aa_.y"), contract(name="aa._y")])
    text = "\n".join(caught.value.problems)
    assert "aa._y: name: exports as 'aa___y', the function name of the tool 'aa_.y'" in text
    assert "aa_.y: name: exports as 'aa___y', the function name of the tool 'aa._y'" in text
    assert not Tool.objects.exists()


def test_the_database_never_holds_two_tools_exporting_alike(db):
    Tool.objects.create(name="aa_.y")
    with pytest.raises(IntegrityError), transaction.atomic():
        Tool.objects.create(name="aa._y")
    assert Tool.objects.get().export_name == "aa___y"


def test_a_tool_created_after_the_check_is_refused_with_the_same_words(vocabulary):
    """A proposal validated before another transaction created the clashing tool."""
    stale = contract_validate(document=contract(name="aa._y"))
    Tool.objects.create(name="aa_.y")  # by another transaction, since the check
    with pytest.raises(ContractInvalid) as caught:
        contract_version_create(document=stale, author=None)
    assert caught.value.errors["name"][0].startswith("exports as 'aa___y'")
    assert "'aa_.y'" in caught.value.errors["name"][0]
    assert list(Tool.objects.values_list("name", flat=True)) == ["aa_.y"]


def test_a_renamed_tool_keeps_its_export_name_in_step(db):
    tool = Tool.objects.create(name="calendar.find_events")
    tool.name = "calendar.search"
    tool.save(update_fields=["name"])
    tool.refresh_from_db()
    assert tool.export_name == "calendar__search"
