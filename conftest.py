"""Shared fixtures: the people of the review workflow and a small vocabulary."""

import pytest
from django.contrib.auth.models import Group

from registry.models import Permission, StateVariable


def _user(django_user_model, username: str, *, reviewer: bool = False, **extra):
    user = django_user_model.objects.create_user(
        username=username, password="pw-" + username, email=f"{username}@example.com", **extra
    )
    if reviewer:
        user.groups.add(Group.objects.get(name="Reviewers"))
    return user


@pytest.fixture
def reviewer(django_user_model):
    return _user(django_user_model, "rita", reviewer=True, is_staff=True)


@pytest.fixture
def second_reviewer(django_user_model):
    return _user(django_user_model, "sam", reviewer=True, is_staff=True)


@pytest.fixture
def proposer(django_user_model):
    return _user(django_user_model, "paul", reviewer=True, is_staff=True)


@pytest.fixture
def outsider(django_user_model):
    return _user(django_user_model, "olga", is_staff=True)


@pytest.fixture
def vocabulary(db):
    variables = {
        "event_id": ["eventId", "evt_id"],
        "event_query": [],
        "event_details": [],
        "new_time": [],
        "event_updated": [],
        "user_id": [],
    }
    for name, aliases in variables.items():
        StateVariable.objects.create(name=name, aliases=aliases)
    for name in ("read", "write", "delete", "external_api"):
        Permission.objects.create(name=name)
    return variables


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


@pytest.fixture
def runtime_client_factory(db):
    """An API client authenticated as a runtime of the named application (created if missing)."""
    from rest_framework.test import APIClient

    from api.services import runtime_token_create

    def make(application: str, scopes=("contracts:read", "traces:write")) -> APIClient:
        _, raw = runtime_token_create(application_name=application, scopes=list(scopes))
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The cache outlives a test's rolled-back transaction: start every test without it."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
