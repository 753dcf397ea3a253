"""Settings shared by every environment, read from the environment through django-environ.

With nothing set, the service runs on SQLite under ``var/`` and Celery uses kombu's
filesystem transport under ``var/``: no server to install. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis. A malformed value raises
``ImproperlyConfigured`` naming the variable, never a silent default.
"""

import ipaddress
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue
from redis.connection import parse_url

from config.cache import redis_cache

# Django's generic classes (ModelAdmin[Tool], QuerySet[...]) take type parameters at run time,
# as django-stubs types them: mypy runs with disallow_any_generics.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(environ.Env().str("VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()
# The embedded default keeps its database and broker queue here; nothing else to set up.
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_value(name: str, cast, default):
    """Read one variable; any parse failure names the variable."""
    try:
        return cast(name, default=default)
    except ImproperlyConfigured:
        raise
    except Exception as exc:  # environ raises ValueError and friends on bad input
        raise ImproperlyConfigured(f"{name}: {exc}") from exc


def networks_from_env(name: str) -> list[str]:
    """A comma-separated list of addresses or networks (``10.0.0.0/8``, ``::1``); a value that
    is neither names the variable."""
    values = env_value(name, env.list, [])
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {value!r} is not an address or network: {exc}"
            ) from None
    return values


def positive_from_env(name: str, cast, default):
    value = env_value(name, cast, default)
    if value <= 0:
        raise ImproperlyConfigured(f"{name}: must be above 0, got {value!r}")
    return value


