"""The risk label index this process keeps across revisions (``learning.selectors``): after any
sequence of publications, withdrawals and inferred contracts written or deleted, the
index updated in place says what one read afresh from the registry says, while an update
after a publication reads only what changed."""

import gc
import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from learning import selectors
from learning.models import InferredContract
from registry.models import ContractVersion, Tool
from reviews.services import registry_import
from tests.helpers import contract

pytestmark = pytest.mark.django_db

VERBS = {"find": "low", "get": "low", "update": "medium", "share": "high", "delete": "high"}
VARIABLES = ["event_id", "event_query", "event_details", "new_time", "event_updated", "user_id"]


@pytest.fixture
def kept(monkeypatch):
    """A fresh process's index, dropped again after the test. Without a margin, an update
    looks again only at inferred contracts written since the last one began: what the random
    sequences test (nothing written here commits late)."""
    monkeypatch.setattr(selectors, "GATED_MARGIN", timedelta(0))
    selectors._index.clear()
    yield
    selectors._index.clear()


def tool_document(rng: random.Random, name: str) -> dict:
    verb = name.split(".")[1].split("_")[0]
    return contract(
        name=name,
        description=f"{verb.title()} {rng.choice(['one', 'some', 'every'])} calendar event.",
        requires=rng.sample(VARIABLES, rng.randint(0, 2)),
        produces=rng.sample(VARIABLES, rng.randint(0, 2)),
        risk=rng.choice([VERBS[verb], *VERBS.values()]),
        permissions=["read"] if VERBS[verb] == "low" else ["write"],
    )


def gated_write(name: str, gated: list[str]) -> None:
    """An inferred contract written as a refresh writes it: one upsert (``_refresh_store``)."""
    InferredContract.objects.bulk_create(
        [
            InferredContract(
                tool_name=name,
                tool=Tool.objects.filter(name=name).first(),
                document={"name": name, "evidence": {"gated": gated}},
                support=40,
            )
        ],
        update_conflicts=True,
        unique_fields=["tool_name"],
        update_fields=["tool", "document", "support", "inferred_at"],
    )


def afresh():
    """The index one update builds from nothing, this process's own left as it was."""
    saved = dict(selectors._index)
    selectors._index.clear()
    try:
        return selectors._label_index_update()
    finally:
        selectors._index.clear()
        selectors._index.update(saved)


def assert_same(index, fresh) -> None:
    assert index.keys() == fresh.keys()
    assert {key: label["features"] for key, label in index._labels.items()} == {
        key: label["features"] for key, label in fresh._labels.items()
    }
    assert {variable: names for variable, names in index.required_by.items() if names} == {
        variable: names for variable, names in fresh.required_by.items() if names
    }
    for name in {*index.spaces, *fresh.spaces}:
        space, other = index.spaces.get(name), fresh.spaces.get(name)
        if space is None or other is None:
            assert not (space or other).tools
            continue
        assert sorted(tool["name"] for tool in space.tools.values()) == sorted(
            tool["name"] for tool in other.tools.values()
        )
        assert space.model["counts"] == other.model["counts"]
        assert space.kinds + Counter() == other.kinds + Counter()


@pytest.mark.parametrize("seed", range(6))
def test_an_index_kept_across_revisions_is_the_index_read_afresh(vocabulary, kept, seed):
    rng = random.Random(seed)
    names = [f"space{n % 3}.{verb}_{n}" for n, verb in enumerate(list(VERBS) * 3)]
    registry_import(data=[tool_document(rng, name) for name in names[:8]], approve=True)
    index = selectors._label_index_update()
    assert_same(index, afresh())
    for _ in range(14):
        step = rng.choice(["publish", "publish", "withdraw", "gated", "gated", "ungated"])
        approved = list(
            ContractVersion.objects.filter(status=ContractVersion.Status.APPROVED)
            .order_by("pk")
            .values_list("pk", "tool__name")
        )
        if step == "publish":  # new tools, and new versions (new words, new labels) of others
            chosen = rng.sample(names, rng.randint(1, 4))
            registry_import(data=[tool_document(rng, name) for name in chosen], approve=True)
        elif step == "withdraw" and approved:
            # A bulk update, as a status change may be: the index sees a contract leave the
            # approved ones by its id, as it would a deleted one (which the ORM protects).
            pk, _ = rng.choice(approved)
            ContractVersion.objects.filter(pk=pk).update(status=ContractVersion.Status.SUPERSEDED)
        elif step == "gated" and approved:
            for _, name in rng.sample(approved, min(len(approved), 3)):
                gated_write(name, rng.sample(VARIABLES, rng.randint(0, 2)))
        elif step == "ungated":
            written = list(InferredContract.objects.values_list("tool_name", flat=True))
            if written:
                InferredContract.objects.filter(tool_name=rng.choice(written)).delete()
        index = selectors._label_index_update()
        assert_same(index, afresh())
    assert len(index) > 0


