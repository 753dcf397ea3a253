"""Every admin list survives any value a URL can put in its search and filters, and every page
survives any value a runtime can store (#23.5): a 400 or an ignored filter, never a 500."""

import pytest
from django.contrib import admin
from django.db import connection
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from learning.models import Trace
from registry.models import Application
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

# Values a URL can carry (percent-encoded as sent) that a database, a date or an integer
# cannot hold: NULs, invalid UTF-8, far-future and impossible days, huge numbers.
HOSTILE_VALUES = [
    "%00",
    "a%00b",
    "%ED%A0%80",
    "%FF",
    "99999",
    "9999-12-31",
    "9999-12-30",
    "99999-01-01",
    "0001-01-01",
    "0",
    "-1",
    "1e400",
    "9" * 40,
    "2026-02-30",
    "x" * 3000,
]


def nested_json(depth: int) -> str:
    """JSON text nested ``depth`` levels deep, built without recursion (json.dumps gives up
    long before PostgreSQL does)."""
    text = '{"leaf": "bottom"}'
    for level in range(depth):
        text = f'{{"level{level}": {text}}}' if level % 2 else f'{{"list": [{text}]}}'
    return text


def registered():
    return sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def filter_parameters(model_admin, superuser) -> list[str]:
    request = RequestFactory().get("/")
    request.user = superuser
    changelist = model_admin.get_changelist_instance(request)
    names = [name for spec in changelist.filter_specs for name in spec.expected_parameters()]
    if model_admin.date_hierarchy:
        field = model_admin.date_hierarchy
        names += [f"{field}__year", f"{field}__month", f"{field}__day"]
    return names


def query_string(query: dict[str, str]) -> str:
    return "&".join(f"{name}={value}" for name, value in query.items())


def hostile_queries(model_admin, superuser) -> list[dict[str, str]]:
    queries = [{"q": value} for value in HOSTILE_VALUES if model_admin.search_fields]
    for name in filter_parameters(model_admin, superuser):
        queries += [{name: value} for value in HOSTILE_VALUES]
    if model_admin.date_hierarchy:
        field = model_admin.date_hierarchy
        for year, month, day in (
            ("99999", "1", "1"),
            ("9999", "12", "31"),
            ("1", "1", "1"),
            ("2026", "13", "1"),
            ("2026", "2", "31"),
            ("0", "0", "0"),
        ):
            queries.append({f"{field}__year": year, f"{field}__month": month, f"{field}__day": day})
    return queries


@pytest.fixture
def lived_in(registry, proposer):
    """Rows behind every list filter: a filter with no choices is left out of the list, and
    its values never parsed (the trace list's day filter answered 500 only once a day had
    traces)."""
    from learning.fold import traces_fold_pending
    from learning.ingest import traces_ingest
    from tests.helpers import change_ticket

    client_for("assistant")
    application = Application.objects.get(name="assistant")
    calls = [
        {"trace_id": f"run-{n}", "step": 1, "tool": "calendar.find_events",
         "args": {"event_query": "sync"}, "status": "success", "duration_ms": 80,
         "occurred_at": timezone.now().isoformat()}
        for n in range(3)
    ]  # fmt: skip
    traces_ingest(items=enumerate(calls), application=application)
    traces_fold_pending()
    change_ticket(proposer)


@pytest.mark.parametrize("model", [model for model, _ in registered()], ids=lambda m: m._meta.label)
def test_every_changelist_survives_hostile_search_and_filters(
    admin_client, admin_user, lived_in, model
):
    model_admin = admin.site._registry[model]
    url = changelist_url(model)
    admin_client.raise_request_exception = False
    failures = []
    for query in hostile_queries(model_admin, admin_user):
        response = admin_client.get(f"{url}?{query_string(query)}")
        if response.status_code >= 500 or response.status_code not in (200, 302, 400):
            failures.append((query, response.status_code))
    assert failures == []


@pytest.mark.parametrize("path", ["%00", "a%00b", "%FF"])
def test_a_nul_anywhere_in_an_admin_query_is_a_400(admin_client, path):
    response = admin_client.get(f"{reverse('admin:index')}?anything={path}")
    assert response.status_code in (200, 400)
    response = admin_client.get(f"{reverse('admin:registry_tool_changelist')}?{path}=1")
    assert response.status_code in (200, 302, 400)
    response = admin_client.get(
        f"{reverse('admin:registry_tool_changelist')}?lifecycle__exact={path}"
    )
    assert response.status_code in (200, 302, 400)


def test_a_run_nested_900_levels_deep_opens_in_the_admin(admin_client):
    trace = Trace.objects.create(
        trace_id="deep-run", step=0, tool_name="calendar.find_events",
        status=Trace.Status.SUCCESS, occurred_at=timezone.now(),
    )  # fmt: skip
    # Written as text: Python's own encoder could not make a value this deep.
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE learning_trace SET args = %s{cast}, state_before = %s{cast},"
            f" state_after = %s{cast}, output = %s{cast} WHERE id = %s",
            [nested_json(900)] * 4 + [trace.pk],
        )
    page = admin_client.get(reverse("admin:learning_trace_change", args=[trace.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "level899" in body and "bottom" in body
    listing = admin_client.get(reverse("admin:learning_trace_changelist") + "?trace_id=deep-run")
    assert listing.status_code == 200 and "deep-run" in listing.content.decode()


def test_the_trace_list_filters_the_last_day_a_date_holds(admin_client, lived_in):
    """The day filter is live (its day has traces) and answers a list for the last day."""
    url = changelist_url(Trace)
    page = admin_client.get(url).content.decode()
    assert f"?day={timezone.now().date().isoformat()}" in page  # the filter is shown
    for value in ("9999-12-31", "0001-01-01", "2026-02-30", "99999-01-01", "today"):
        response = admin_client.get(f"{url}?day={value}")
        assert response.status_code == 200, value
        assert "run-0" not in response.content.decode(), value
    today = admin_client.get(f"{url}?day={timezone.now().date().isoformat()}").content.decode()
    assert "run-0" in today