SUPPORTED_ENGINES = {"django.db.backends.sqlite3", "django.db.backends.postgresql"}
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """Strict: django-environ reads any unknown word as False; a typo should fail loudly."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in TRUE_WORDS:
        return True
    if raw.strip().lower() in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}: expected true/false, got {raw!r}")


def database_from_env(default_url: str) -> dict[str, Any]:
    url = env_value("DATABASE_URL", env.str, default_url)
    try:
        config = environ.Env.db_url_config(url)
    except Exception as exc:
        raise ImproperlyConfigured(f"DATABASE_URL: cannot parse {url!r}: {exc}") from exc
    if config.get("ENGINE") not in SUPPORTED_ENGINES:
        raise ImproperlyConfigured(
            f"DATABASE_URL: {url.split(':', 1)[0]!r} is not supported; use postgres:// or sqlite://"
        )
    if config["ENGINE"] == "django.db.backends.postgresql":
        # A request never waits on a dead database longer than this (reliability: 503 fast).
        config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
        config["CONN_MAX_AGE"] = env_value("CONN_MAX_AGE", env.int, 60)
        config["CONN_HEALTH_CHECKS"] = True
    else:
        # SQLite, the embedded default. WAL lets the worker write while the web process reads.
        # A transaction takes the write lock as it begins (IMMEDIATE), so that a second writer
        # waits for it (up to the timeout): a transaction that read first would otherwise fail
        # with "database is locked" at its first write, at once, when another had written since.
        config.setdefault("OPTIONS", {}).update(
            {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    return config


def redis_url_from_env() -> str | None:
    url = env_value("REDIS_URL", env.str, "")
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"REDIS_URL: expected a redis:// URL, got {url!r}")
    return url or None


SECRET_KEY = env_value("SECRET_KEY", env.str, "insecure-development-key-change-me")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_value("ALLOWED_HOSTS", env.list, ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_value("CSRF_TRUSTED_ORIGINS", env.list, [])

INSTALLED_APPS = [
    "config.apps.RegistryAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "csp",
    "registry",
    "reviews",
    "learning",
    "sources",
    "api",
    "gateway",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's static files under gunicorn too; no web server needed in front.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # The runtime API's hot reads from Redis (api/fast.py). The middleware above check and shape
    # its answers as any other (a middleware that adds to every answer goes above it); those
    # below serve browser sessions, which a runtime's bearer-token read does not use.
    "api.fast.FastReadsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "csp.middleware.CSPMiddleware",
    # Slows guesses at one account from many addresses (config/logins.py).
    "config.logins.LoginSlowdownMiddleware",
    # Last, as django-axes requires: answers a locked-out login attempt.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_from_env(f"sqlite:///{VAR_DIR / 'registry.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Failed logins (the admin's, and any other authenticate() with a request) are counted by
# django-axes per account and address together: past the limit that account is locked out at
# that address for the cool-off, answered 429 before any password is hashed, while its owner
# elsewhere still logs in. Guesses at one account from many addresses are slowed, never locked
# (config/logins.py). docs/operations.md says how to let a reviewer back in early.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_value("LOGIN_FAILURE_LIMIT", env.int, 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_value("LOGIN_COOLOFF_MINUTES", env.int, 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
LOGIN_ACCOUNT_PACE_SECONDS = positive_from_env("LOGIN_ACCOUNT_PACE_SECONDS", env.int, 10)
LOGIN_ADDRESS_ACCOUNTS = positive_from_env("LOGIN_ADDRESS_ACCOUNTS", env.int, 3)
AXES_RESET_ON_SUCCESS = True
# The same address the API's throttles use (REMOTE_ADDR, or as TRUSTED_PROXIES say).
AXES_CLIENT_IP_CALLABLE = "api.auth.client_address"

# Content-Security-Policy (django-csp) on the admin and every other page: scripts, styles,
# images and fonts from this site only (the admin has no inline script), no plugins, no framing,
# forms post here only. Style attributes are allowed: a few legends use them, and they run no
# script. The API (JSON, and its interactive docs) is left as it was: a JSON answer is no page,
# and the fast read path (api/fast.py) must answer exactly as Django does.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/api/"],
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'self'"],
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)

REDIS_URL = redis_url_from_env()


def redis_place(name: str, url: str) -> dict[str, Any]:
    """Where a Redis URL points (host, port or socket path, database); a bad URL names ``name``."""
    try:
        place = parse_url(url)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: cannot parse {url!r}: {exc}") from exc
    database = urlsplit(url).path.strip("/") if not url.startswith("unix://") else ""
    if database and not database.isdigit():  # redis-py would quietly use database 0
        raise ImproperlyConfigured(f"{name}: the database must be a number, got {database!r}")
    return {
        "host": place.get("host"),
        "port": place.get("port", 6379),
        "path": place.get("path"),
        "db": place.get("db", 0),
    }


def cache_url_from_env(broker_url: str | None) -> str | None:
    """CACHE_REDIS_URL, else the broker's Redis server with the next database number, else None.

    The cache never shares the broker's database: clearing the cache flushes its database, and
    the cache's keys would count against the broker's memory.
    """
    url = env_value("CACHE_REDIS_URL", env.str, "")
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"CACHE_REDIS_URL: expected a redis:// URL, got {url!r}")
    broker = redis_place("REDIS_URL", broker_url) if broker_url else None
    if url:
        cache = redis_place("CACHE_REDIS_URL", url)
        if cache == broker:
            raise ImproperlyConfigured(
                "CACHE_REDIS_URL: names the broker's database (REDIS_URL); use another one"
            )
        return url
    if broker is None or not broker_url:
        return None
    database = broker["db"] + 1
    if database > 15:  # Redis has databases 0-15 unless configured otherwise
        raise ImproperlyConfigured(
            f"REDIS_URL: the cache would take database {database}; set CACHE_REDIS_URL"
        )
    parts = urlsplit(broker_url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "db"]
    if parts.scheme == "unix":  # the path is the socket's; the database goes in the query
        query.append(("db", str(database)))
        return f"{broker_url.split('?')[0]}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{database}", query=urlencode(query)))


# The cache: Redis (django-redis, short timeouts, a circuit breaker; see config/cache.py) when
# one is configured, else files under var/cache/ that every process of the machine shares: what
# one process caches for the others (refresh-pending marks, throttle counters, the revision)
# must be seen by the web process and the worker alike, which per-process memory is not.
CACHE_REDIS_URL = cache_url_from_env(REDIS_URL)
if CACHE_REDIS_URL:
    CACHES = {"default": redis_cache(CACHE_REDIS_URL)}
else:
    CACHES = {
        "default": {
            "BACKEND": "config.cache.SharedFileCache",
            "LOCATION": str(VAR_DIR / "cache"),
            # Each write lists the folder to cull past this many entries (expired ones first).
            "OPTIONS": {"MAX_ENTRIES": 2000},
        }
    }

# Celery: JSON only, time limits on every task, schedules in the database (django-celery-beat).
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    if not REDIS_URL.startswith("rediss://"):
        # kombu's Redis transport, made to survive a broker restart: see config/broker.py.
        # (kombu sets TLS up from the rediss:// scheme, which a transport named here hides.)
        CELERY_BROKER_TRANSPORT = "config.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360  # stays below the broker's visibility_timeout
# Deliveries to receivers outside have a queue of their own: however slow those are, bundle
# renders, OTLP assembly and syncs never wait behind them. A worker started without -Q consumes
# both (the embedded default); production runs one worker per queue (docker-compose.yml).
CELERY_TASK_DEFAULT_QUEUE = "celery"
# The fold of stored traces into statistics (learning.tasks.traces_fold) has one too: ingest's
# pace follows it, and a backlog of refreshes or renders never holds it up.
CELERY_TASK_QUEUES = [
    Queue("celery", routing_key="celery"),
    Queue("webhooks", routing_key="webhooks"),
    Queue("fold", routing_key="fold"),
]
CELERY_TASK_ROUTES = {
    "api.tasks.webhook_deliver": {"queue": "webhooks"},
    "learning.tasks.traces_fold": {"queue": "fold"},
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# On a lost broker connection, a running late-acknowledged task is stopped: its message goes back
# to the queue with the others the worker held (config/broker.py), rather than running twice.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE

THROTTLE_RATES: dict[str, str] = {
    "runtime": env_value("API_THROTTLE_RATE", env.str, "6000/min"),
    # POST webhooks/test/, per application: each costs a worker up to a delivery's deadline.
    "webhook_test": env_value("WEBHOOK_TEST_THROTTLE_RATE", env.str, "10/hour"),
}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.auth.RuntimeTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["api.auth.IsRuntimeOrStaff"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": THROTTLE_RATES,
    "UNAUTHENTICATED_USER": None,
}
# The proxies in front (addresses or networks) whose X-Forwarded-For tells the caller's address
# (api.auth.client_address: throttles, failed bearer tokens and logins). Empty: REMOTE_ADDR
# only, as a header a client sets proves nothing. A count of proxies (DRF's NUM_PROXIES) would
# trust the header from anyone who reaches the server past them.
TRUSTED_PROXIES = networks_from_env("TRUSTED_PROXIES")
if os.environ.get("NUM_PROXIES", "0").strip() not in ("", "0"):
    raise ImproperlyConfigured(
        "NUM_PROXIES: no longer read; list the proxies' addresses in TRUSTED_PROXIES instead "
        "(e.g. 127.0.0.1 for nginx beside gunicorn)"
    )
# Failed bearer authentication, per client address (api/auth.py): past the limit in a window,
# tokens not already cached are refused (429) before any database query.
API_FAILED_BEARER_LIMIT = env_value("API_FAILED_BEARER_LIMIT", env.int, 20)
API_FAILED_BEARER_WINDOW_SECONDS = env_value("API_FAILED_BEARER_WINDOW_SECONDS", env.int, 60)

SPECTACULAR_SETTINGS = {
    "TITLE": "Tool-contract registry API",
    "DESCRIPTION": "Approved tool contracts for agent runtimes, and their execution traces.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The runtime API's operation ids (and so the names of generated clients' functions) are
    # its paths under /api/v1/, whatever else the schema serves (the MCP Registry API's /v0.1/).
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",
}

EMAIL_BACKEND = env_value(
    "EMAIL_BACKEND", env.str, "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = env_value("DEFAULT_FROM_EMAIL", env.str, "registry@localhost")

# How long a process may keep the registry revision without asking the cache (every API read
# needs it); a change made by another process is seen within this bound.
REVISION_LOCAL_SECONDS = env_value("REVISION_LOCAL_SECONDS", env.float, 1.0)

# The fast read path (api/fast.py, the last middleware): hot reads answered from Redis in one
# round trip. Needs a Redis cache; off without one.
API_FAST_READS = env_bool("API_FAST_READS", True)
# When set, the exports of each application's bundle are also written as files under this
# directory, one folder per application and revision, and the API answers them with an
# X-Accel-Redirect to API_BUNDLE_URL + "<application>/<revision>/<file>" for nginx to send
# (deploy/nginx.conf). Empty: the API sends the bodies itself.
API_BUNDLE_DIR = env_value("API_BUNDLE_DIR", env.str, "")
API_BUNDLE_URL = env_value("API_BUNDLE_URL", env.str, "/_bundles/")
if not API_BUNDLE_URL.startswith("/") or not API_BUNDLE_URL.endswith("/"):
    raise ImproperlyConfigured(
        f"API_BUNDLE_URL: must start and end with '/', got {API_BUNDLE_URL!r}"
    )

# Learning.
TRACE_RETENTION = timedelta(days=env_value("TRACE_RETENTION_DAYS", env.int, 30))
# Per-tool daily statistics (the tool-health charts) outlive traces: one row per tool and day.
TOOL_DAY_RETENTION = timedelta(days=env_value("TOOL_DAY_RETENTION_DAYS", env.int, 400))
TRACE_BATCH_SIZE = 20_000  # traces ingest stores per transaction (and holds in memory)
API_MAX_TRACES_PER_REQUEST = 1000
DATA_UPLOAD_MAX_MEMORY_SIZE = env_value("DATA_UPLOAD_MAX_MEMORY_SIZE", env.int, 5 * 1024 * 1024)

# OpenTelemetry spans in (learning.otel_ingest): the buffer's caps and when a trace is assembled.
# An operator's verb lexicon over the reviewed one (learning/data/verbs.toml, same shape):
# docs/learning.md, "Risk suggestions".
RISK_VERBS_FILE = env_value("RISK_VERBS_FILE", env.str, "")
OTLP_MAX_SPANS_PER_REQUEST = env_value("OTLP_MAX_SPANS_PER_REQUEST", env.int, 10_000)
OTLP_MAX_SPANS_PER_TRACE = env_value("OTLP_MAX_SPANS_PER_TRACE", env.int, 1_000)
OTLP_MAX_PENDING_TRACES = env_value("OTLP_MAX_PENDING_TRACES", env.int, 10_000)  # per application
OTLP_MAX_PENDING_SPANS = env_value("OTLP_MAX_PENDING_SPANS", env.int, 100_000)  # per application
# Bytes of spans as sent (their kept attributes): per trace, per application, per assembly chunk.
OTLP_MAX_TRACE_BYTES = env_value("OTLP_MAX_TRACE_BYTES", env.int, 16 * 1024 * 1024)
OTLP_MAX_PENDING_BYTES = env_value("OTLP_MAX_PENDING_BYTES", env.int, 256 * 1024 * 1024)
OTLP_ASSEMBLE_BYTES = env_value("OTLP_ASSEMBLE_BYTES", env.int, 16 * 1024 * 1024)
OTLP_SETTLE_SECONDS = env_value("OTLP_SETTLE_SECONDS", env.int, 5)
OTLP_QUIET_SECONDS = env_value("OTLP_QUIET_SECONDS", env.int, 60)
OTLP_KEEP_ASSEMBLED = timedelta(seconds=env_value("OTLP_KEEP_ASSEMBLED_SECONDS", env.int, 3600))

# MCP servers as sources (sources/): which HTTP addresses a server may have (origins with an
# optional path, e.g. https://mcp.example.com/; none by default), and the bounds of one sync.
MCP_URL_ALLOWLIST = env_value("MCP_URL_ALLOWLIST", env.list, [])


def env_secret_destinations(name: str) -> dict[str, list[str]]:
    """``{"MCP_VAR": ["https://host/path", ...], ...}``: where each secret may be sent."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: not JSON: {exc}") from exc
    if not isinstance(value, dict) or not all(
        isinstance(addresses, list) and all(isinstance(a, str) and a for a in addresses)
        for addresses in value.values()
    ):
        raise ImproperlyConfigured(
            f'{name}: expected {{"MCP_VAR": ["https://host/path", ...]}}, a list of '
            "addresses per environment variable"
        )
    return value


