"""The fast read path (api/fast.py) answers the hot reads exactly as Django would, from Redis,
and leaves everything it cannot be sure of to Django.

Each test compares the two paths or follows one behaviour across them: the same statuses,
headers, ETags and bodies; a token refused on its next request; visibility per application;
throttling counted once across both; bundles rendered by the task after publishing.
"""

import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.core.cache import caches
from django.utils import timezone
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from rest_framework.test import APIClient

from api import bundles
from api.fast import ANSWERED_KEY, CLIENT_NAME, lua_string
from api.models import RuntimeToken
from api.services import runtime_token_create, runtime_tokens_revoke
from api.throttling import RuntimeThrottle
from config.cache import CircuitBreaker, redis_cache
from config.celery_app import app as celery_app
from registry.models import Application
from registry.revision import CACHE_KEY as REVISION_CACHE_KEY
from registry.revision import CACHE_SECONDS as REVISION_CACHE_SECONDS
from registry.revision import revision_current, revision_stored
from reviews.services import ProposalSeen, contract_propose, review_approve
from tests.fast_client import fast
from tests.fast_client import plain as straight
from tests.helpers import contract, database_fails
from tests.redis_server import needs_redis_server, redis_server

pytestmark = [
    pytest.mark.django_db,
    # Bundles and the fast path live in the cache's Redis: the embedded default has none.
    pytest.mark.skipif(
        not isinstance(caches["default"], RedisCache),
        reason="needs a Redis cache: run with REDIS_URL set (CI does)",
    ),
]

DETAIL = "/api/v1/tools/calendar.find_events/"
HOT = [
    "/api/v1/revision/",
    DETAIL,
    "/api/v1/tools/",
    "/api/v1/tools/?page=1",
    "/api/v1/export/openai/",
    "/api/v1/export/openai/?strict=true",
    "/api/v1/export/anthropic/",
    "/api/v1/export/mcp/",
]


