"""Thin, idempotent tasks: bundles of hot read bodies, rendered once per registry revision."""

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import bundles, webhooks

TRANSIENT = (OperationalError, InterfaceError, bundles.RevisionNotSeenYet)

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=1,
    max_retries=5,
    soft_time_limit=240,
    time_limit=300,
)
def bundle_render(self, application_id: int) -> int | None:
    """One application's bundle for the current revision (nothing when it already exists)."""
    return bundles.bundle_render(application_id=application_id)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
    soft_time_limit=60,
    time_limit=90,
)
def bundles_render(self) -> int:
    """Fan out one render per application with a usable token (sent when the revision moves),
    each unless one already waits."""
    bundles.bundle_render_started(application_id=None)
    applications = bundles.bundle_applications()
    for application_id in applications:
        bundle_render_queue(application_id=application_id)
    return len(applications)


def bundle_render_queue(*, application_id: int | None = None) -> None:
    """Queue a render of the application's bundle (None: of every application's) unless one
    is already waiting: a burst of changes costs one render per application. A broker that
    refuses the message costs nothing more: the mark is dropped and the next change or read
    that misses the bundle asks again."""
    if not bundles.bundle_render_wanted(application_id=application_id):
        return
    try:
        if application_id is None:
            bundles_render.apply_async(retry=False)
        else:
            bundle_render.apply_async(args=[application_id], retry=False)
    except Exception as exc:  # the broker's errors vary by transport
        bundles.bundle_render_started(application_id=application_id)
        logger.warning("bundle render of %s not queued: %s", application_id or "all", exc)


WEBHOOK_MAX_RETRIES = 6  # at 2, 4, 8, 16, 32 and 64 seconds (with jitter), then given up


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(webhooks.DeliveryFailed, OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=600,
    max_retries=WEBHOOK_MAX_RETRIES,
    soft_time_limit=60,
    time_limit=90,
)
def webhook_deliver(self, delivery_id: int) -> str:
    """Post one webhook delivery; a failure is retried with exponential backoff."""
    final = self.request.retries >= WEBHOOK_MAX_RETRIES
    return webhooks.webhook_deliver(delivery_id=delivery_id, final=final).status
