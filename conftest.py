"""The tests' fixtures, in one place: the people of the review workflow, a small vocabulary,
an approved registry with runtimes, a real Chromium, a real Celery worker, the demo served
live, eager Celery, the stand-in MCP server's tools, and the API's two read paths. Tests use
them by name as arguments and never import them; helpers they call are in the ``tests``
package (``tests/helpers.py`` first)."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db.models.sql.compiler import SQLCompiler
from rest_framework.test import APIClient

from config.celery_app import app as celery_app
from registry.models import Application, Permission, RiskLevel, StateVariable, Tool
from reviews.services import registry_import
from tests.fast_client import fast, plain
from tests.helpers import approved_tool, client_for, contract, database_url, event_contract

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent


def _user(django_user_model, username: str, *, reviewer: bool = False, **extra):
    user = django_user_model.objects.create_user(
        username=username, password="pw-" + username, email=f"{username}@example.com", **extra
    )
    if reviewer:
        user.groups.add(Group.objects.get(name="Reviewers"))
    return user


@pytest.fixture
def reviewer(django_user_model):
    return _user(django_user_model, "rita", reviewer=True, is_staff=True)


@pytest.fixture
def second_reviewer(django_user_model):
    return _user(django_user_model, "sam", reviewer=True, is_staff=True)


@pytest.fixture
def proposer(django_user_model):
    return _user(django_user_model, "paul", reviewer=True, is_staff=True)


@pytest.fixture
def outsider(django_user_model):
    return _user(django_user_model, "olga", is_staff=True)


@pytest.fixture
def vocabulary(db):
    variables = {
        "event_id": ["eventId", "evt_id"],
        "event_query": [],
        "event_details": [],
        "new_time": [],
        "event_updated": [],
        "user_id": [],
    }
    for name, aliases in variables.items():
        StateVariable.objects.create(name=name, aliases=aliases)
    for name in ("read", "write", "delete", "external_api"):
        Permission.objects.create(name=name)
    return variables


@pytest.fixture
def published(vocabulary):
    """The approved ``calendar.find_events`` of ``tests.helpers.contract``."""
    approved_tool()
    return Tool.objects.get(name="calendar.find_events")


@pytest.fixture
def runtime_client_factory(db):
    """An API client authenticated as a runtime of the named application (created if missing)."""
    return client_for


@pytest.fixture
def registry(vocabulary):
    """Four approved tools over three risks and permissions."""
    registry_import(
        data=[
            contract(),
            event_contract("calendar.get_event"),
            contract(
                name="calendar.delete_event",
                requires=["event_id"],
                produces=[],
                risk="high",
                permissions=["delete"],
            ),
            contract(
                name="weather.forecast",
                requires=[],
                produces=[],
                permissions=["external_api"],
                description="Weather forecast for a city.",
            ),
        ],
        approve=True,
    )
    return Tool.objects.all()


@pytest.fixture
def runtime(registry):
    """The runtime of the "assistant" application, which sees every tool of ``registry``."""
    return client_for("assistant")


@pytest.fixture
def restricted(registry):
    """The runtime of an application allowed medium risk and read/write permissions only."""
    application = Application.objects.create(
        name="restricted", max_risk=RiskLevel.objects.get(name="medium")
    )
    application.allowed_permissions.set(Permission.objects.filter(name__in=["read", "write"]))
    application.enabled_tools.set(Tool.objects.all())
    return client_for("restricted")


@pytest.fixture(scope="session")
def demo_file() -> dict:
    """The demo registry file (demo/registry.json), read: nothing in the database."""
    return json.loads((ROOT / "demo" / "registry.json").read_text())


@pytest.fixture(scope="session")
def demo_tools(demo_file: dict) -> dict[str, dict]:
    """The demo registry file's contracts by name."""
    return {tool["name"]: tool for tool in demo_file["tools"]}