@pytest.fixture
def eager(monkeypatch):
    """Celery runs the queued task in the request that queues it: the real task, no worker."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", True)


def application_of(name: str) -> Application:
    return Application.objects.get(name=name)


def render(name: str) -> int:
    revision = bundles.bundle_render(application_id=application_of(name).pk)
    assert revision is not None
    return revision


def both(name: str = "assistant", scopes=("contracts:read",)) -> tuple[APIClient, APIClient]:
    """Two clients of one token: one through the fast path first, one straight to Django."""
    _, raw = runtime_token_create(application_name=name, scopes=list(scopes))
    plain, quick = APIClient(), APIClient()
    for client in (plain, quick):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return straight(plain), fast(quick)


def publish(proposer, reviewer, django_capture_on_commit_callbacks, **changes) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        ticket = contract_propose(document=contract(**changes), author=proposer)
        review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))


def same(fast_response, django_response) -> None:
    assert fast_response.status_code == django_response.status_code
    assert fast_response.content == django_response.content
    assert dict(fast_response.headers) == dict(django_response.headers)


def test_it_answers_every_hot_read_as_django_does(registry, settings):
    settings.SECURE_HSTS_SECONDS = 3600  # and the middleware's headers on HTTPS too
    settings.SECURE_HSTS_PRELOAD = True
    plain, quick = both()
    quick.get("/api/v1/revision/")  # Django authenticates the first: the token's record is made
    render("assistant")
    for url in HOT:
        for secure in (False, True):
            answered = len(quick.handler.answered)
            fast_response = quick.get(url, secure=secure)
            assert quick.handler.answered[answered:] == ["fast"], url
            same(fast_response, plain.get(url, secure=secure))
            tag = fast_response["ETag"]
            fast_304 = quick.get(url, HTTP_IF_NONE_MATCH=f'"other", {tag}', secure=secure)
            assert fast_304.status_code == 304 and quick.handler.answered[-1] == "fast"
            same(fast_304, plain.get(url, HTTP_IF_NONE_MATCH=f'"other", {tag}', secure=secure))


def test_a_page_links_to_its_neighbours_on_the_requests_own_host(
    registry,
    settings,
    monkeypatch,
):
    settings.ALLOWED_HOSTS = ["api.example.com", "testserver"]
    monkeypatch.setattr(bundles.views.Pagination, "page_size", 1)
    plain, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    for url in ("/api/v1/tools/?page=2", "/api/v1/tools/?page=4", "/api/v1/tools/?page=3"):
        fast_response = quick.get(url, HTTP_HOST="api.example.com", secure=True)
        assert quick.handler.answered[-1] == "fast"
        same(fast_response, plain.get(url, HTTP_HOST="api.example.com", secure=True))
    body = quick.get("/api/v1/tools/?page=2", HTTP_HOST="api.example.com").json()
    assert body["previous"] == "http://api.example.com/api/v1/tools/"
    assert body["next"] == "http://api.example.com/api/v1/tools/?page=3"
    # A page past the last is Django's to refuse, with its own words.
    beyond = quick.get("/api/v1/tools/?page=9")
    assert beyond.status_code == 404 and quick.handler.answered[-1] == "django"
    assert beyond.json()["error"]["message"] == "Invalid page."


def test_it_leaves_requests_without_a_good_token_to_django(registry):
    quick = fast(APIClient())
    assert quick.get("/api/v1/revision/").status_code == 401
    quick.credentials(HTTP_AUTHORIZATION="Bearer trk_nope")
    response = quick.get("/api/v1/revision/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    quick.credentials(HTTP_AUTHORIZATION="Bearer trk_a trk_b")
    assert quick.get("/api/v1/revision/").status_code == 401
    assert quick.handler.answered == ["django"] * 3


def test_a_token_without_the_scope_gets_djangos_403_every_time(registry):
    _, quick = both(scopes=["traces:write"])
    for _ in range(3):
        response = quick.get("/api/v1/revision/")
        assert response.status_code == 403
        assert "contracts:read" in response.json()["error"]["message"]
    assert quick.handler.answered == ["django"] * 3


def test_a_revoked_token_is_refused_on_its_next_request(
    registry,
    django_capture_on_commit_callbacks,
):
    _, quick = both()
    assert [quick.get("/api/v1/revision/").status_code for _ in range(2)] == [200, 200]
    assert quick.handler.answered == ["django", "fast"]
    with django_capture_on_commit_callbacks(execute=True):
        runtime_tokens_revoke(tokens=RuntimeToken.objects.all())
    response = quick.get("/api/v1/revision/")
    assert response.status_code == 401
    assert quick.handler.answered[-1] == "django"


def test_a_token_is_refused_once_it_expires_though_its_record_is_still_cached(registry):
    _, raw = runtime_token_create(
        application_name="assistant",
        scopes=["contracts:read"],
        expires_at=timezone.now() + timedelta(seconds=1.5),
    )
    quick = fast(APIClient())
    quick.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert [quick.get("/api/v1/revision/").status_code for _ in range(2)] == [200, 200]
    assert quick.handler.answered == ["django", "fast"]
    time.sleep(1.6)
    token = RuntimeToken.objects.get()
    record = caches["default"].make_key(RuntimeToken.fast_cache_key(token.token_hash))
    assert bundles.bundle_client().get(record) is not None  # still there
    assert quick.get("/api/v1/revision/").status_code == 401
    assert quick.handler.answered[-1] == "django"


def test_each_application_reads_only_its_own_bundle(restricted):
    _, wide = both("assistant")
    _, narrow = both("restricted")
    for client in (wide, narrow):
        client.get("/api/v1/revision/")
    render("assistant")
    render("restricted")
    assert wide.get("/api/v1/tools/weather.forecast/").status_code == 200
    hidden = narrow.get("/api/v1/tools/weather.forecast/")
    assert hidden.status_code == 404 and narrow.handler.answered[-1] == "fast"
    assert hidden.json() == {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}
    names = [item["name"] for item in narrow.get("/api/v1/tools/").json()["results"]]
    assert names == ["calendar.find_events", "calendar.get_event"]
    mine = narrow.get(DETAIL)
    theirs = wide.get(DETAIL)
    assert mine["ETag"] != theirs["ETag"]  # a tag is the caller's: never valid for another
    assert narrow.get(DETAIL, HTTP_IF_NONE_MATCH=theirs["ETag"]).status_code == 200


def test_a_publication_moves_the_tag_and_the_task_renders_the_new_body(
    registry,
    proposer,
    reviewer,
    django_capture_on_commit_callbacks,
    eager,
):
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    first = quick.get(DETAIL)
    assert first.json()["version"] == 1 and quick.handler.answered[-1] == "fast"
    # Publishing commits a revision bump; its signal queues the renders (run here, eagerly).
    publish(proposer, reviewer, django_capture_on_commit_callbacks, description="Better words.")
    revision = quick.get("/api/v1/revision/").json()["revision"]
    bundle = bundles.bundle_key(application_of("assistant").pk, revision)
    assert bundles.bundle_client().hexists(bundle, bundles.COMPLETE)
    quick.get("/api/v1/revision/")  # the token's record is of the old revision: Django renews it
    changed = quick.get(DETAIL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200 and quick.handler.answered[-1] == "fast"
    assert changed.json()["version"] == 2 and changed.json()["description"] == "Better words."
    assert changed["ETag"] != first["ETag"]
    # The previous revision's bundle is gone: nothing can serve it any more.
    assert not bundles.bundle_client().exists(
        bundles.bundle_key(application_of("assistant").pk, revision - 1)
    )


def test_without_a_bundle_django_answers_and_the_render_is_queued(registry, eager):
    plain, quick = both()
    quick.get("/api/v1/revision/")
    response = quick.get(DETAIL)
    assert response.status_code == 200 and quick.handler.answered[-1] == "django"
    # The miss queued the render (eager here): the next read is the bundle's.
    again = quick.get(DETAIL)
    assert quick.handler.answered[-1] == "fast"
    same(again, plain.get(DETAIL))


def test_throttling_counts_each_request_once_whichever_path_answers(
    registry,
    monkeypatch,
    eager,
):
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "4/min"})
    _, quick = both()
    # Django; fast, which counts, finds no bundle, queues it and hands over to Django (which
    # must not count again); then fast from the bundle; then refused.
    statuses = [quick.get(url).status_code for url in ("/api/v1/revision/", *[DETAIL] * 4)]
    assert statuses == [200, 200, 200, 200, 429]
    assert quick.handler.answered == ["django", "django", "fast", "fast", "fast"]
    refused = quick.get("/api/v1/revision/")
    assert refused.status_code == 429 and quick.handler.answered[-1] == "fast"
    assert 0 < int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"
    assert "Expected available in" in refused.json()["error"]["message"]


def test_a_429_is_the_same_on_both_paths(registry, monkeypatch):
    monkeypatch.setattr(RuntimeThrottle, "THROTTLE_RATES", {"runtime": "2/min"})
    plain, quick = both()
    assert [plain.get("/api/v1/revision/").status_code for _ in range(2)] == [200, 200]
    django_429 = plain.get("/api/v1/revision/")
    fast_429 = quick.get("/api/v1/revision/")
    assert quick.handler.answered == ["fast"]
    assert fast_429.status_code == django_429.status_code == 429
    assert fast_429.json() == django_429.json() or (
        # a second may pass between the two: the words differ only by the seconds left
        fast_429.json()["error"]["message"].split(" in ")[0]
        == django_429.json()["error"]["message"].split(" in ")[0]
    )
    assert set(fast_429.headers) == set(django_429.headers)


def test_an_unknown_parameter_is_djangos_400(registry):
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    for url in ("/api/v1/revision/?x=1", DETAIL + "?page=2", "/api/v1/tools/?cachebuster=1"):
        response = quick.get(url)
        assert response.status_code == 400 and quick.handler.answered[-1] == "django"
        assert "unknown parameter(s)" in response.json()["error"]["fields"]["query"][0]


def test_a_host_django_refuses_and_plain_http_under_ssl_redirect_go_to_django(
    registry,
    settings,
):
    settings.SECURE_SSL_REDIRECT = True  # before the client's first request loads middleware
    _, quick = both()
    quick.get("/api/v1/revision/", secure=True)
    response = quick.get("/api/v1/revision/", HTTP_HOST="evil.example", secure=True)
    assert response.status_code == 400 and quick.handler.answered[-1] == "django"
    assert quick.get("/api/v1/revision/").status_code == 301
    assert quick.handler.answered[-1] == "django"
    assert quick.get("/api/v1/revision/", secure=True).status_code == 200
    assert quick.handler.answered[-1] == "fast"


def test_a_change_of_the_application_sends_the_next_request_to_django(
    registry,
    django_capture_on_commit_callbacks,
):
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    assert quick.get("/api/v1/tools/weather.forecast/").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        application = application_of("assistant")
        application.all_tools = False
        application.save()
        application.enabled_tools.set([])
    response = quick.get("/api/v1/tools/weather.forecast/")
    assert response.status_code == 404 and quick.handler.answered[-1] == "django"


@needs_redis_server
def test_a_dead_or_hung_redis_sends_reads_to_django_at_once(registry, settings, monkeypatch):
    timeouts = []
    failed = CircuitBreaker.failed

    def counted(breaker, exc):
        timeouts.append(exc)
        failed(breaker, exc)

    monkeypatch.setattr(CircuitBreaker, "failed", counted)
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url(), cooldown=60)}
        _, quick = both()
        quick.get("/api/v1/revision/")
        render("assistant")
        assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"
        server.pause()
        statuses = [quick.get(DETAIL).status_code for _ in range(10)]
        assert statuses == [200] * 10
        assert quick.handler.answered[-10:] == ["django"] * 10
        assert len(timeouts) == 1  # one 0.25 s timeout, then the breaker skips Redis
        server.resume()


def test_a_redis_that_lost_its_scripts_still_answers_on_the_fast_path(registry):
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"
    get_redis_connection("default").script_flush()  # a restart or a failover does this
    assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"


def test_when_the_caches_revision_expires_the_fast_path_puts_it_back(registry, settings):
    settings.REVISION_LOCAL_SECONDS = 60  # this process's copy outlives the cache's (2 s)
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    revision_current()  # the process's copy is fresh: the view would not put the cache's back
    key = caches["default"].make_key(REVISION_CACHE_KEY)
    redis_client = get_redis_connection("default")
    redis_client.delete(key)  # as when it expires
    for _ in range(3):
        assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"
    assert int(redis_client.get(key)) == revision_stored()
    assert 0 < redis_client.ttl(key) <= REVISION_CACHE_SECONDS


def test_a_database_failure_while_putting_the_revision_back_is_the_apis_503(registry, monkeypatch):
    _, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    get_redis_connection("default").delete(caches["default"].make_key(REVISION_CACHE_KEY))
    database_fails(monkeypatch)
    response = quick.get(DETAIL)
    assert response.status_code == 503 and quick.handler.answered[-1] == "django"
    assert response.json()["error"]["code"] == "unavailable"


def test_each_thread_reads_on_a_connection_of_its_own_that_comes_back_after_a_failure(
    registry, settings
):
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url(), cooldown=0)}
        _, quick = both()
        quick.get("/api/v1/revision/")
        render("assistant")
        admin = redis.Redis.from_url(server.url())

        def fast_connections() -> int:
            return sum(client["name"] == CLIENT_NAME for client in admin.client_list())

        for _ in range(5):
            assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"
        assert fast_connections() == 1
        with ThreadPoolExecutor(3) as pool:
            answered = list(pool.map(lambda _: quick.get(DETAIL).status_code, range(30)))
        assert answered == [200] * 30 and fast_connections() <= 4
        server.pause()
        assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "django"
        server.resume()
        quick.get("/api/v1/revision/")  # Django caches the revision again if it must
        assert quick.get(DETAIL).status_code == 200 and quick.handler.answered[-1] == "fast"


EXPORT_FILES = (
    ("/api/v1/export/openai/", "export-openai.json"),
    ("/api/v1/export/openai/?strict=true", "export-openai-strict.json"),
    ("/api/v1/export/mcp/", "export-mcp.json"),
)


def test_with_a_bundle_directory_nginx_sends_the_exports_file(registry, settings, tmp_path):
    settings.API_BUNDLE_DIR = str(tmp_path)
    plain, quick = both()
    quick.get("/api/v1/revision/")
    revision = render("assistant")
    application = application_of("assistant").pk
    nginx = {"HTTP_X_SENDFILE_TYPE": "X-Accel-Redirect"}  # what deploy/nginx.conf sets
    for url, name in EXPORT_FILES:
        response = quick.get(url, **nginx)
        assert response.status_code == 200 and quick.handler.answered[-1] == "fast"
        assert response["X-Accel-Redirect"] == f"/_bundles/{application}/{revision}/{name}"
        assert response.content == b""
        normal = plain.get(url)
        assert (Path(tmp_path) / str(application) / str(revision) / name).read_bytes() == (
            normal.content
        )
        assert response["ETag"] == normal["ETag"]
        assert response["Content-Type"] == "application/json"
    # A 304 needs no file at all.
    tag = quick.get("/api/v1/export/mcp/", **nginx)["ETag"]
    conditional = quick.get("/api/v1/export/mcp/", HTTP_IF_NONE_MATCH=tag, **nginx)
    assert conditional.status_code == 304 and "X-Accel-Redirect" not in conditional


def test_with_a_bundle_directory_but_no_nginx_in_front_the_body_is_sent(
    registry, settings, tmp_path
):
    settings.API_BUNDLE_DIR = str(tmp_path)
    plain, quick = both()
    quick.get("/api/v1/revision/")
    render("assistant")
    for url, _name in EXPORT_FILES:
        for _ in range(3):  # the same answer every time, never an empty redirect
            response = quick.get(url)
            assert quick.handler.answered[-1] == "fast"
            assert "X-Accel-Redirect" not in response
            same(response, plain.get(url))
            assert json.loads(response.content)


def test_the_fast_path_is_a_middleware_of_the_wsgi_application(registry):
    from config import wsgi

    # After the middleware that shape every answer, before those of browser sessions.
    middleware = settings_middleware()
    fast_at = middleware.index("api.fast.FastReadsMiddleware")
    assert {
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    } <= set(middleware[:fast_at])
    assert "django.contrib.sessions.middleware.SessionMiddleware" in middleware[fast_at:]
    _, raw = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    client = fast(APIClient())
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.get("/api/v1/revision/")
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/api/v1/revision/",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "HTTP_AUTHORIZATION": f"Bearer {raw}",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
    }
    seen = {}

    def start_response(status, headers):
        seen.update(status=status, headers=dict(headers))

    body = b"".join(wsgi.application(environ, start_response))
    assert seen["status"] == "200 OK" and environ[ANSWERED_KEY] is True
    assert seen["headers"]["X-Frame-Options"] == "DENY"  # the middleware before it added theirs
    assert json.loads(body) == {"revision": client.get("/api/v1/revision/").json()["revision"]}


def settings_middleware() -> list[str]:
    from django.conf import settings

    return list(settings.MIDDLEWARE)


@pytest.mark.parametrize("value", ["plain:", "a]]b", "]=]]==]'\"\\n", ""])
def test_the_values_written_into_the_script_reach_redis_unchanged(value):
    client = get_redis_connection("default")
    assert client.eval(f"return {lua_string(value)}", 0) == value.encode()
