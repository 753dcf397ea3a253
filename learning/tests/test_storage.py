"""How traces are written: every value comes back as it was sent, in bounded memory."""

import json
import tracemalloc

import pytest
from django.db import connection
from django.utils import timezone

from learning.ingest import SMALL_JSON_NODES, traces_ingest
from learning.models import Trace

pytestmark = pytest.mark.django_db

AWKWARD = 'tab\there, line\nbreak, return\r, back\\slash, quote", \\N, é, 🙂, \u2028'


def trace(step: int, **fields) -> dict:
    return {
        "trace_id": "run", "step": step, "tool": "calendar.get_event", "status": "success",
        "occurred_at": timezone.now().isoformat(), **fields,
    }  # fmt: skip


@pytest.mark.parametrize("nodes", [3, SMALL_JSON_NODES + 10], ids=["small", "streamed"])
def test_every_value_comes_back_as_it_was_sent(nodes):
    args = {AWKWARD: [AWKWARD] * nodes, "n": [1.5, -0.0, 10**40, True, None], "k\\": {"\t": {}}}
    before = {"a\\b": [AWKWARD] * nodes}
    after = {"x": [AWKWARD, {"y": "\\\\"}] * nodes}  # two large values side by side
    sent = trace(
        0, trace_id=AWKWARD[:60], args=args, state_before=before, state_after=after,
        output=AWKWARD, error=AWKWARD, duration_ms=12,
    )  # fmt: skip

    result = traces_ingest(items=enumerate([sent]))

    assert result.accepted == 1, result.rejected
    stored = Trace.objects.get()
    assert stored.trace_id == AWKWARD[:60]
    assert stored.args == json.loads(json.dumps(args))
    assert stored.state_before == before and stored.state_after == after
    assert stored.output == AWKWARD and stored.error == AWKWARD and stored.duration_ms == 12


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's")
def test_storing_a_long_list_under_a_long_key_holds_memory_in_proportion():
    # Encoded in one piece, this trace's arguments took 15 times their size.
    sent = trace(0, args={"k" * 50_000: [1] * 25_000})
    size = len(json.dumps(sent))

    tracemalloc.start()
    try:
        result = traces_ingest(items=enumerate([sent]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert result.accepted == 1
    assert peak < 5 * size, f"{peak:,} bytes for a {size:,}-byte trace"
