import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.cache import redis_cache
from tests.helpers import database_fails

ROOT = Path(__file__).resolve().parent.parent


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_under_production_settings():
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY="x" * 20 + "a-long-random-production-secret-key-0123456789",
        ALLOWED_HOSTS="registry.example.com",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_a_missing_secret_key():
    env = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.production"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


@pytest.mark.django_db
def test_the_admin_is_only_for_staff(client, django_user_model):
    user = django_user_model.objects.create_user("visitor", password="pw-visitor-123")
    client.force_login(user)
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_tokens_are_stored_only_as_hashes():
    from api.models import RuntimeToken
    from api.services import runtime_token_create

    token, raw = runtime_token_create(application_name="app", scopes=["contracts:read"])
    stored = RuntimeToken.objects.get(pk=token.pk)
    assert raw not in (stored.token_hash, stored.prefix + stored.token_hash)
    assert stored.token_hash == RuntimeToken.hash(raw)
    assert not RuntimeToken.objects.filter(token_hash=raw).exists()


@pytest.mark.django_db
def test_create_runtime_token_prints_the_token_alone_on_its_last_line(capsys):
    from django.core.management import call_command

    from api.models import RuntimeToken
    from registry.models import Application

    call_command("create_runtime_token", "--application", "newapp", "--scopes", "contracts:read")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("trk_") and " " not in last
    token = RuntimeToken.objects.get(token_hash=RuntimeToken.hash(last))
    assert token.scopes == ["contracts:read"]
    application = Application.objects.get(name="newapp")
    assert application.all_tools and application.all_permissions and application.max_risk is None


@pytest.mark.django_db
def test_an_application_never_reads_another_applications_tools(vocabulary, runtime_client_factory):
    from registry.models import Application, Tool
    from reviews.services import registry_import
    from tests.helpers import contract

    registry_import(
        data=[contract(), contract(name="hr.salary_lookup", description="Salaries.")], approve=True
    )
    mine = runtime_client_factory("mine")
    theirs = runtime_client_factory("theirs")
    for name, tool in (("mine", "calendar.find_events"), ("theirs", "hr.salary_lookup")):
        application = Application.objects.get(name=name)
        application.all_tools = False
        application.save()
        application.enabled_tools.set(Tool.objects.filter(name=tool))
    assert mine.get("/api/v1/tools/hr.salary_lookup/").status_code == 404
    assert theirs.get("/api/v1/tools/calendar.find_events/").status_code == 404
    listed = [item["name"] for item in mine.get("/api/v1/export/mcp/").json()["tools"]]
    assert listed == ["calendar.find_events"]


@pytest.mark.django_db
def test_health_answers_503_in_the_error_shape_when_the_database_fails(client, monkeypatch):
    database_fails(monkeypatch, "server closed the connection unexpectedly")
    response = client.get("/api/v1/health/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert set(response.json()["error"]) == {"code", "message", "fields"}


@pytest.mark.django_db
def test_an_api_read_answers_503_when_the_database_fails(runtime_client_factory, monkeypatch):
    client = runtime_client_factory("assistant")
    database_fails(monkeypatch)
    response = client.get("/api/v1/tools/?page_size=3")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"


@pytest.mark.django_db
def test_reads_and_ingest_do_not_depend_on_the_broker(runtime_client_factory, settings):
    """With Redis unreachable the cache degrades to misses: answers still come."""
    from django.core.cache import caches

    from learning.models import Trace

    client = runtime_client_factory("assistant")
    settings.CACHES = {"default": redis_cache("redis://127.0.0.1:1/0")}  # nothing listens here
    caches._settings = None
    if hasattr(caches._connections, "default"):
        del caches._connections.default
    try:
        assert client.get("/api/v1/tools/").status_code == 200
        trace = {"trace_id": "no-broker", "step": 0, "tool": "x.y", "status": "success"}
        response = client.post("/api/v1/traces/", [trace], format="json")
        assert response.status_code == 200 and response.json()["accepted"] == 1
        assert Trace.objects.filter(trace_id="no-broker").exists()
    finally:
        if hasattr(caches._connections, "default"):
            del caches._connections.default
