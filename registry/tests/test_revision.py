import threading

import pytest
from django.db import transaction

from registry import revision
from registry.models import Application, Permission, RiskLevel, Tool
from registry.selectors import registry_context


@pytest.fixture
def fresh(settings):
    settings.REVISION_LOCAL_SECONDS = 60
    revision.revision_forget()
    yield
    revision.revision_forget()


@pytest.mark.django_db
def test_a_read_that_started_before_a_bump_never_keeps_the_older_value(fresh, monkeypatch):
    """Two threads of one process: one reads the cache, another bumps and forgets in between;
    the older value read is answered once, never kept as this process's copy."""
    read_started, bumped = threading.Event(), threading.Event()
    values = iter([1, 2])

    def stored() -> int:
        value = next(values)
        if value == 1:
            read_started.set()
            bumped.wait(5)
        return value

    monkeypatch.setattr(revision, "revision_stored", stored)
    monkeypatch.setattr(revision.cache, "get", lambda key: None)
    monkeypatch.setattr(revision.cache, "set", lambda *args: None)
    answers = []
    reader = threading.Thread(target=lambda: answers.append(revision.revision_current()))
    reader.start()
    read_started.wait(5)
    revision.revision_forget()  # what a committed bump does in this process
    bumped.set()
    reader.join(5)
    assert answers == [1]
    assert revision.revision_current() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["risk level", "application tools", "tool"])
def test_every_change_runtimes_would_see_moves_the_revision_once(change):

    application = Application.objects.create(name="assistant")
    tool = Tool.objects.create(name="calendar.find_events")
    before = revision.revision_stored()
    if change == "risk level":
        RiskLevel.objects.filter(name="low").get().save()
    elif change == "application tools":
        application.enabled_tools.add(tool)
    else:
        tool.save()
    assert revision.revision_stored() == before + 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_memo_is_built_once_per_revision_and_again_when_it_moves():
    built = []

    def build() -> list[str]:
        built.append(1)
        return sorted(RiskLevel.objects.values_list("name", flat=True))

    first = revision.revision_memo("test:risks", build)
    again = revision.revision_memo("test:risks", build)
    RiskLevel.objects.create(name="critical", rank=40)  # commits, and moves the revision
    after = revision.revision_memo("test:risks", build)

    assert first is again
    assert after == ["critical", "high", "low", "medium"]
    assert len(built) == 2


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_transaction_that_moved_the_revision_builds_afresh_and_keeps_nothing():
    def build() -> list[str]:
        return sorted(Permission.objects.values_list("name", flat=True))

    revision.revision_memo("test:permissions", build)
    with transaction.atomic():
        Permission.objects.create(name="read")  # the revision moves once, here
        seen_after_first = revision.revision_memo("test:permissions", build)
        Permission.objects.create(name="write")  # it moves no further
        seen_after_second = revision.revision_memo("test:permissions", build)
        transaction.set_rollback(True)
    after_rollback = revision.revision_memo("test:permissions", build)

    assert seen_after_first == ["read"]
    assert seen_after_second == ["read", "write"]
    assert after_rollback == []


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_validation_reads_the_shared_parts_once_and_the_tools_a_document_names():
    Permission.objects.create(name="read")
    Tool.objects.create(name="calendar.find_events")
    Tool.objects.create(name="calendar.get_event")  # a new tool moves no revision
    registry_context()  # the shared parts, read once for this revision
    document = {"name": "crm.find", "dependencies": ["calendar.get_event"]}
    context = registry_context(document=document)
    context.permissions.add("added_by_a_file")
    Tool.objects.create(name="aa_.y")
    taking = registry_context(document={"name": "aa._y"})  # both are exported as "aa___y"

    assert context.tools == {"calendar.get_event"}
    assert registry_context().permissions == {"read"}  # a copy for each caller
    assert registry_context().tools == {"calendar.find_events", "calendar.get_event", "aa_.y"}
    assert taking.tools == {"aa_.y"}
    assert taking.tool_exporting_as("aa._y") == "aa_.y"
