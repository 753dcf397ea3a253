"""Benchmarks run on a fresh PostgreSQL database of their own, set up here."""

import json
import os
import subprocess

import django
from django.core.management import call_command


def django_on_fresh_database(name: str, **env: str) -> None:
    """Recreate PostgreSQL database ``name``, point Django at it, set up and migrate."""
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    os.environ.update(
        {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
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
