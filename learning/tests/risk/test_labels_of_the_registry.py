"""The labels risk suggestions learn from (``learning.selectors.risk_labels``): each approved
tool's risk with what its contract and its traces say of it."""

import pytest

from learning.models import InferredContract
from learning.risk import prepare_labels
from learning.selectors import risk_labels
from registry.models import Tool
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db


def test_labels_carry_requires_and_the_preconditions_traces_showed(vocabulary):
    registry_import(
        data=[
            contract(name="calendar.find_events"),
            contract(name="calendar.get_event", requires=["event_id"], produces=[], risk="medium"),
        ],
        approve=True,
    )
    InferredContract.objects.create(
        tool_name="calendar.get_event",
        tool=Tool.objects.get(name="calendar.get_event"),
        document={"name": "calendar.get_event", "evidence": {"gated": ["event_id"]}},
        support=40,
    )

    labels = {label["name"]: label for label in risk_labels()}

    assert labels["calendar.get_event"]["gated"] == ["event_id"]
    assert labels["calendar.get_event"]["requires"] == ["event_id"]
    assert not labels["calendar.find_events"]["gated"]  # nothing inferred yet
    prepared = {tool["name"]: tool for tool in prepare_labels(labels.values())}
    # find_events produces what get_event requires; get_event's calls failed without it.
    assert "o:consumed" in prepared["calendar.find_events"]["features"]
    assert "o:gated" in prepared["calendar.get_event"]["features"]
    assert "o:consumed" not in prepared["calendar.get_event"]["features"]
