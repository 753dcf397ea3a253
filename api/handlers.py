"""What the API does when the registry changes, connected in ``ApiConfig.ready()``.

A changed or deleted token must stop authenticating at once, cached or not: it moves the
registry revision (``registry.handlers.revision_bump_on_change``), which every cached
authentication is keyed on. Whenever the revision moves, the applications' bundles of hot read
bodies are rendered again (``api/bundles.py``); a publication is sent to the webhooks."""

from typing import Any

from .tasks import bundle_render_queue
from .webhooks import webhook_deliveries_create, webhook_deliveries_queue


def bundles_render_on_change(**kwargs: Any) -> None:
    """After a bump commits: queue the renders, unless they already wait (only a Redis cache
    holds bundles)."""
    bundle_render_queue(application_id=None)


def webhooks_on_publication(*, version_id: int, **kwargs: Any) -> None:
    """After a publication commits: record a delivery per subscribed webhook, then queue them."""
    delivery_ids = webhook_deliveries_create(version_id=version_id)
    webhook_deliveries_queue(delivery_ids)
