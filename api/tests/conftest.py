import pytest
from rest_framework.test import APIClient

from api.services import runtime_token_create
from conftest import contract
from registry.models import Application, Permission, RiskLevel, Tool
from reviews.services import registry_import


@pytest.fixture
def registry(vocabulary):
    """Four approved tools over three risks and permissions."""
    registry_import(
        data=[
            contract(),
            contract(
                name="calendar.get_event",
                requires=["event_id"],
                produces=["event_details"],
                input_schema={
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}},
                    "required": ["event_id"],
                },
            ),
            contract(
                name="calendar.delete_event",
                requires=["event_id"],
                produces=[],
                risk="high",
                permissions=["delete"],
            ),
            contract(
                name="weather.forecast",
                requires=[],
                produces=[],
                permissions=["external_api"],
                description="Weather forecast for a city.",
            ),
        ],
        approve=True,
    )
    return Tool.objects.all()


def client_for(application: str, scopes=("contracts:read", "traces:write")) -> APIClient:
    _, raw = runtime_token_create(application_name=application, scopes=list(scopes))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def runtime(registry) -> APIClient:
    return client_for("assistant")


@pytest.fixture
def restricted(registry) -> APIClient:
    application = Application.objects.create(
        name="restricted", max_risk=RiskLevel.objects.get(name="medium")
    )
    application.allowed_permissions.set(Permission.objects.filter(name__in=["read", "write"]))
    application.enabled_tools.set(Tool.objects.all())
    return client_for("restricted")
