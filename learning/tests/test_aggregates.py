"""Folding traces into aggregates: what counts as an argument sent."""

from datetime import UTC, datetime, timedelta, timezone

from learning.aggregates import aggregate_add, aggregate_merge, new_aggregate
from learning.inference import infer_contract


def strict_call(query: str, limit: int | None) -> dict:
    # OpenAI's strict mode sends every property, null for each optional one the model left out.
    return {
        "trace_id": query, "step": 0, "status": "success",
        "args": {"query": query, "limit": limit},
        "state_before": {}, "state_after": {},
    }  # fmt: skip


def test_a_null_argument_counts_as_left_out():
    aggregate = new_aggregate()
    for index in range(10):
        aggregate_add(aggregate, strict_call(f"q{index}", 5 if index < 3 else None))

    assert aggregate["args"]["query"]["count"] == 10
    assert aggregate["args"]["limit"] == {**aggregate["args"]["limit"], "count": 3}
    assert aggregate["args"]["limit"]["types"] == {"integer": 3}


def test_an_argument_strict_mode_left_out_is_inferred_optional_and_typed():
    aggregate = new_aggregate()
    for index in range(10):
        aggregate_add(aggregate, strict_call(f"q{index}", 5 if index < 3 else None))

    inferred = infer_contract(
        name="docs.search", description="Search documents.", input_schema=None, aggregate=aggregate
    )

    assert inferred["input_schema"]["required"] == ["query"]
    assert inferred["input_schema"]["properties"]["limit"] == {"type": "integer"}


def test_it_keeps_when_the_folded_calls_were_first_and_last_made():
    start = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
    one, two = new_aggregate(), new_aggregate()
    for days, agg in ((2, one), (0, one), (5, two)):
        aggregate_add(agg, {"status": "success", "occurred_at": start + timedelta(days=days)})
    # Another offset is the same moment, kept in UTC.
    later = (start + timedelta(days=1)).astimezone(timezone(timedelta(hours=2)))
    aggregate_add(two, {"status": "success", "occurred_at": later})
    aggregate_merge(one, two)
    assert one["first_seen"] == start.isoformat()
    assert one["last_seen"] == (start + timedelta(days=5)).isoformat()
