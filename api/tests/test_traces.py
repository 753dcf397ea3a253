import pytest

from learning.models import Trace
from tests.helpers import trace

pytestmark = pytest.mark.django_db


def test_it_stores_traces_and_resolves_aliases(runtime):
    response = runtime.post("/api/v1/traces/", [trace(1), trace(2)], format="json")
    assert response.status_code == 200
    assert response.json() == {"accepted": 2, "duplicates": 0, "rejected": 0, "problems": []}
    stored = Trace.objects.get(step=1)
    assert stored.state_after == {"event_query": "team sync", "event_id": "evt_9"}
    assert stored.application.name == "assistant"


def test_a_re_post_is_idempotent(runtime):
    runtime.post("/api/v1/traces/", [trace(1)], format="json")
    response = runtime.post("/api/v1/traces/", [trace(1), trace(1), trace(2)], format="json")
    assert response.json()["accepted"] == 1
    assert response.json()["duplicates"] == 2
    assert Trace.objects.count() == 2


def test_it_reports_each_bad_item_by_index_and_field_and_keeps_the_good(runtime):
    items = [
        trace(1),
        trace(2, status="maybe"),
        {**trace(3), "step": -1},
        "nope",
        trace(5, occurred_at="yesterday"),
    ]
    body = runtime.post("/api/v1/traces/", items, format="json").json()
    assert body["accepted"] == 1 and body["rejected"] == 4
    problems = {(p["index"], p["field"]) for p in body["problems"]}
    assert problems == {(1, "status"), (2, "step"), (3, "(item)"), (4, "occurred_at")}
    assert Trace.objects.count() == 1


def test_an_unknown_tool_is_kept_and_flagged(runtime):
    runtime.post("/api/v1/traces/", [trace(1, tool="crm.lookup_account")], format="json")
    assert Trace.objects.get().unknown_tool is True


@pytest.mark.parametrize(
    "body, content_type, status",
    [
        ('{"not": "a list"}', "application/json", 400),
        ("[" * 10000 + "]" * 10000, "application/json", 400),
        ('[{"trace_id": "a", "trace_id": "b"}]', "application/json", 400),
        ("[NaN]", "application/json", 400),
        (b"[\xff\xfe]", "application/json", 400),
        ("trace_id=1", "application/x-www-form-urlencoded", 415),
    ],
)
def test_hostile_bodies_get_a_clear_4xx(runtime, body, content_type, status):
    response = runtime.generic("POST", "/api/v1/traces/", body, content_type=content_type)
    assert response.status_code == status
    assert set(response.json()["error"]) == {"code", "message", "fields"}


def test_too_many_items_is_a_400(runtime):
    response = runtime.post("/api/v1/traces/", [trace(i) for i in range(1001)], format="json")
    assert response.status_code == 400
    assert "at most 1000" in response.json()["error"]["fields"]["body"][0]
    assert Trace.objects.count() == 0


def test_an_oversized_body_is_a_413(runtime, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = runtime.post("/api/v1/traces/", [trace(i) for i in range(20)], format="json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


@pytest.mark.parametrize(
    "raw, field",
    [
        ('"args": {"q": "a\\u0000b"}', "args"),
        ('"state_before": {"x\\u0000": 1}', "state_before"),
        ('"args": {"q": "\\ud800"}', "args"),
    ],
)
def test_text_no_database_can_store_is_a_clear_rejection(runtime, raw, field):
    body = (
        '[{"trace_id": "t", "step": 1, "tool": "calendar.find_events", "status": "success", '
        + raw
        + "}]"
    )
    response = runtime.generic("POST", "/api/v1/traces/", body, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["rejected"] == 1
    assert response.json()["problems"][0]["field"] == field
    assert Trace.objects.count() == 0


@pytest.mark.parametrize(
    "when", ["0007-01-13T00:00:00+16:00", "1969-12-31T23:59:59Z", "2999-01-01T00:00:00Z"]
)
def test_an_implausible_time_is_rejected_by_field(runtime, when):
    body = runtime.post("/api/v1/traces/", [trace(1, occurred_at=when)], format="json").json()
    assert body["rejected"] == 1 and body["problems"][0]["field"] == "occurred_at"


def test_a_time_zone_is_stored_as_utc(runtime):
    runtime.post(
        "/api/v1/traces/", [trace(1, occurred_at="2026-11-01T12:00:00+05:30")], format="json"
    )
    assert Trace.objects.get().occurred_at.isoformat() == "2026-11-01T06:30:00+00:00"
