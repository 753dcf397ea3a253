"""Schemathesis against our own OpenAPI schema, every operation, authenticated.

Zero 5xx, every response conforms to the documented schema, and every error has the one error
shape. FUZZ_EXAMPLES sets the examples per operation (250 by default: over 2,000 cases in all).
"""

import json
import os
from pathlib import Path

import pytest
import schemathesis
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from config.wsgi import application

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "250"))
pytestmark = pytest.mark.slow  # minutes of generated requests: `make test-slow`
ROOT = Path(__file__).resolve().parent.parent


def error_shape(ctx, response, case):
    """Our own check: every 4xx and 5xx is {"error": {"code", "message", "fields"}}, except
    the OTLP receiver's, which are the google.rpc.Status OTLP exporters read."""
    if response.status_code >= 400 and case.path.endswith("/otlp/v1/traces"):
        if response.headers.get("content-type", [""])[0].startswith("application/x-protobuf"):
            status = status_pb2.Status.FromString(response.content)
        else:
            body = json.loads(response.content)
            assert set(body) <= {"code", "message", "details"}, body
            status = status_pb2.Status(code=body.get("code", 0), message=body["message"])
        assert status.code and status.message, status
    elif response.status_code >= 400:
        body = json.loads(response.content)
        assert set(body) == {"error"}, body
        assert {"code", "message", "fields"} <= set(body["error"]), body


@pytest.fixture
def connections_kept_open():
    """Calling the WSGI app directly would close the test's connection after each request,
    as a server does; Django's own test client disconnects the same handlers."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
def test_the_api_holds_under_generated_requests(connections_kept_open):
    from api.services import runtime_token_create
    from reviews.services import registry_import

    registry_import(data=json.loads((ROOT / "demo/registry.json").read_text()), approve=True)
    _, token = runtime_token_create(
        application_name="fuzz", scopes=["contracts:read", "traces:write"]
    )
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", application)
    cases: dict[str, int] = {}

    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            case.validate_response(
                response,
                checks=[not_a_server_error, response_schema_conformance],
                additional_checks=[error_shape],
            )
            cases[case.operation.label] = cases.get(case.operation.label, 0) + 1

        check()

    print(f"schemathesis: {sum(cases.values())} cases over {len(cases)} operations")
    assert len(cases) >= 11  # every operation of the schema
    if EXAMPLES >= 250:
        assert sum(cases.values()) >= 2000
