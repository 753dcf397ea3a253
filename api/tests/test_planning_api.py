"""The filter and plan-check endpoints over a runtime's visible contracts."""

import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.cache import cache

from api.planning import SCHEMA_WORK_BUDGET
from registry import jsonschema_re2
from registry.models import Application, ContractVersion, Tool
from reviews.services import registry_import

pytestmark = pytest.mark.django_db
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "retrieval_llm.json"


@pytest.fixture
def clinical(runtime_client_factory):
    registry_import(data=json.loads(EXAMPLE.read_text()), approve=True)
    return runtime_client_factory("clinical")


def test_a_plan_is_corrected_and_checked_against_the_policy(clinical):
    plan = [
        {"tool": "retrieval_llm", "args": {"query": "statins in CKD", "subquestion_ids": ["q1"]}},
        {"tool": "retrieval_llm",
         "args": {"query": "statin interactions", "subquestion_ids": ["q2"], "web_search": True}},
        {"tool": "source_link_retrieval", "args": {"passage_set_id": "ps_1"}},
    ]  # fmt: skip
    body = clinical.post(
        "/api/v1/plans/validate/", {"plan": plan, "state": ["question"]}, format="json"
    ).json()
    assert body["valid"] is True
    assert body["plan"][0]["args"]["web_search"] is True
    assert [step["tool"] for step in body["plan"]] == ["retrieval_llm", "source_link_retrieval"]
    actions = {(v["invariant"], v["action"]) for v in body["violations"]}
    assert ("subquestion-ids-need-web-search", "corrected") in actions
    assert ("one-multi-subquestion-step", "dropped") in actions
    assert "cite" in body["mandate"]


def test_the_policy_rejects_a_plan_without_sources(clinical):
    plan = [{"tool": "retrieval_llm", "args": {"query": "statins in CKD"}}]
    body = clinical.post("/api/v1/plans/validate/", {"plan": plan}, format="json").json()
    assert body["valid"] is False
    assert any(v["invariant"] == "medical-plans-retrieve-and-cite" and v["action"] == "rejected"
               for v in body["violations"])  # fmt: skip


def test_a_tool_the_application_cannot_see_is_unknown_to_its_plans(clinical):
    from tests.helpers import contract

    registry_import(
        data=[contract(requires=["research_question"], produces=[], permissions=["read"])],
        approve=True,
    )
    plan = [{"tool": "calendar.find_events", "args": {"event_query": "x"}}]
    body = clinical.post("/api/v1/plans/validate/", {"plan": plan}, format="json").json()
    assert body["valid"] is False
    assert body["violations"][0]["invariant"] == "unknown_tool"


def test_bad_plan_bodies_get_a_400_naming_the_field(clinical):
    response = clinical.post("/api/v1/plans/validate/", {"plan": "nope"}, format="json")
    assert response.status_code == 400
    assert "plan" in response.json()["error"]["fields"]


def test_a_schema_too_costly_to_check_answers_422_naming_the_step_and_tool(clinical, monkeypatch):
    definitions = {"d0": {"type": "string"}}
    for level in range(1, 31):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        definitions[f"d{level}"] = {"anyOf": [below, below]}
    hostile = {
        "type": "object",
        "$defs": definitions,
        "properties": {"query": {"$ref": "#/$defs/d30"}},
    }
    # Past contract validation, as a row stored before the schema limits were enforced.
    ContractVersion.objects.filter(tool__name="retrieval_llm").update(input_schema=hostile)
    plan = [
        {"tool": "source_link_retrieval", "args": {"passage_set_id": "ps_1"}},
        {"tool": "retrieval_llm", "args": {"query": 2024}},
    ]
    spent = Counter()
    spend = jsonschema_re2._Budget.spend

    def counted(budget, units=1):
        spent["evaluations"] += units
        return spend(budget, units)

    monkeypatch.setattr(jsonschema_re2._Budget, "spend", counted)

    response = clinical.post("/api/v1/plans/validate/", {"plan": plan}, format="json")

    # The step's budget, not 2^30 branches; step 0's own check is a handful more.
    assert SCHEMA_WORK_BUDGET < spent["evaluations"] <= SCHEMA_WORK_BUDGET + 100
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "schema_too_costly"
    assert error["message"].startswith("step 1 (retrieval_llm): its args cannot be checked")
    assert error["fields"] == {"plan[1]": [error["message"]]}


def test_the_filter_exposes_the_next_step_toward_the_goal(clinical):
    body = clinical.post(
        "/api/v1/filter/", {"state": ["research_question"], "goal": ["source_links"]}, format="json"
    ).json()
    assert [tool["name"] for tool in body["tools"]] == ["retrieval_llm"]
    assert body["plan"] == ["retrieval_llm", "source_link_retrieval"]
    assert body["tools"][0]["version"] == 1


def test_the_filter_names_what_nothing_produces(clinical):
    body = clinical.post(
        "/api/v1/filter/", {"state": [], "goal": ["no_such_variable"]}, format="json"
    ).json()
    assert body["tools"] == [] and "no_such_variable" in body["unreachable"]


def test_the_filter_resolves_aliases_and_follows_visibility(clinical):
    from registry.models import StateVariable

    StateVariable.objects.filter(name="research_question").update(aliases=["researchQuestion"])
    body = clinical.post(
        "/api/v1/filter/", {"state": ["researchQuestion"], "goal": ["source_links"]}, format="json"
    ).json()
    assert [tool["name"] for tool in body["tools"]] == ["retrieval_llm"]
    application = Application.objects.get(name="clinical")
    application.all_tools = False
    application.save()
    application.enabled_tools.set(Tool.objects.filter(name="source_link_retrieval"))
    cache.clear()  # the revision moved; its cached copy is dropped on commit in production
    body = clinical.post(
        "/api/v1/filter/", {"state": ["research_question"], "goal": ["source_links"]}, format="json"
    ).json()
    assert body["tools"] == []


def test_the_filter_validates_its_body(clinical):
    response = clinical.post("/api/v1/filter/", {"state": "x", "goal": []}, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert "state" in fields and "goal" in fields


@pytest.mark.parametrize("tool", [["a", "b"], {"name": "x"}, 7, None, True])
def test_a_step_whose_tool_is_not_a_name_is_a_malformed_step(clinical, tool):
    plan = [{"tool": tool, "args": {}}, {"tool": "retrieval_llm", "args": {"query": "statins"}}]
    response = clinical.post("/api/v1/plans/validate/", {"plan": plan}, format="json")

    assert response.status_code == 200
    assert response.json()["violations"][0]["invariant"] == "malformed_step"
