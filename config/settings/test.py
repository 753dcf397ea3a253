"""Tests: whatever database and broker the environment names (PostgreSQL and Redis in CI)."""

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REVISION_LOCAL_SECONDS = 0  # tests see every change at once; one test covers the local copy
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
REST_FRAMEWORK = {  # noqa: F405
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {**THROTTLE_RATES, "runtime": "100000/min"},  # noqa: F405
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not memory: the Celery worker and browser tests run in other threads and processes.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}  # noqa: F405

if CACHES["default"]["BACKEND"] == "config.cache.SharedFileCache":  # noqa: F405
    # The worker started by the tests reads these settings too; `make run`'s cache stays apart.
    CACHES["default"]["LOCATION"] = str(VAR_DIR / "test-cache")  # noqa: F405
