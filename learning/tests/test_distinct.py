"""Names read with DISTINCT come back once per name, never once per trace.

``Trace.Meta.ordering`` (``-pk``) would otherwise join every ``DISTINCT`` selection
(``distinct_leaks`` in conftest.py says how that is caught from the compiled SQL), so each
query below returned a row per trace: under the application's lock at ingest, on every OTLP
request, and in each refresh.
"""

import pytest
from django.utils import timezone

from learning.ingest import tool_names_refused, traces_ingest
from learning.models import Trace
from learning.services import tools_refresh, tools_with_new_traces
from registry.models import Application

pytestmark = pytest.mark.django_db


def calls(tool: str, count: int, *, run: str) -> list[dict]:
    return [
        {
            "trace_id": run,
            "step": step,
            "tool": tool,
            "args": {},
            "status": "success",
            "state_before": {},
            "state_after": {},
            "occurred_at": timezone.now().isoformat(),
        }  # fmt: skip
        for step in range(count)
    ]


@pytest.fixture
def limited(db) -> Application:
    return Application.objects.create(name="assistant", all_tools=True, unknown_tool_names=2)


def test_the_guard_sees_the_default_ordering_join_a_distinct_selection(db, distinct_leaks):
    list(Trace.objects.values_list("tool_name", flat=True).distinct())
    assert distinct_leaks == ['Trace: DISTINCT also over "learning_trace"."id"']
    distinct_leaks.clear()
    list(Trace.objects.values_list("tool_name", flat=True).order_by().distinct())
    assert distinct_leaks == []


def test_the_allowance_of_unregistered_names_counts_names(limited, distinct_leaks):
    traces_ingest(items=enumerate(calls("crm.a", 3, run="r1") + calls("crm.b", 3, run="r2")),
                  application=limited)  # fmt: skip
    result = traces_ingest(
        items=enumerate(calls("crm.c", 1, run="r3") + calls("crm.a", 1, run="r4")),
        application=limited,
    )
    assert result.accepted == 1
    assert [problem for problem in result.rejected if "crm.c" in str(problem)]
    assert Trace.objects.filter(tool_name="crm.a").count() == 4
    assert distinct_leaks == []


def test_names_refused_early_are_those_past_the_allowance(limited, distinct_leaks):
    traces_ingest(items=enumerate(calls("crm.a", 3, run="r1") + calls("crm.b", 3, run="r2")),
                  application=limited)  # fmt: skip
    assert tool_names_refused(application=limited, names={"crm.a", "crm.c"}) == {"crm.c"}
    assert distinct_leaks == []


def test_tools_with_pending_traces_are_listed_once(limited, distinct_leaks):
    traces_ingest(items=enumerate(calls("crm.a", 3, run="r1")), application=limited)
    Trace.objects.update(aggregated=False)
    assert tools_with_new_traces() == ["crm.a"]
    [result] = tools_refresh(tool_names=["crm.a"])
    assert (result.tool_name, result.folded) == ("crm.a", 3)
    assert not Trace.objects.filter(aggregated=False).exists()
    assert distinct_leaks == []
