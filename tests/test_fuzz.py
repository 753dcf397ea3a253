"""Schemathesis against our own OpenAPI schema, every operation, authenticated.

Zero 5xx, every documented response conforms to the schema, and every 4xx is the one error
shape. FUZZ_EXAMPLES sets the examples per operation (CI: 200 each, over 2,000 in all).
"""

import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.openapi.checks import response_schema_conformance

from config.wsgi import application

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))


@pytest.fixture
def api_schema(db, django_db_blocker):
    from drf_spectacular.generators import SchemaGenerator

    from api.services import runtime_token_create
    from registry.services import registry_import
    from tests.test_worker import ROOT

    registry_import(
        data=json.loads((ROOT / "registry/demo/registry.json").read_text()), approve=True
    )
    _, token = runtime_token_create(
        application_name="fuzz", scopes=["contracts:read", "traces:write"]
    )
    document = SchemaGenerator().get_schema(request=None, public=True)
    document = json.loads(json.dumps(document, default=str))
    schema = schemathesis.openapi.from_dict(document)
    schema.app = application
    schema.fuzz_token = token
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


def error_shape(ctx, response, case):
    """Our own check: every 4xx is {"error": {"code", "message", "fields"}}."""
    if response.status_code >= 400:
        body = json.loads(response.content)
        assert set(body) == {"error"}, body
        assert {"code", "message", "fields"} <= set(body["error"]), body


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_holds_under_generated_requests(case, api_schema):
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {api_schema.fuzz_token}"}
    response = case.call(app=application)
    case.validate_response(
        response,
        checks=[not_a_server_error, response_schema_conformance],
        additional_checks=[error_shape],
    )
