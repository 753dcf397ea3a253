import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.base import database_from_env, env, env_bool, env_value, redis_url_from_env


def test_it_defaults_to_sqlite_under_var(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = database_from_env(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "db.sqlite3")


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
