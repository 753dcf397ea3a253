"""Only what changes a body makes a new ETag or cache entry: junk in a URL makes neither."""

import pytest
from django.core.cache import cache

pytestmark = [pytest.mark.django_db, pytest.mark.both_read_paths]


@pytest.fixture(autouse=True)
def listed_cache(settings):
    """Redis lists its keys; the embedded default's files are named by a hash of theirs, so
    here the bodies go to local memory, which lists them too."""
    if "Redis" not in settings.CACHES["default"]["BACKEND"]:
        locmem = "django.core.cache.backends.locmem.LocMemCache"
        settings.CACHES = {"default": {"BACKEND": locmem, "LOCATION": "keys"}}
    yield
    cache.clear()


def cached_bodies() -> int:
    if hasattr(cache, "keys"):  # django-redis
        return len(cache.keys("registry:response:*"))
    return len([key for key in cache._cache if "registry:response:" in key])  # locmem's store


@pytest.mark.parametrize(
    "url",
    ["/api/v1/tools/", "/api/v1/tools/calendar.find_events/", "/api/v1/revision/",
     "/api/v1/export/openai/", "/api/v1/export/mcp/"],
)  # fmt: skip
def test_an_unknown_query_parameter_is_refused_and_cached_nowhere(runtime, settings, url):
    before = cached_bodies()
    response = runtime.get(url, {"cachebuster": "1", "zz": "2"})
    assert response.status_code == 400
    body = response.json()["error"]
    assert "unknown parameter(s): cachebuster, zz" in body["fields"]["query"][0]
    assert cached_bodies() == before


def test_a_read_caches_its_body_once(runtime):
    before = cached_bodies()
    runtime.get("/api/v1/tools/", {"risk": "low"})
    runtime.get("/api/v1/tools/", {"risk": "low"})
    assert cached_bodies() == before + 1


def test_known_parameters_in_any_order_share_one_tag(runtime):
    first = runtime.get("/api/v1/tools/?risk=low&page_size=10")
    second = runtime.get("/api/v1/tools/?page_size=10&risk=low")
    other = runtime.get("/api/v1/tools/?risk=high&page_size=10")
    assert first.status_code == second.status_code == other.status_code == 200
    assert first["ETag"] == second["ETag"] != other["ETag"]


def test_strict_is_known_to_the_openai_export_only(runtime):
    openai = runtime.get("/api/v1/export/openai/", {"strict": "true"})
    assert openai.status_code == 200, openai.content
    anthropic = runtime.get("/api/v1/export/anthropic/", {"strict": "true"})
    assert anthropic.status_code == 400
    assert "unknown parameter(s): strict" in anthropic.json()["error"]["fields"]["query"][0]


def test_a_page_asked_under_another_host_gets_its_own_links(runtime, settings):
    settings.ALLOWED_HOSTS = ["api.example.com", "registry.internal"]
    first = runtime.get("/api/v1/tools/", {"page_size": "1"}, HTTP_HOST="api.example.com")
    second = runtime.get("/api/v1/tools/", {"page_size": "1"}, HTTP_HOST="registry.internal")
    third = runtime.get(
        "/api/v1/tools/", {"page_size": "1"}, HTTP_HOST="registry.internal", secure=True
    )
    assert first.status_code == second.status_code == third.status_code == 200
    assert first.json()["next"] == "http://api.example.com/api/v1/tools/?page=2&page_size=1"
    assert second.json()["next"] == "http://registry.internal/api/v1/tools/?page=2&page_size=1"
    assert third.json()["next"] == "https://registry.internal/api/v1/tools/?page=2&page_size=1"
    # Each body is served again from the cache, to its own host.
    again = runtime.get("/api/v1/tools/", {"page_size": "1"}, HTTP_HOST="api.example.com")
    assert again.json()["next"] == first.json()["next"]
    assert cached_bodies() >= 3
