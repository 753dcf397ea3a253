import pytest

from config.celery_app import app as celery_app
from registry.models import Tool
from reviews.services import registry_import
from tests.helpers import contract


@pytest.fixture
def eager(monkeypatch):
    """Celery runs a queued task where it is queued (the fold a commit queues): the real task,
    no worker."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", True)


@pytest.fixture
def get_event(vocabulary):
    registry_import(
        data=[
            contract(
                name="calendar.get_event",
                description="Read one calendar event by id.",
                requires=["event_id"],
                produces=["event_details"],
                input_schema={
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}},
                    "required": ["event_id"],
                    "additionalProperties": False,
                },
                risk="high",
            )
        ],
        approve=True,
    )
    return Tool.objects.get(name="calendar.get_event")
