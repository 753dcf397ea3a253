"""``api.bundles.bundle_render``: an application's bundle renders again only what changed, and
what it serves is what the views answer."""

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_redis.cache import RedisCache

from api import bundles, views
from registry.models import Application, PlanningPolicy, RiskLevel, Tool
from registry.revision import revision_bump, revision_stored
from reviews.services import registry_import
from tests.fast_client import plain
from tests.helpers import client_for, contract

pytestmark = [
    # Committed for real: each change moves the revision as it would in production.
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.skipif(
        not isinstance(caches["default"], RedisCache),
        reason="bundles live in a Redis cache: run with REDIS_URL set (CI does)",
    ),
]

EXPORT_PATHS = [
    "/api/v1/export/openai/",
    "/api/v1/export/openai/?strict=true",
    "/api/v1/export/anthropic/",
    "/api/v1/export/mcp/",
]


@pytest.fixture
def rendered(monkeypatch):
    """How many contracts and export entries each render made (not reused), by kind."""
    counts: dict[str, int] = {}

    def counting(kind, original):
        def render(*args, **kwargs):
            counts[kind] = counts.get(kind, 0) + 1
            return original(*args, **kwargs)

        return render

    monkeypatch.setattr(
        bundles, "ContractSerializer", counting("contract", bundles.ContractSerializer)
    )
    for view in (views.OpenAIExportView, views.AnthropicExportView, views.MCPExportView):
        monkeypatch.setattr(view, "entry", counting(view.__name__, view.entry))
    return counts


def bundle_body(application: Application, path: str) -> bytes:
    """The body the bundle holds for a GET of ``path`` (an export or a contract)."""
    route, _, query = path.partition("?")
    params = sorted(tuple(pair.split("=")) for pair in query.split("&") if pair)
    value = bundles.bundle_client().hget(
        bundles.bundle_key(application.pk, revision_stored()), bundles.bundle_field(route, params)
    )
    assert value is not None and value.startswith(b"B"), (path, value)
    return value[1:]


def assert_bundle_is_what_the_views_answer(application: Application, client) -> None:
    plain(client)
    names = [contract.tool.name for contract in bundles.visible_versions(application)]
    for path in [*EXPORT_PATHS, *(f"/api/v1/tools/{name}/" for name in names)]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert bundle_body(application, path) == answer.content, path


def test_it_renders_only_the_contract_a_publication_changed(registry, rendered):
    client = client_for("assistant")
    assistant = Application.objects.get(name="assistant")
    assert bundles.bundle_render(application_id=assistant.pk) is not None
    assert rendered["contract"] == 4 and rendered["AnthropicExportView"] == 4
    rendered.clear()
    registry_import(
        data=[contract(name="weather.forecast", description="Forecast by city.")],
        approve=True,
    )
    with CaptureQueriesContext(connection) as queries:
        assert bundles.bundle_render(application_id=assistant.pk) is not None
    # The changed contract is read once, for its body and its four export entries.
    reads = [q for q in queries if '"registry_contractversion"."id" IN' in q["sql"]]
    assert len(reads) == 1, reads
    assert rendered == {
        "contract": 1,
        "OpenAIExportView": 2,  # plain and strict
        "AnthropicExportView": 1,
        "MCPExportView": 1,
    }
    assert b"Forecast by city." in bundle_body(assistant, "/api/v1/tools/weather.forecast/")
    assert_bundle_is_what_the_views_answer(assistant, client)


def test_a_new_risk_name_or_mandate_renders_what_shows_them(registry, rendered):
    client = client_for("assistant")
    assistant = Application.objects.get(name="assistant")
    bundles.bundle_render(application_id=assistant.pk)
    rendered.clear()
    RiskLevel.objects.filter(name="high").update(name="severe")
    revision_bump()
    bundles.bundle_render(application_id=assistant.pk)
    assert rendered["contract"] == 1  # calendar.delete_event, the one high-risk tool
    rendered.clear()
    PlanningPolicy.objects.create(application=assistant, mandate="Ask before deleting anything.")
    bundles.bundle_render(application_id=assistant.pk)
    assert "contract" not in rendered  # the mandate is in the exports only
    assert rendered["AnthropicExportView"] == 4
    body = bundle_body(assistant, "/api/v1/export/anthropic/")
    assert b"Policy: Ask before deleting anything." in body
    assert_bundle_is_what_the_views_answer(assistant, client)


def test_it_drops_the_parts_of_a_contract_the_application_no_longer_sees(registry):
    client_for("assistant")
    assistant = Application.objects.get(name="assistant")
    bundles.bundle_render(application_id=assistant.pk)
    client = bundles.bundle_client()
    parts = caches["default"].make_key(f"registry:bundle-parts:{assistant.pk}")
    assert client.hexists(parts, "contract|calendar.delete_event")
    assistant.all_tools = False
    assistant.save()
    assistant.enabled_tools.set(Tool.objects.filter(name="weather.forecast"))
    bundles.bundle_render(application_id=assistant.pk)
    fields = {field.decode().partition("|")[2] for field in client.hkeys(parts)}
    assert fields == {"weather.forecast"}
