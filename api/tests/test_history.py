"""The history of a tool obeys the rules of the current contract: risk ceiling and permissions."""

import pytest

from registry.models import Application, Permission, RiskLevel, Tool
from reviews.services import registry_import
from tests.helpers import client_for, contract

pytestmark = [pytest.mark.django_db, pytest.mark.both_read_paths]


@pytest.fixture
def history(vocabulary):
    """calendar.find_events: v1 low and read, v2 high with delete, v3 low and read again."""
    for overrides in (
        {},
        {"risk": "high", "permissions": ["read", "delete"], "description": "Find and purge."},
        {"description": "Find calendar events, again read-only."},
    ):
        registry_import(data=[contract(**overrides)], approve=True)
    return Tool.objects.get(name="calendar.find_events")


def versions(client) -> list[int]:
    response = client.get("/api/v1/tools/calendar.find_events/versions/")
    assert response.status_code == 200, response.content
    return [item["version"] for item in response.json()]


def test_it_shows_every_approved_version_to_an_unrestricted_application(history):
    assert versions(client_for("assistant")) == [3, 2, 1]


def test_it_hides_historic_versions_above_the_risk_ceiling(history):
    Application.objects.create(
        name="cautious",
        all_tools=True,
        all_permissions=True,
        max_risk=RiskLevel.objects.get(name="low"),
    )
    assert versions(client_for("cautious")) == [3, 1]


def test_it_hides_historic_versions_with_a_forbidden_permission(history):
    application = Application.objects.create(name="reader", all_tools=True)
    application.allowed_permissions.set(Permission.objects.filter(name="read"))
    assert versions(client_for("reader")) == [3, 1]


def test_it_answers_404_for_a_tool_whose_current_version_is_hidden(history):
    Application.objects.create(
        name="nothing", all_tools=True, max_risk=RiskLevel.objects.get(name="low")
    )
    registry_import(data=[contract(risk="high", description="High again.")], approve=True)
    response = client_for("nothing").get("/api/v1/tools/calendar.find_events/versions/")
    assert response.status_code == 404
