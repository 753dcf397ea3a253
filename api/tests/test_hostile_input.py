"""Hostile request bodies, paths and query strings: a clear 4xx (or a per-item rejection) at a
cost linear in their size, and a 503 only when the database is really unreachable."""

import io
import json
import logging
import re
import tracemalloc

import pytest
from django.db import DataError, OperationalError
from django.test import override_settings
from rest_framework.exceptions import ParseError

from api.parsers import StrictJSONParser
from api.serializers import FilterRequest, PlanRequest
from learning.aggregates import aggregate_add, new_aggregate
from learning.models import Trace
from learning.traces import trace_parse
from registry.validation import unstorable_text
from tests.helpers import trace

BODY = 100_000


def _nested(depth: int, key: str) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {key: value}
    return value


# Each about 100 KB of JSON, shaped to punish a walk that spells a path per value or keeps a
# set per leaf.
SHAPES = {
    "a long key over a long list": {"k" * 50_000: [1] * 25_000},
    "long keys nested deep": _nested(450, "k" * 100),
    "many long keys over lists": {f"{i:03}" + "k" * 500: [1] * 250 for i in range(100)},
    "many keys": {f"k{i}": 1 for i in range(10_000)},
    "many distinctive leaves": {"a": list(range(1000, 17_000))},
    "many arguments": {f"a{i}": 1000 + i for i in range(8_000)},
}


def _item(args) -> dict:
    return trace(1, args=args, state_before={"v": list(range(1000, 2000)), **args})


def _peak(function, *args, **kwargs) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        function(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _size(value) -> int:
    return len(json.dumps(value))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_checking_text_costs_at_most_ten_times_the_body(shape):
    item = _item(shape)
    assert _size(item) >= BODY
    assert _peak(unstorable_text, item) <= 10 * _size(item)
    assert _peak(trace_parse, item, aliases={}) <= 10 * _size(item)


def test_a_traces_unknown_fields_are_each_named_and_known_ones_pass():
    parsed, errors = trace_parse(trace(zeta=1, alpha=2, messages=[]), aliases={})
    assert parsed is None
    assert errors == [("alpha", "unknown field"), ("zeta", "unknown field")]
    parsed, errors = trace_parse(trace(messages=[]), aliases={})
    assert errors == [] and parsed is not None


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_folding_a_trace_costs_at_most_ten_times_the_body(shape):
    item = _item(shape)
    assert _peak(aggregate_add, new_aggregate(), item) <= 10 * _size(item)


def test_a_flow_through_many_arguments_is_still_found():
    aggregate = new_aggregate()
    args = {f"a{i}": "evt_9" for i in range(50)}
    aggregate_add(aggregate, trace(1, args=args, state_before={"event_id": "evt_9"}))
    assert aggregate["variables"]["event_id"]["flows"] == 1
    assert all(entry["from"] == {"event_id": 1} for entry in aggregate["args"].values())


def test_a_problem_is_named_by_its_path_with_long_keys_shortened():
    assert unstorable_text({"args": {"q": [1, -float("inf")]}}) == (
        "args.q[1]: is a number out of range"
    )
    assert unstorable_text({"args": {"k" * 1000: ["ok", "a\x00"]}}) == (
        "args." + "k" * 61 + "...[1]: contains a NUL character (\\u0000)"
    )
    assert unstorable_text({"args": {"\ud800": 1}}) == (
        "args: contains an unpaired surrogate (invalid Unicode)"
    )


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_the_parser_checks_cost_little_beyond_reading_the_json(shape):
    text = json.dumps({"plan": [], "state": shape})
    reading = _peak(json.loads, text)
    parsing = _peak(StrictJSONParser().parse, io.BytesIO(text.encode()))
    assert parsing <= reading + 10 * len(text)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[{"a": 1, "b": 2, "a": 3}]', "'a'"),
        ('{"x": [{"k": {}, "k": {}}]}', "'k'"),
        ('[{"' + "d" * 70 + '": 1, "' + "d" * 70 + '": 1}]', repr("d" * 61) + "..."),
    ],
)
def test_the_parser_refuses_a_duplicate_key_wherever_it_is(text, key):
    with pytest.raises(ParseError, match=re.escape(f"duplicate key {key}")):
        StrictJSONParser().parse(io.BytesIO(text.encode()))


def test_the_parser_keeps_every_key_of_objects_without_duplicates():
    text = '[{"a": 1, "b": {"c": [{"d": null}], "e": 2}}, {}]'
    assert StrictJSONParser().parse(io.BytesIO(text.encode())) == json.loads(text)


def test_a_long_list_of_bad_names_is_one_error_not_one_per_item():
    body = {"state": [{}] * 30_000, "goal": ["x"]}
    serializer = FilterRequest(data=body)
    assert _peak(serializer.is_valid) <= 10 * _size(body)
    assert list(serializer.errors) == ["state"]
    assert len(serializer.errors["state"]) == 1


def test_a_long_plan_is_refused_before_its_steps_are_checked():
    serializer = PlanRequest(data={"plan": [[]] * 30_000})
    assert not serializer.is_valid()
    assert len(serializer.errors["plan"]) == 1


# --- numbers out of range -------------------------------------------------------------------