@pytest.fixture
def browser(monkeypatch):
    """A real headless Chromium (Debian's; never a downloaded one)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls stay synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"],
        )  # fmt: skip
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The cache outlives a test's rolled-back transaction: start every test without it."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _worker_start() -> subprocess.Popen:
    """A real Celery worker (solo pool) on the test database and the configured broker."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
           "DATABASE_URL": database_url()}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env,
    )  # fmt: skip


def _worker_stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def worker(django_db_blocker):
    process = _worker_start()
    yield process
    _worker_stop(process)


@pytest.fixture
def start_worker(django_db_blocker):
    """Starts a real worker each time it is called (each stopped after the test): a test can
    kill one and start the next."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        started.append(_worker_start())
        return started[-1]

    yield start
    for process in started:
        _worker_stop(process)


@pytest.fixture
def demo_site(live_server):
    """The demo registry and traces loaded, served live: the base URL."""
    call_command("load_demo", verbosity=0, stdout=io.StringIO())
    return live_server.url


@pytest.fixture
def distinct_leaks(monkeypatch):
    """The SQL of every ``DISTINCT`` query compiled while the test runs whose ordering added
    columns to what it selects: an empty list when none did.

    Django compiles ``.values_list("tool_name").distinct()`` on a model whose ``Meta.ordering``
    is ``["-pk"]`` into ``SELECT DISTINCT tool_name, id``: the ordering's columns join the
    selection (``SQLCompiler.get_extra_select``), and DISTINCT then returns one row per row
    instead of one per value. That method is the one place the compiler does this, whatever
    the model, the ordering (its default or an explicit ``order_by``) or the call site, so
    recording what it returns finds every instance of the class, from the SQL itself."""
    leaks: list[str] = []
    compile_extra = SQLCompiler.get_extra_select

    def recorded(self, order_by, select):
        extra = compile_extra(self, order_by, select)
        if extra:
            columns = ", ".join(sql for _, (sql, _params), _alias in extra)
            leaks.append(f"{self.query.model.__name__}: DISTINCT also over {columns}")
        return extra

    monkeypatch.setattr(SQLCompiler, "get_extra_select", recorded)
    return leaks


@pytest.fixture
def eager(monkeypatch):
    """Celery runs a queued task where it is queued (the fold a commit queues): the real task,
    no worker."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", True)


@pytest.fixture
def get_event(vocabulary):
    """The approved, high-risk ``calendar.get_event``, which requires an ``event_id``."""
    document = event_contract(
        "calendar.get_event", description="Read one calendar event by id.", risk="high"
    )
    document["input_schema"]["additionalProperties"] = False
    registry_import(data=[document], approve=True)
    return Tool.objects.get(name="calendar.get_event")


@pytest.fixture
def tools_file(tmp_path):
    """Write the stand-in MCP server's tools (a list of MCP definitions, or a special spec)
    between syncs: ``sources/tests/standin_server.py`` reads them at each listing."""
    path = tmp_path / "tools.json"

    def write(value) -> Path:
        path.write_text(json.dumps(value))
        return path

    write([])
    return write


def pytest_generate_tests(metafunc):
    """A module marked ``both_read_paths`` runs each of its tests twice (``read_path``)."""
    if metafunc.definition.get_closest_marker("both_read_paths"):
        metafunc.parametrize("read_path", ["django", "fast"], indirect=True)


@pytest.fixture(autouse=True)
def read_path(request, monkeypatch):
    """The API's read tests run twice: straight to the views (the fast read path's middleware
    left out), and through the fast read path, each application's bundle rendered once a view
    has answered it (as the worker would after a publication) and Celery eager for the renders
    the fast path queues. Both must pass unchanged. Unmarked tests use the normal stack."""
    path = getattr(request, "param", None)
    if path is not None:
        original = APIClient.__init__

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if path == "fast":
                fast(self, render=True)
            else:
                plain(self)

        monkeypatch.setattr(APIClient, "__init__", init)
        monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    return path or "django"