# The addresses (as in MCP_URL_ALLOWLIST) each header secret may be sent to: a server's header
# may name an environment variable only when the server's URL lies under one of them.
MCP_SECRET_DESTINATIONS = env_secret_destinations("MCP_SECRET_DESTINATIONS")
MCP_SYNC_TIMEOUT_SECONDS = env_value("MCP_SYNC_TIMEOUT_SECONDS", env.int, 30)
MCP_MAX_TOOLS = env_value("MCP_MAX_TOOLS", env.int, 1_000)
MCP_MAX_BYTES = env_value("MCP_MAX_BYTES", env.int, 8 * 1024 * 1024)
MCP_SYNC_EVERY_MINUTES = env_value("MCP_SYNC_EVERY_MINUTES", env.int, 60)
# What a person can review: characters of one description (a tool's or a parameter's) and of
# all the texts of one tool together; a longer one is refused with its reason. And new tools
# one sync proposes; the rest wait for the next sync.
MCP_MAX_TEXT_CHARS = env_value("MCP_MAX_TEXT_CHARS", env.int, 8_000)
MCP_MAX_TOOL_TEXT_CHARS = env_value("MCP_MAX_TOOL_TEXT_CHARS", env.int, 32_000)
MCP_MAX_NEW_TOOLS_PER_SYNC = env_value("MCP_MAX_NEW_TOOLS_PER_SYNC", env.int, 20)
# mcp_servers add --from-registry reads a server.json from an MCP registry (the official one
# unless --registry names a sub-registry): within this time and this many bytes, no redirect.
MCP_REGISTRY_URL = env_value(
    "MCP_REGISTRY_URL", env.str, "https://registry.modelcontextprotocol.io"
)
MCP_REGISTRY_TIMEOUT_SECONDS = positive_from_env("MCP_REGISTRY_TIMEOUT_SECONDS", env.float, 15.0)
MCP_REGISTRY_MAX_BYTES = positive_from_env("MCP_REGISTRY_MAX_BYTES", env.int, 1024 * 1024)

