"""Helpers the tests share (the fixtures are in the root ``conftest.py``; tests never import
those by name): a valid contract document, a runtime's API client, an admin login, waiting
for a worker, a database that fails."""

import time

from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from rest_framework.test import APIClient

from api.services import runtime_token_create


def contract(name: str = "calendar.find_events", **overrides) -> dict:
    """A valid contract document to start a test from."""
    document = {
        "name": name,
        "description": "Find calendar events matching a free-text query.",
        "input_schema": {
            "type": "object",
            "properties": {"event_query": {"type": "string"}},
            "required": ["event_query"],
            "additionalProperties": False,
        },
        "requires": ["event_query"],
        "produces": ["event_id"],
        "risk": "low",
        "permissions": ["read"],
        "cost": {"latency_ms_p50": 80, "latency_ms_p95": 200, "error_rate": 0.01},
    }
    document.update(overrides)
    return document


def client_for(application: str, scopes=("contracts:read", "traces:write")) -> APIClient:
    """An API client authenticated as a runtime of the named application (created if missing)."""
    _, raw = runtime_token_create(application_name=application, scopes=list(scopes))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def login(page, base: str, username: str, password: str) -> None:
    """Log a Playwright page into the admin."""
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


def wait_for(predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def database_fails(monkeypatch, message: str = "could not connect to server") -> None:
    """From now on every query fails as it does when the database is down."""

    def fail(*args, **kwargs):
        raise OperationalError(message)

    monkeypatch.setattr(CursorWrapper, "execute", fail)
