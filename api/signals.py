"""A changed or deleted token must stop authenticating at once, cached or not: it moves the
registry revision, which every cached authentication is keyed on. And whenever the revision
moves, the applications' bundles of hot read bodies are rendered again (``api/bundles.py``)."""

from typing import Any

from django.db.models.signals import post_delete, post_save

from registry.events import contract_published
from registry.revision import revision_changed
from registry.signals import revision_bump_on_change

from .models import RuntimeToken
from .tasks import bundle_render_queue
from .webhooks import webhook_deliveries_create, webhook_deliveries_queue

post_save.connect(revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-save")
post_delete.connect(
    revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-delete"
)


def bundles_render_on_change(**kwargs: Any) -> None:
    """After a bump commits: queue the renders, unless they already wait (only a Redis cache
    holds bundles)."""
    bundle_render_queue(application_id=None)


revision_changed.connect(bundles_render_on_change, dispatch_uid="api-bundles-render")


def webhooks_on_publication(*, version_id: int, **kwargs: Any) -> None:
    """After a publication commits: record a delivery per subscribed webhook, then queue them."""
    delivery_ids = webhook_deliveries_create(version_id=version_id)
    webhook_deliveries_queue(delivery_ids)


contract_published.connect(webhooks_on_publication, dispatch_uid="api-webhooks")
