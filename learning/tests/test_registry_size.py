"""A call costs the same with 10 tools in the registry or 200: the same queries, and the same
rows read from the registry's tables.

Ingest looks up the batch's names only; a refresh reads what every refresh needs of the
registry (the labelled tools, the validation context) once per registry revision in a process
(``registry.revision.revision_memo``). Counting queries alone would not see a whole table read
in one query, so each SELECT from a ``registry_`` table is counted again as ``COUNT(*)`` over
the same statement (``registry_rows``).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from learning.fold import traces_fold
from learning.ingest import tool_names_refused, traces_ingest
from learning.models import Trace
from learning.services import tool_refresh
from registry.models import Application, Permission, StateVariable
from registry.revision import revision_forget
from reviews.models import ReviewTicket
from reviews.services import registry_import
from tests.helpers import contract

TARGET = "calendar.delete_event"


@contextmanager
def registry_rows() -> Iterator[dict[str, int]]:
    """Rows returned by the SELECTs that read the registry's tables while the fixture is open."""
    counted = {"rows": 0}
    counting: list[bool] = []

    def count(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        reads_registry = (
            not many
            and sql.lstrip().upper().startswith("SELECT")
            and '"registry_' in sql
            and "FOR UPDATE" not in sql.upper()
        )
        if reads_registry and not counting:
            counting.append(True)
            try:
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT COUNT(*) FROM ({sql}) AS counted", params)
                    counted["rows"] += cursor.fetchone()[0]
            finally:
                counting.pop()
        return result

    with connection.execute_wrapper(count):
        yield counted


def tools_add(first: int, last: int) -> None:
    registry_import(
        data=[
            contract(name=f"crm.find_contact_{number}", description=f"Find contact {number}.")
            for number in range(first, last)
        ],
        approve=True,
    )


def call(tool: str, run: str, *, extra: bool = False) -> dict:
    args = {"event_query": f"query {run}"}
    if extra:
        args["dry_run"] = "no"  # an argument the contract does not declare: drift
    return {
        "trace_id": run, "step": 0, "tool": tool, "args": args, "status": "success",
        "state_before": {"event_query": f"query {run}"},
        "state_after": {"event_query": f"query {run}", "event_id": f"evt-{run}"},
        "output": {"event_id": f"evt-{run}"}, "occurred_at": timezone.now().isoformat(),
    }  # fmt: skip


def cost(work: Callable[[], object]) -> tuple[int, int]:
    """(queries, registry rows read) of ``work()``."""
    with CaptureQueriesContext(connection) as queries, registry_rows() as rows:
        work()
    return len(queries), rows["rows"]


@pytest.fixture
def steady(settings):
    """This process's copy of the revision outlives the test: a read of it when the copy
    expires (it lives a second) is not work that grows with the registry."""
    settings.REVISION_LOCAL_SECONDS = 3600
    revision_forget()
    yield
    revision_forget()


@pytest.mark.django_db
def test_it_ingests_one_trace_at_the_same_cost_with_10_tools_or_200(vocabulary, steady):
    application = Application.objects.create(name="assistant", all_tools=True, all_permissions=True)
    name = "crm.find_contact_3"
    runs = iter(range(100))

    def ingest() -> None:
        result = traces_ingest(items=[(0, call(name, f"r{next(runs)}"))], application=application)
        assert result.accepted == 1

    def refused() -> None:
        assert tool_names_refused(application=application, names={name, "crm.unknown"}) == set()

    tools_add(0, 10)
    ingest()  # the first after the registry changed
    small, refused_small = cost(ingest), cost(refused)
    tools_add(10, 200)
    ingest()
    large, refused_large = cost(ingest), cost(refused)

    assert large == small
    assert refused_large == refused_small
    assert Trace.objects.filter(tool_name=name, unknown_tool=False).count() == 4


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_it_refreshes_one_tool_at_the_same_cost_with_10_tools_or_200(steady):
    for variable in ("event_query", "event_id"):
        StateVariable.objects.create(name=variable)
    Permission.objects.create(name="read")
    Permission.objects.create(name="delete")
    application = Application.objects.create(name="assistant", all_tools=True, all_permissions=True)
    registry_import(
        data=[
            contract(
                name=TARGET, description="Delete one calendar event.", risk="high",
                permissions=["delete"],
            )
        ],
        approve=True,
    )  # fmt: skip
    tools_add(0, 10)
    runs = iter(range(1000))

    def refresh_after_one_more_call() -> None:
        traces_ingest(items=[(0, call(TARGET, f"run-{next(runs)}", extra=True))],
                      application=application)  # fmt: skip
        traces_fold()
        result = tool_refresh(tool_name=TARGET)
        assert result.ticket_id is not None  # drift judged: the baseline risk, the ticket

    for _ in range(40):
        traces_ingest(items=[(0, call(TARGET, f"run-{next(runs)}", extra=True))],
                      application=application)  # fmt: skip
    traces_fold()
    tool_refresh(tool_name=TARGET)  # the first after the revision moved reads the labels
    small = cost(refresh_after_one_more_call)
    tools_add(10, 200)
    refresh_after_one_more_call()
    large = cost(refresh_after_one_more_call)

    assert large == small
    assert ReviewTicket.objects.filter(tool__name=TARGET, kind="drift").count() == 1
