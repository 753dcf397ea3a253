"""``learning.services.traces_prune``: retention."""

from datetime import timedelta

import pytest
from django.utils import timezone

from learning.ingest import traces_fold_pending, traces_ingest
from learning.models import ToolStats, Trace
from learning.services import traces_prune
from tests.helpers import event_call

pytestmark = pytest.mark.django_db


def test_prune_deletes_only_folded_traces_past_retention(get_event):
    traces_ingest(items=enumerate(event_call(i) for i in range(40)))
    traces_fold_pending()
    Trace.objects.filter(step__lt=30).update(occurred_at=timezone.now() - timedelta(days=90))
    Trace.objects.filter(step__lt=5).update(aggregated=False)  # not folded yet: kept
    assert traces_prune(older_than=timedelta(days=30)) == 25
    assert Trace.objects.count() == 15
    assert ToolStats.objects.get().traces_total == 40  # the aggregates survive
