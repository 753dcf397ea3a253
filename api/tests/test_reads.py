import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from api.models import RuntimeToken
from reviews.services import ProposalSeen, contract_propose, review_approve
from tests.helpers import client_for, contract

pytestmark = [pytest.mark.django_db, pytest.mark.both_read_paths]


def names(response) -> list[str]:
    return [item["name"] for item in response.json()["results"]]


def test_it_lists_approved_contracts(runtime):
    response = runtime.get("/api/v1/tools/")
    assert response.status_code == 200
    assert names(response) == [
        "calendar.delete_event",
        "calendar.find_events",
        "calendar.get_event",
        "weather.forecast",
    ]


def test_it_answers_401_without_or_with_a_bad_token(registry):
    assert APIClient().get("/api/v1/tools/").status_code == 401
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer trk_nope")
    response = bad.get("/api/v1/tools/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_it_answers_401_for_a_revoked_or_expired_token(registry):
    client = client_for("assistant")
    RuntimeToken.objects.update(revoked_at=timezone.now())
    assert client.get("/api/v1/tools/").status_code == 401
    client = client_for("assistant")
    RuntimeToken.objects.filter(revoked_at__isnull=True).update(expires_at=timezone.now())
    assert client.get("/api/v1/tools/").status_code == 401


def test_it_answers_403_for_a_missing_scope(registry):
    client = client_for("assistant", scopes=["traces:write"])
    response = client.get("/api/v1/tools/")
    assert response.status_code == 403
    assert "contracts:read" in response.json()["error"]["message"]
    reader = client_for("assistant", scopes=["contracts:read"])
    assert reader.post("/api/v1/traces/", [], format="json").status_code == 403


def test_a_restricted_application_sees_only_what_it_may(restricted):
    assert names(restricted.get("/api/v1/tools/")) == ["calendar.find_events", "calendar.get_event"]
    assert restricted.get("/api/v1/tools/weather.forecast/").status_code == 404
    assert restricted.get("/api/v1/tools/calendar.delete_event/").status_code == 404
    assert restricted.get("/api/v1/tools/no.such_tool/").status_code == 404


def test_an_application_sees_only_enabled_tools(registry):
    from registry.models import Application, Tool

    client = client_for("narrow")
    application = Application.objects.get(name="narrow")
    application.all_tools = False
    application.save()
    application.enabled_tools.set(Tool.objects.filter(name="calendar.get_event"))
    assert names(client.get("/api/v1/tools/")) == ["calendar.get_event"]


def test_it_never_serves_a_proposal(runtime, proposer):
    contract_propose(document=contract(description="Changed but not approved."), author=proposer)
    body = runtime.get("/api/v1/tools/calendar.find_events/").json()
    assert body["description"] == "Find calendar events matching a free-text query."
    assert body["version"] == 1


def test_the_detail_is_the_whole_contract_document(runtime):
    body = runtime.get("/api/v1/tools/calendar.find_events/").json()
    expected = contract()
    for key, value in expected.items():
        assert body[key] == value, key
    assert body["version"] == 1 and body["approved_at"] and len(body["content_hash"]) == 64


@pytest.mark.parametrize(
    "query, expected",
    [
        ("risk=high", ["calendar.delete_event"]),
        ("max_risk=low", ["calendar.find_events", "calendar.get_event", "weather.forecast"]),
        ("permission=external_api", ["weather.forecast"]),
        ("requires=event_id", ["calendar.delete_event", "calendar.get_event"]),
        ("produces=event_details", ["calendar.get_event"]),
        ("domain=weather", ["weather.forecast"]),
        ("search=forecast", ["weather.forecast"]),
    ],
)
def test_it_filters(runtime, query, expected):
    assert names(runtime.get(f"/api/v1/tools/?{query}")) == expected


def test_an_unknown_max_risk_is_a_400_naming_the_field(runtime):
    response = runtime.get("/api/v1/tools/?max_risk=extreme")
    assert response.status_code == 400
    assert "max_risk" in response.json()["error"]["fields"]


def test_the_page_size_is_bounded(runtime):
    body = runtime.get("/api/v1/tools/?page_size=100000").json()
    assert body["count"] == 4
    assert len(body["results"]) == 4


def test_it_answers_304_to_a_matching_etag_and_a_new_etag_after_publishing(
    runtime, proposer, reviewer
):
    first = runtime.get("/api/v1/tools/calendar.find_events/")
    etag = first["ETag"]
    assert etag.startswith('"') and "no-cache" not in first["Cache-Control"]
    again = runtime.get("/api/v1/tools/calendar.find_events/", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    ticket = contract_propose(document=contract(description="Better words."), author=proposer)
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    from django.core.cache import cache

    cache.clear()
    changed = runtime.get("/api/v1/tools/calendar.find_events/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed.json()["version"] == 2


def test_a_304_reads_no_contract_row(runtime, django_assert_max_num_queries):
    etag = runtime.get("/api/v1/tools/calendar.find_events/")["ETag"]
    with django_assert_max_num_queries(1) as captured:
        assert (
            runtime.get("/api/v1/tools/calendar.find_events/", HTTP_IF_NONE_MATCH=etag).status_code
            == 304
        )
    assert not any("registry_contractversion" in q["sql"] for q in captured.captured_queries)


def test_a_warm_contract_read_costs_at_most_two_queries(runtime, django_assert_max_num_queries):
    runtime.get("/api/v1/tools/calendar.find_events/")
    with django_assert_max_num_queries(2):
        assert runtime.get("/api/v1/tools/calendar.get_event/").status_code == 200


def test_a_warm_list_page_costs_at_most_four_queries(restricted, django_assert_max_num_queries):
    restricted.get("/api/v1/tools/")
    with django_assert_max_num_queries(4):
        assert restricted.get("/api/v1/tools/?page_size=200").status_code == 200


def test_versions_lists_the_approved_history(runtime, proposer, reviewer):
    ticket = contract_propose(document=contract(description="Second wording."), author=proposer)
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    body = runtime.get("/api/v1/tools/calendar.find_events/versions/").json()
    assert [item["version"] for item in body] == [2, 1]


def test_revision_moves_when_a_contract_is_published(runtime, proposer, reviewer):
    from django.core.cache import cache

    before = runtime.get("/api/v1/revision/").json()["revision"]
    ticket = contract_propose(document=contract(description="Third wording."), author=proposer)
    review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    cache.clear()
    assert runtime.get("/api/v1/revision/").json()["revision"] == before + 1


def test_a_staff_session_may_browse(registry, reviewer):
    client = APIClient()
    client.force_login(reviewer)
    assert client.get("/api/v1/tools/").status_code == 200


def test_a_non_staff_session_may_not(registry, django_user_model):
    user = django_user_model.objects.create_user("joe", password="pw")
    client = APIClient()
    client.force_login(user)
    assert client.get("/api/v1/tools/").status_code == 403


def test_the_schema_and_docs_are_served(registry):
    client = APIClient()
    assert client.get("/api/v1/schema/").status_code == 200
    assert client.get("/api/v1/docs/").status_code == 200


def test_throttling_answers_429_with_retry_after(runtime, settings):
    from django.core.cache import cache

    from api.views import RuntimeThrottle

    cache.clear()
    RuntimeThrottle.THROTTLE_RATES = {"runtime": "3/min"}
    try:
        statuses = [runtime.get("/api/v1/revision/").status_code for _ in range(4)]
        response = runtime.get("/api/v1/revision/")
    finally:
        RuntimeThrottle.THROTTLE_RATES = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    assert statuses[:3] == [200, 200, 200]
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "throttled"


def test_a_revoked_token_stops_at_once_even_when_cached(registry, admin_user):
    from django.test import Client

    client = client_for("assistant")
    assert client.get("/api/v1/revision/").status_code == 200  # now cached
    admin = Client()
    admin.force_login(admin_user)
    admin.post(
        "/admin/api/runtimetoken/",
        {
            "action": "revoke",
            "_selected_action": list(RuntimeToken.objects.values_list("pk", flat=True)),
        },
    )
    from django.core.cache import cache

    cache.delete("registry:revision")  # what the commit of the bump does outside a test transaction
    assert client.get("/api/v1/revision/").status_code == 401


def test_a_warm_read_is_served_without_the_database(runtime, django_assert_num_queries):
    first = runtime.get("/api/v1/tools/calendar.find_events/")
    with django_assert_num_queries(0):
        again = runtime.get("/api/v1/tools/calendar.find_events/")
    assert again.status_code == 200
    assert again.content == first.content
    assert again["ETag"] == first["ETag"]


def test_a_process_keeps_the_revision_briefly_and_forgets_it_when_it_publishes(
    runtime, settings, proposer, reviewer, django_capture_on_commit_callbacks
):
    from registry.models import Revision
    from registry.revision import revision_current, revision_forget

    settings.REVISION_LOCAL_SECONDS = 60
    revision_forget()
    seen = revision_current()
    Revision.objects.filter(pk=1).update(value=seen + 100)  # another process's change
    from django.core.cache import cache

    cache.clear()
    assert revision_current() == seen  # within the bound: the local copy answers
    with django_capture_on_commit_callbacks(execute=True):
        ticket = contract_propose(document=contract(description="Newer words."), author=proposer)
        review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))
    assert revision_current() == seen + 101  # this process published: it forgot its copy
    revision_forget()
