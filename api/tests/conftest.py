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


# The read tests run twice: straight to the views (the fast read path's middleware left out),
# and through the fast read path, each application's bundle rendered once a view has answered
# it (as the worker would after a publication) and Celery eager for the renders the fast path
# queues. Both must pass unchanged.
READ_PATH_MODULES = {"test_reads", "test_cache_keys", "test_exports", "test_history"}


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.rsplit(".", 1)[-1] in READ_PATH_MODULES:
        metafunc.parametrize("read_path", ["django", "fast"], indirect=True)


@pytest.fixture(autouse=True)
def read_path(request, monkeypatch):
    path = getattr(request, "param", None)
    if path is not None:
        from config.celery_app import app as celery_app

        from .fast_client import fast, plain

        original = APIClient.__init__

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if path == "fast":
                fast(self, render=True)
            else:
                plain(self)

        monkeypatch.setattr(APIClient, "__init__", init)
        monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    return path or "django"
