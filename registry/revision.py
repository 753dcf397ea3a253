"""The registry revision: one counter that moves whenever what runtimes may see changes.

Runtimes poll it and every ETag is derived from it, so this module is its one owner:

- ``revision_bump()`` moves it inside the writing transaction, once however often it is called
  there; once the change commits, the shared cache's copy and this process's copy are dropped.
- ``revision_current()`` is what readers use: this process's copy for at most
  ``settings.REVISION_LOCAL_SECONDS`` (every API read needs it), then the shared cache, then the
  database. The local bound is how long another process's change can go unseen.
- ``revision_shared()`` skips this process's copy: the shared cache's, else the database's,
  which it puts in the shared cache. A reader of the shared cache alone (the API's fast read
  path) calls it when the copy there has expired, rather than waiting for some process's local
  copy to expire and put it back.
- ``revision_forget()`` drops this process's copy.
- ``revision_stored()`` reads the database, bypassing every cache.
- ``registry.signals.revision_changed`` is sent once a bump has committed (in the committing
  process): the hook by which a higher layer (the API's bundles) follows the revision without
  an import upwards.
- ``transaction_open()``: whether what this connection reads may yet be rolled back, for a
  value kept across revisions and changed in place (``learning.selectors.risk_label_index``).
- ``revision_memo(name, build)``: a value built from the registry (every tool's name, the alias
  map, the labelled tools), kept in this process until the revision moves, so a call that needs
  it costs one read of the revision row however large the registry is.
"""

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .models import Revision
from .signals import revision_changed

CACHE_KEY = "registry:revision"
# A safety net for a drop the publishing process could not make (Redis unreachable).
CACHE_SECONDS = 2

# This process's copy, shared by its threads (gunicorn's gthread workers): read and written
# under the lock; ``generation`` moves when the copy is dropped, so a read that started before
# a bump never stores the older value after it.
_local: dict[str, Any] = {"value": 0, "until": 0.0, "generation": 0}
_local_lock = threading.Lock()


def revision_stored() -> int:
    return Revision.objects.filter(pk=1).values_list("value", flat=True).first() or 0


def revision_bump() -> None:
    """Move the counter, once per transaction; cached copies are dropped once it commits.

    A transaction that changes many things (an import of thousands of tools) moves it once:
    readers only ever see the committed state, and each move costs every application a render
    of its bundle. The transaction moved it already if its commit callback is still pending,
    which a rolled-back savepoint takes away together with the update it undid.
    """
    connection = transaction.get_connection()
    blocks = _transaction_blocks()
    transaction_block = blocks[0] if blocks else None
    if transaction_block is not None and any(
        getattr(callback, "block", None) is transaction_block
        for _savepoints, callback, _robust in connection.run_on_commit
    ):
        return
    if not Revision.objects.filter(pk=1).update(value=F("value") + 1, changed_at=timezone.now()):
        Revision.objects.create(pk=1, value=1)
    callback = functools.partial(_forget_everywhere)
    callback.block = transaction_block  # type: ignore[attr-defined]
    transaction.on_commit(callback)


def _transaction_blocks() -> list[Any]:
    # The outermost block is the transaction; a test case's own blocks are not one.
    connection = transaction.get_connection()
    return [b for b in connection.atomic_blocks if not getattr(b, "_from_testcase", False)]


def transaction_open() -> bool:
    """Whether this connection is inside a transaction (a test case's own blocks aside): what
    it reads there may be rolled back."""
    return bool(_transaction_blocks())


def revision_current() -> int:
    now = time.monotonic()
    with _local_lock:
        if _local["until"] > now:
            return int(_local["value"])
        generation = _local["generation"]
    revision = revision_shared()
    with _local_lock:
        if _local["generation"] == generation:
            _local.update(value=revision, until=now + settings.REVISION_LOCAL_SECONDS)
    return revision


def revision_shared() -> int:
    revision = cache.get(CACHE_KEY)
    if revision is None:
        revision = revision_stored()
        cache.set(CACHE_KEY, revision, CACHE_SECONDS)
    return int(revision)


T = TypeVar("T")
# name -> (the revision's value and time, the value built at it); see ``revision_memo``.
_memos: dict[str, tuple[tuple[int, Any], Any]] = {}
_memos_lock = threading.Lock()


def revision_memo(name: str, build: Callable[[], T]) -> T:
    """``build()``, kept in this process while the stored revision stays the same.

    Keyed on the revision row's value and time as this connection reads them (one query), not on
    the cached copies ``revision_current`` reads: a process sees its own and others' committed
    changes at once. The time tells apart two revisions with the same value, one of them rolled
    back. A transaction that moved the revision and has not committed builds afresh and keeps
    nothing: what it changes after its first bump moves the revision no further, so a value
    built half-way through it would outlive changes it did not see.

    ``build`` must read only what moves the revision when it changes; the value is shared by
    every caller in the process, which must not change it.
    """
    if _bump_pending():
        return build()
    key = Revision.objects.filter(pk=1).values_list("value", "changed_at").first() or (0, None)
    with _memos_lock:
        kept = _memos.get(name)
    if kept is not None and kept[0] == key:
        return kept[1]
    value = build()
    with _memos_lock:
        _memos[name] = (key, value)
    return value


def _bump_pending() -> bool:
    """Whether this connection moved the revision in a transaction that has not committed."""
    connection = transaction.get_connection()
    return any(hasattr(callback, "block") for _, callback, _ in connection.run_on_commit)


def revision_forget() -> None:
    """This process's copy goes (other processes let theirs expire within the bound)."""
    with _local_lock:
        _local["until"] = 0.0
        _local["generation"] += 1


def _forget_everywhere() -> None:
    cache.delete(CACHE_KEY)
    revision_forget()
    revision_changed.send(sender=Revision)
