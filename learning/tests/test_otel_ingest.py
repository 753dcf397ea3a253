"""Buffering spans and assembling traces (learning.otel_ingest), and candidate variables."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from learning.candidates import (
    MAX_CANDIDATES_PER_TOOL,
    candidate_variable_adopt,
    candidate_variables_count,
)
from learning.fold import traces_fold_pending
from learning.models import CandidateVariable, OtelTrace, Trace
from learning.otel import spans_decode
from learning.otel_ingest import otel_traces_assemble, spans_receive
from registry.models import Application, StateVariable
from tests.otel_spans import agent, request, tool_call

pytestmark = pytest.mark.django_db
LATER = timedelta(minutes=5)


@pytest.fixture
def application(vocabulary):
    return Application.objects.create(name="assistant", all_tools=True)


def receive(application, *spans):
    return spans_receive(
        application=application, batch=spans_decode(request(*spans), max_spans=1000)
    )


def found_run(trace: bytes = b"\x01" * 16):
    return [
        agent({"event_query": "q"}, trace=trace),
        tool_call(1, "calendar.find_events", trace=trace,
                  result={"event_id": "evt_1", "match_count": 2, "ranking": "best"}),
    ]  # fmt: skip


def test_it_claims_each_ready_trace_once_and_forgets_it_after_its_keep(application, settings):
    receive(application, *found_run())
    assert otel_traces_assemble(now=timezone.now() + LATER) == 1
    assert otel_traces_assemble(now=timezone.now() + LATER) == 0
    assert Trace.objects.count() == 1
    assert OtelTrace.objects.get().state == OtelTrace.State.ASSEMBLED
    otel_traces_assemble(now=timezone.now() + settings.OTLP_KEEP_ASSEMBLED + LATER)
    assert not OtelTrace.objects.exists()


def test_result_fields_that_feed_nothing_are_no_candidates_and_no_effects(application):
    receive(application, *found_run())
    receive(application, *found_run(b"\x02" * 16))
    otel_traces_assemble(now=timezone.now() + LATER)
    assert {t.state_after.get("match_count") for t in Trace.objects.all()} == {None}
    assert not CandidateVariable.objects.exists()


def test_a_result_field_that_fed_another_name_is_a_candidate_alias(application):
    trace = b"\x04" * 16
    receive(
        application,
        agent(trace=trace),
        tool_call(1, "calendar.find_events", trace=trace, result={"hits": ["evt_1234"]}),
        tool_call(2, "calendar.get_event", trace=trace, args={"eventId": "evt_1234"}),
    )
    otel_traces_assemble(now=timezone.now() + LATER)
    assert not CandidateVariable.objects.exists()  # the fold finds data flow and candidates
    traces_fold_pending()
    candidate = CandidateVariable.objects.get()
    assert (candidate.tool_name, candidate.name, candidate.alias_of, candidate.count) == (
        "calendar.find_events", "hits", "event_id", 1,
    )  # fmt: skip
    variable = candidate_variable_adopt(candidate=candidate)
    assert variable.name == "event_id" and variable.aliases == ["eventId", "evt_id", "hits"]
    assert not CandidateVariable.objects.exists()


def test_candidates_are_bounded_per_tool(application):
    found = [(0, "t.one", f"field_{n}", n, "") for n in range(MAX_CANDIDATES_PER_TOOL + 30)]
    candidate_variables_count(application=application, found=found)
    candidate_variables_count(application=application, found=found)
    rows = CandidateVariable.objects.filter(tool_name="t.one")
    assert rows.count() == MAX_CANDIDATES_PER_TOOL
    assert set(rows.values_list("count", flat=True)) == {2}


def test_adopting_a_candidate_makes_it_a_state_variable_for_later_traces(application):
    candidate = CandidateVariable.objects.create(
        application=application, tool_name="calendar.find_events", name="match_count", count=1
    )
    variable = candidate_variable_adopt(candidate=candidate)
    assert StateVariable.objects.filter(pk=variable.pk, name="match_count").exists()
    assert not CandidateVariable.objects.filter(name="match_count").exists()
    receive(application, *found_run(b"\x03" * 16))
    otel_traces_assemble(now=timezone.now() + LATER)
    later = Trace.objects.get(trace_id=("03" * 16))
    assert later.state_after["match_count"] == 2


def test_a_candidate_clashing_with_an_alias_is_refused_and_kept(application):
    candidate = CandidateVariable.objects.create(
        application=application, tool_name="calendar.find_events", name="eventId", count=1
    )
    with pytest.raises(ValidationError, match="Already used by another variable"):
        candidate_variable_adopt(candidate=candidate)
    assert CandidateVariable.objects.filter(pk=candidate.pk).exists()


def test_the_admin_adds_candidates_to_the_vocabulary(application, admin_client):
    candidate = CandidateVariable.objects.create(
        application=application, tool_name="calendar.find_events", name="match_count", count=4,
        examples=[3, 7],
    )  # fmt: skip
    page = admin_client.get("/admin/learning/candidatevariable/")
    assert page.status_code == 200 and b"match_count" in page.content
    response = admin_client.post(
        "/admin/learning/candidatevariable/",
        {"action": "add_to_vocabulary", "_selected_action": [candidate.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Added 1 to the vocabulary: match_count." in response.content.decode()
    assert StateVariable.objects.filter(name="match_count").exists()


def test_refresh_contracts_assembles_settled_spans_first(application, settings, capsys):
    from django.core.management import call_command

    from learning.models import ToolStats

    settings.OTLP_SETTLE_SECONDS = 0
    settings.OTLP_QUIET_SECONDS = 0
    receive(application, *found_run())
    assert not Trace.objects.exists()

    call_command("refresh_contracts", "--no-progress")

    assert "Assembled 1 OpenTelemetry trace(s)." in capsys.readouterr().out
    assert Trace.objects.count() == 1
    assert ToolStats.objects.get(tool_name="calendar.find_events").inferred_at is not None
