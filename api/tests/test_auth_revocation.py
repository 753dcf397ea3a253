"""A revoked or edited token is refused on the next request, in every process sharing the cache."""

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client

from api.models import RuntimeToken
from api.services import runtime_token_create
from config.cache import redis_cache
from tests.redis_server import needs_redis_server, redis_server

ROOT = Path(__file__).resolve().parent.parent.parent

# Another web process: it authenticates one request per line it reads and prints the status.
OTHER_PROCESS = """
import sys
import django

django.setup()
from rest_framework.test import APIClient

client = APIClient(HTTP_HOST="localhost")
client.credentials(HTTP_AUTHORIZATION="Bearer " + sys.argv[1])
for _ in sys.stdin:
    print(client.get("/api/v1/revision/").status_code, flush=True)
"""


@contextmanager
def other_process(cache_url: str, raw_token: str, var_dir: Path):
    database = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "CACHE_REDIS_URL": cache_url,
        # Without the shared cache's help it would trust its copy of the revision this long.
        "REVISION_LOCAL_SECONDS": "60",
        "VAR_DIR": str(var_dir),
    }
    env.pop("REDIS_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-c", OTHER_PROCESS, raw_token],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def ask() -> int:
        process.stdin.write("\n")
        process.stdin.flush()
        return int(process.stdout.readline())

    try:
        yield ask
    finally:
        process.stdin.close()
        process.wait(20)


@needs_redis_server
@pytest.mark.skipif(connection.vendor != "postgresql", reason="two processes share PostgreSQL")
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_token_revoked_in_the_admin_is_refused_by_another_process_at_once(
    settings, admin_user, tmp_path
):
    with redis_server() as server:
        settings.CACHES = {"default": redis_cache(server.url())}
        token, raw = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
        with other_process(server.url(), raw, tmp_path) as ask:
            assert ask() == 200
            assert ask() == 200  # from its cache now, under the revision it keeps a minute
            admin = Client()
            admin.force_login(admin_user)
            admin.post(
                "/admin/api/runtimetoken/", {"action": "revoke", "_selected_action": [token.pk]}
            )
            assert ask() == 401
    token.refresh_from_db()
    assert token.revoked_at is not None


@pytest.mark.django_db
def test_saving_a_token_forgets_its_cached_authentication_on_commit(
    runtime_client_factory, django_capture_on_commit_callbacks
):
    client = runtime_client_factory("assistant")
    assert client.get("/api/v1/revision/").status_code == 200
    token = RuntimeToken.objects.get()
    key = RuntimeToken.cache_key(token.token_hash)
    assert cache.get(key) is not None
    with django_capture_on_commit_callbacks(execute=True):
        token.scopes = ["traces:write"]
        token.save()
    assert cache.get(key) is None
    assert client.get("/api/v1/revision/").status_code == 403


@pytest.mark.django_db
def test_recording_last_use_keeps_the_cached_authentication(
    runtime_client_factory, django_capture_on_commit_callbacks
):
    client = runtime_client_factory("assistant")
    assert client.get("/api/v1/revision/").status_code == 200
    token = RuntimeToken.objects.get()
    key = RuntimeToken.cache_key(token.token_hash)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        RuntimeToken.objects.filter(pk=token.pk).update(last_used_at=token.last_used_at)
    assert callbacks == [] and cache.get(key) is not None
    with django_capture_on_commit_callbacks(execute=True):
        RuntimeToken.objects.filter(pk=token.pk).delete()
    assert cache.get(key) is None