def _post_raw(client, url: str, body: str):
    return client.generic("POST", url, body, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw, field",
    [
        ('"args": {"q": 1e999}', "args"),
        ('"output": [-1e999]', "output"),
        ('"state_before": {"x": {"y": 1e999}}', "state_before"),
        ('"duration_ms": 1e999', "duration_ms"),
        ('"args": {"q": ' + "9" * 5000 + "}", "args"),
    ],
)
def test_a_number_out_of_range_rejects_its_item_and_keeps_the_batch(runtime, raw, field):
    good = json.dumps(trace(1))
    bad = json.dumps({key: value for key, value in trace(2).items() if key != field})
    bad = bad[:-1] + ", " + raw + "}"
    response = _post_raw(runtime, "/api/v1/traces/", f"[{good}, {bad}, {json.dumps(trace(3))}]")
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 2 and body["rejected"] == 1
    assert body["problems"][0]["index"] == 1
    assert body["problems"][0]["field"] == field
    assert "out of range" in body["problems"][0]["reason"]
    assert set(Trace.objects.values_list("step", flat=True)) == {1, 3}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, body, field",
    [
        ("/api/v1/plans/validate/", '{"plan": [{"tool": "x", "args": {"n": 1e999}}]}',
         "plan[0].args.n"),
        ("/api/v1/plans/validate/", '{"plan": [], "state": {"n": -1e400}}', "state.n"),
        ("/api/v1/filter/", '{"state": [], "goal": ["x"], "max_tools": 1e999}', "max_tools"),
    ],
)  # fmt: skip
def test_a_number_out_of_range_in_a_request_is_a_400_naming_it(runtime, url, body, field):
    response = _post_raw(runtime, url, body)
    assert response.status_code == 400
    assert "out of range" in response.json()["error"]["fields"][field][0]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "override, field",
    [
        ({"step": 10**30}, "step"),
        ({"step": -1}, "step"),
        ({"trace_id": "t" * 100_000}, "trace_id"),
        ({"duration_ms": 1e308}, "duration_ms"),
        ({"duration_ms": -0.5}, "duration_ms"),
        ({"occurred_at": "99999-01-01T00:00:00Z"}, "occurred_at"),
        ({"occurred_at": "+99999-01-01T00:00:00Z"}, "occurred_at"),
    ],
)
def test_an_implausible_field_rejects_its_item_by_index_and_field(runtime, override, field):
    response = runtime.post(
        "/api/v1/traces/",
        [trace(1), {**trace(2), **override}, trace(3)],
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 2
    assert [(p["index"], p["field"]) for p in body["problems"]] == [(1, field)]
    assert len(body["problems"][0]["reason"]) < 200
    assert set(Trace.objects.values_list("step", flat=True)) == {1, 3}


# --- text no database can store, and what a 503 means ---------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, body, field",
    [
        ("/api/v1/plans/validate/", '{"plan": [{"tool": "x", "args": {"q": "\\ud800"}}]}',
         "plan[0].args.q"),
        ("/api/v1/plans/validate/", '{"plan": [{"tool": "a\\u0000b"}]}', "plan[0].tool"),
        ("/api/v1/plans/validate/", '{"plan": [], "config": {"\\udc00": 1}}', "config"),
        ("/api/v1/filter/", '{"state": ["a\\u0000"], "goal": ["x"]}', "state[0]"),
        ("/api/v1/filter/", '{"state": [], "goal": ["\\ud800"]}', "goal[0]"),
    ],
)  # fmt: skip
def test_text_no_database_can_store_in_a_request_is_a_400_naming_it(runtime, url, body, field):
    response = _post_raw(runtime, url, body)
    assert response.status_code == 400
    assert set(response.json()["error"]) == {"code", "message", "fields"}
    assert field in response.json()["error"]["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/tools/a%00b/",
        "/api/v1/tools/a%00b/versions/",
        "/api/v1/tools/%ED%A0%80/",
        "/api/v1/tools/" + "a" * 5000 + "/",
    ],
)
def test_a_tool_name_no_tool_can_have_is_a_404(runtime, url):
    response = runtime.get(url)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["risk", "max_risk", "permission", "requires", "produces", "domain", "search"]
)
@pytest.mark.parametrize("path", ["/api/v1/tools/", "/api/v1/export/openai/"])
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(runtime, path, name):
    response = runtime.get(f"{path}?{name}=a%00b")
    assert response.status_code == 400
    assert name in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_invalid_utf_8_in_a_query_parameter_matches_nothing(runtime):
    response = runtime.get("/api/v1/tools/?search=%ED%A0%80")
    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.django_db
def test_a_value_the_database_refuses_is_a_400_not_an_outage(runtime, monkeypatch, caplog):
    def refuse(self, request):
        raise DataError("invalid byte sequence for encoding UTF8: 0x00")

    monkeypatch.setattr("api.views.RevisionView.get", refuse)
    response = runtime.get("/api/v1/revision/")
    assert response.status_code == 400
    assert "Retry-After" not in response
    assert "DataError" in caplog.text


@pytest.mark.django_db
@override_settings(DEBUG_PROPAGATE_EXCEPTIONS=False)
def test_an_unreachable_database_is_a_503_and_the_log_says_why(runtime, monkeypatch, caplog):
    def lost(self, request):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("api.views.RevisionView.get", lost)
    with caplog.at_level(logging.WARNING, logger="api.errors"):
        response = runtime.get("/api/v1/revision/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "OperationalError: server closed the connection unexpectedly" in caplog.text