# The MCP gateway (gateway/, manage.py mcp_gateway): where it listens, how often it re-lists an
# upstream to check the pins of its tools, the sessions kept open per upstream, the caps every
# call meets whatever its contract says, and the queue its traces wait in (full: counted, dropped).
MCP_GATEWAY_BIND = env_value("MCP_GATEWAY_BIND", env.str, "127.0.0.1:8001")
MCP_GATEWAY_VERIFY_SECONDS = env_value("MCP_GATEWAY_VERIFY_SECONDS", env.int, 60)
MCP_GATEWAY_POOL_SIZE = env_value("MCP_GATEWAY_POOL_SIZE", env.int, 2)
MCP_GATEWAY_TIMEOUT_MS = env_value("MCP_GATEWAY_TIMEOUT_MS", env.int, 60_000)
MCP_GATEWAY_MAX_OUTPUT_BYTES = env_value("MCP_GATEWAY_MAX_OUTPUT_BYTES", env.int, 4 * 1024 * 1024)
MCP_GATEWAY_APPLICATION_CONCURRENCY = env_value("MCP_GATEWAY_APPLICATION_CONCURRENCY", env.int, 32)
# Calls a minute per application, all gateway processes together (0: no limit); an application's
# gateway setting in the admin overrides it.
MCP_GATEWAY_CALLS_PER_MINUTE = env_value("MCP_GATEWAY_CALLS_PER_MINUTE", env.int, 600)
if MCP_GATEWAY_CALLS_PER_MINUTE < 0:
    raise ImproperlyConfigured("MCP_GATEWAY_CALLS_PER_MINUTE: must be 0 (no limit) or above")
