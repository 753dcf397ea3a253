import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.utils import ConnectionHandler

from config.settings.base import database_from_env, env, env_bool, env_value, redis_url_from_env


def test_it_defaults_to_sqlite_under_var(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = database_from_env(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "db.sqlite3")


def test_on_sqlite_a_second_writer_waits_instead_of_failing(
    monkeypatch, tmp_path, django_db_blocker
):
    """The web process and the worker share the embedded default's file: a transaction that
    reads, then writes, while another process writes, must not fail with "database is locked"."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    handler = ConnectionHandler({"default": database_from_env(f"sqlite:///{tmp_path / 'db'}")})
    monkeypatch.setattr(transaction, "connections", handler)  # atomic() on this database
    read, errors = threading.Event(), []

    def other_writer() -> None:
        read.wait()
        try:
            with handler["default"].cursor() as cursor:  # this thread's own connection
                cursor.execute("UPDATE counter SET n = n + 1")
        except Exception as exc:
            errors.append(exc)
        finally:
            handler["default"].close()

    with django_db_blocker.unblock():
        with handler["default"].cursor() as cursor:
            cursor.execute("CREATE TABLE counter (n INTEGER)")
            cursor.execute("INSERT INTO counter VALUES (0)")
        other = threading.Thread(target=other_writer)
        other.start()
        with transaction.atomic():
            with handler["default"].cursor() as cursor:
                cursor.execute("SELECT n FROM counter")
                read.set()
                time.sleep(0.5)  # the other writer tries meanwhile
                cursor.execute("UPDATE counter SET n = n + 1")
        other.join(30)
        with handler["default"].cursor() as cursor:
            cursor.execute("SELECT n FROM counter")
            assert cursor.fetchone()[0] == 2
        handler["default"].close()
    assert errors == []


def test_it_reads_postgresql_from_database_url(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    config = database_from_env("sqlite:///unused")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "test"
    assert config["OPTIONS"]["connect_timeout"] == 5


@pytest.mark.parametrize("url", ["nonsense", "mongodb://localhost/x"])
def test_it_names_a_malformed_database_url(monkeypatch, url):
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_env("sqlite:///unused")


def test_it_names_a_malformed_redis_url(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "http://127.0.0.1:6379")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        redis_url_from_env()


def test_it_names_a_malformed_boolean(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe-ish")
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        env_bool("DEBUG", False)


def test_it_names_a_malformed_integer(monkeypatch):
    monkeypatch.setenv("TRACE_RETENTION_DAYS", "thirty")
    with pytest.raises(ImproperlyConfigured, match="TRACE_RETENTION_DAYS"):
        env_value("TRACE_RETENTION_DAYS", env.int, 30)
