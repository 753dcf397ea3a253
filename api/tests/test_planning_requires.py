"""Plans walk what each step requires, from the given state, in both shapes of state."""

import pytest

from api.planning import validate_plan
from reviews.services import registry_import
from tests.helpers import contract

FIND = contract()  # requires event_query, produces event_id
UPDATE = contract(
    "calendar.update_event",
    input_schema={"type": "object", "properties": {"event_id": {"type": "string"}}},
    requires=["event_id", "new_time"],
    produces=["event_updated"],
    permissions=["write"],
)
CONTRACTS = {FIND["name"]: FIND, UPDATE["name"]: UPDATE}
ALIASES = {"eventId": "event_id", "evt_id": "event_id"}


def find(query="team sync"):
    return {"tool": "calendar.find_events", "args": {"event_query": query}}


def update(event_id="evt_9"):
    return {"tool": "calendar.update_event", "args": {"event_id": event_id}}


def producers(variable):
    return {"event_id": ["calendar.find_events", "calendar.search"]}.get(variable, [])


def check(plan, state, **kwargs):
    return validate_plan(
        plan=plan, contracts=CONTRACTS, policy=None, state=state, aliases=ALIASES,
        producers=producers, **kwargs,
    )  # fmt: skip


def test_it_rejects_a_step_whose_requires_the_state_lacks_naming_their_producers():
    result = check([update()], {"new_time": "10:00"})

    assert result["valid"] is False
    (violation,) = result["violations"]
    assert violation["step"] == 0 and violation["invariant"] == "unmet_requires"
    assert violation["action"] == "rejected"
    assert violation["missing"] == ["event_id"]
    assert violation["producers"] == {"event_id": ["calendar.find_events", "calendar.search"]}
    assert "calendar.find_events" in violation["rule"]


def test_it_rejects_a_step_placed_before_the_step_that_produces_what_it_requires():
    result = check([update(), find()], ["event_query", "new_time"])

    assert [(v["step"], v["invariant"]) for v in result["violations"]] == [(0, "unmet_requires")]


def test_it_accepts_requires_produced_by_an_earlier_step():
    result = check([find(), update()], ["event_query", "new_time"])

    assert result["valid"] is True and result["violations"] == []


def test_it_resolves_aliases_in_the_state():
    result = check([update()], {"eventId": "evt_9", "new_time": "10:00"})

    assert result["valid"] is True


def test_it_reports_a_missing_variable_once_at_the_first_step_needing_it():
    result = check([update(), update()], ["event_id"])

    assert [(v["step"], v["missing"]) for v in result["violations"]] == [(0, ["new_time"])]


def test_it_says_when_no_tool_produces_a_missing_variable():
    (violation,) = check([update()], ["event_id"])["violations"]

    assert violation["producers"] == {"new_time": []}
    assert "no tool produces new_time" in violation["rule"]


def test_it_answers_a_single_call_as_a_plan_of_one_step():
    assert check([find()], [])["violations"][0]["missing"] == ["event_query"]
    assert check([find()], ["event_query"])["valid"] is True


@pytest.mark.parametrize(
    "state", [["event_query", "new_time"], {"event_query": "x", "new_time": 1}]
)
def test_both_shapes_of_state_give_the_same_answer(state):
    result = check([find(), update()], state)

    assert result["valid"] is True


@pytest.mark.parametrize("state", ["event_id", [1, 2], 7])
def test_it_rejects_a_state_of_neither_shape(state):
    result = check([find()], state)

    assert (None, "malformed_request") in [
        (v["step"], v["invariant"]) for v in result["violations"]
    ]


# --- through the API, over what the application sees --------------------------------------


@pytest.fixture
def calendar(vocabulary, runtime_client_factory):
    registry_import(data=[FIND, UPDATE], approve=True)
    return runtime_client_factory("assistant")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "state", [["evt_id", "new_time"], {"eventId": "evt_9", "new_time": "10:00"}]
)
def test_the_endpoint_takes_either_shape_of_state_and_resolves_aliases(calendar, state):
    response = calendar.post(
        "/api/v1/plans/validate/", {"plan": [update()], "state": state}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["valid"] is True


@pytest.mark.django_db
def test_the_endpoint_names_the_visible_producers_of_what_a_step_lacks(calendar):
    response = calendar.post(
        "/api/v1/plans/validate/", {"plan": [update()], "state": ["new_time"]}, format="json"
    )

    (violation,) = response.json()["violations"]
    assert violation["invariant"] == "unmet_requires"
    assert violation["missing"] == ["event_id"]
    assert violation["producers"] == {"event_id": ["calendar.find_events"]}


@pytest.mark.django_db
def test_the_endpoint_refuses_a_state_of_neither_shape_naming_the_field(calendar):
    for state in ("event_id", 7, [{"a": 1}]):
        response = calendar.post(
            "/api/v1/plans/validate/", {"plan": [find()], "state": state}, format="json"
        )
        assert response.status_code == 400
        assert any(field.startswith("state") for field in response.json()["error"]["fields"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    "state", [["event_query", "new_time"], {"event_query": "x", "new_time": 1}]
)
def test_the_filter_takes_either_shape_of_state(calendar, state):
    response = calendar.post(
        "/api/v1/filter/", {"state": state, "goal": ["event_updated"]}, format="json"
    )

    assert response.status_code == 200
    assert [tool["name"] for tool in response.json()["tools"]] == ["calendar.find_events"]