MCP_GATEWAY_TRACE_QUEUE = env_value("MCP_GATEWAY_TRACE_QUEUE", env.int, 10_000)
MCP_GATEWAY_TRACE_BATCH = env_value("MCP_GATEWAY_TRACE_BATCH", env.int, 500)
# Every batch reads back the earlier steps of each trace in it (ingest's data flow): a batch every
# 5 s, not every second, costs a long session's calls a fifth of that.
MCP_GATEWAY_TRACE_FLUSH_SECONDS = env_value("MCP_GATEWAY_TRACE_FLUSH_SECONDS", env.float, 5.0)

# A tool whose statistics changed is re-inferred this long after the first change (one pending
# refresh per tool; the hourly sweep catches any the broker lost).
LEARNING_REFRESH_DEBOUNCE_SECONDS = env_value("LEARNING_REFRESH_DEBOUNCE_SECONDS", env.int, 30)

# Webhooks (api/webhooks.py, api/outbound.py) go only to these hosts when any are named
# (comma-separated); otherwise to any http(s) URL an administrator enters whose addresses are
# public: private, loopback and link-local networks only when listed in ALLOWED_NETWORKS.
WEBHOOK_ALLOWED_HOSTS = env_value("WEBHOOK_ALLOWED_HOSTS", env.list, [])
WEBHOOK_ALLOWED_NETWORKS = networks_from_env("WEBHOOK_ALLOWED_NETWORKS")
# One attempt, wall clock (name lookup, connect, TLS, every read), and the bytes read of its
# answer (only the status line is needed).
WEBHOOK_DEADLINE_SECONDS = positive_from_env("WEBHOOK_DEADLINE_SECONDS", env.float, 10.0)
WEBHOOK_MAX_ANSWER_BYTES = positive_from_env("WEBHOOK_MAX_ANSWER_BYTES", env.int, 65536)

# Every record reaches the console once: Django's own "django" handler (debug only) is
# replaced by the root's, and the development server's request line leaves 4xx and 5xx to
# django.request, which names the reason.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "below_400": {
            "()": "django.utils.log.CallbackFilter",
            "callback": "ext://config.logging.request_line_below_400",
        },
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["below_400"],
        },
    },
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": env_value("LOG_LEVEL", env.str, "INFO")},
}
