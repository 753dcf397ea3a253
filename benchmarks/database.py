"""Benchmarks run on a fresh PostgreSQL database of their own, set up here."""

import json
import os
import subprocess
import sys
import tempfile

import django
from django.core.management import call_command

from demo import scaled_world


def django_on_fresh_database(name: str, *, port: int = 5432, **env: str) -> None:
    """Recreate PostgreSQL database ``name`` (on the server at ``port``), point Django at it,
    set up and migrate."""
    server = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
    subprocess.run(["dropdb", *server, "--if-exists", name], check=True)
    subprocess.run(["createdb", *server, name], check=True)
    os.environ.update(
        {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{port}/{name}",
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DEBUG": "false",
            **env,
        }
    )
    django.setup()
    call_command("migrate", verbosity=0)


def import_approved(world: dict, folder: str) -> str:
    """Write ``world`` as a registry file in ``folder`` and publish it; return the file's path."""
    path = os.path.join(folder, "registry.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(world, handle)
    call_command("import_tools", path, "--approve")
    return path


def hot_reads_world(name: str, *, redis_db: int, tools: int) -> tuple[dict, str]:
    """A fresh database ``name`` with ``tools`` approved tools of the scaled world, a runtime
    token and its application's bundle rendered (what the worker does after a publication),
    on Redis databases ``redis_db`` (broker) and the next (cache, flushed): the set-up of the
    hot-read benchmarks. Returns the registry and the token."""
    django_on_fresh_database(
        name,
        REDIS_URL=f"redis://127.0.0.1:6379/{redis_db}",
        CACHE_REDIS_URL=f"redis://127.0.0.1:6379/{redis_db + 1}",
        API_THROTTLE_RATE="1000000/min",
    )
    # Only now, with Django set up, can the project's modules be imported.
    from django.core.cache import cache

    from api.bundles import bundle_render
    from api.services import runtime_token_create

    cache.clear()
    registry = scaled_world.registry(tools)
    with tempfile.TemporaryDirectory() as folder:
        import_approved(registry, folder)
    token, raw = runtime_token_create(application_name="bench", scopes=["contracts:read"])
    assert bundle_render(application_id=token.application_id) is not None
    return registry, raw


# What a server of the checkout needs from the environment hot_reads_world set up.
SERVER_ENVIRON = ("DATABASE_URL", "REDIS_URL", "CACHE_REDIS_URL", "API_THROTTLE_RATE")
# The settings the hot reads are served under: production's, on this machine, over plain HTTP.
SERVER_SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "config.settings.production",
    "SECRET_KEY": "bench-" + "x" * 60,
    "SECURE_SSL_REDIRECT": "false",
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
}

if __name__ == "__main__":
    # benchmarks/api_load.py --against: run in another checkout (its directory first on
    # PYTHONPATH), prints as its last line the token, the tools' names and the server's environment.
    name, redis_db, tools = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    world, token = hot_reads_world(name, redis_db=redis_db, tools=tools)
    names = [tool["name"] for tool in world["tools"]]
    environ = {key: os.environ[key] for key in SERVER_ENVIRON}
    print(json.dumps({"token": token, "names": names, "environ": environ}))
