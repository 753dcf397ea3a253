import threading

import pytest

from registry import revision
from registry.models import Application, RiskLevel, Tool


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