def test_after_a_publication_only_the_new_contract_is_read(vocabulary, kept, monkeypatch):
    registry_import(
        data=[contract(name=f"space.find_{n}", description=f"Find thing {n}.") for n in range(30)],
        approve=True,
    )
    selectors._label_index_update()
    reads = []
    full_read = selectors._labels_read
    monkeypatch.setattr(
        selectors, "_labels_read", lambda hashes: reads.append(hashes) or full_read(hashes)
    )
    rows = []

    def counted(execute, sql, params, many, context):
        # A read of the keys or the labels (with ``gated``), counted by a query of its own.
        if "gated" in sql and not sql.startswith("SELECT COUNT(*) FROM ("):
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT COUNT(*) FROM ({sql}) AS counted", params)
                rows.append(cursor.fetchone()[0])
        return execute(sql, params, many, context)

    registry_import(data=[contract(name="space.delete_it", risk="high")], approve=True)
    with connection.execute_wrapper(counted):
        index = selectors._label_index_update()

    assert [len(hashes) for hashes in reads] == [1]
    # The new contract's key, then its label: one row each (the first update read every key).
    assert rows == [1, 1]
    assert len(index) == 31
    assert_same(index, afresh())


def test_a_gated_change_is_seen_without_a_publication(vocabulary, kept):
    registry_import(
        data=[contract(name="calendar.get_event", requires=["event_id"], produces=[])],
        approve=True,
    )
    first = {label["name"]: label for label in selectors._label_index_update()._labels.values()}
    assert "o:gated" not in first["calendar.get_event"]["features"]

    gated_write("calendar.get_event", ["event_id"])
    index = selectors._label_index_update()

    labels = {label["name"]: label for label in index._labels.values()}
    assert "o:gated" in labels["calendar.get_event"]["features"]
    assert_same(index, afresh())


def test_what_a_rolled_back_transaction_showed_is_read_again(vocabulary, kept):
    """An update inside a transaction may index what is then rolled back, which no stamp
    records (here an inferred contract deleted, whose ``gated`` the index then forgets): the
    next update reads every key again."""
    registry_import(
        data=[contract(name="calendar.get_event", requires=["event_id"], produces=[])],
        approve=True,
    )
    gated_write("calendar.get_event", ["event_id"])
    selectors._label_index_update()
    # Written long ago: no later update would look at it again for its stamp.
    InferredContract.objects.update(inferred_at=timezone.now() - timedelta(days=1))
    selectors._label_index_update()

    with transaction.atomic():
        InferredContract.objects.all().delete()
        inside = selectors._label_index_update()
        assert not any("o:gated" in label["features"] for label in inside._labels.values())
        transaction.set_rollback(True)
    index = selectors._label_index_update()

    assert any("o:gated" in label["features"] for label in index._labels.values())
    assert_same(index, afresh())


def test_a_first_read_is_moved_out_of_the_collectors_view(vocabulary, kept):
    registry_import(data=[contract(name="calendar.find_events")], approve=True)
    gc.unfreeze()
    try:
        selectors._label_index_update()
        frozen = gc.get_freeze_count()
        registry_import(data=[contract(name="calendar.delete_event", risk="high")], approve=True)
        selectors._label_index_update()  # an update in place freezes nothing more

        assert frozen > 0
        assert gc.get_freeze_count() <= frozen  # (frozen objects freed go from the count)
    finally:
        gc.unfreeze()
