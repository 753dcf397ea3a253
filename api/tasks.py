"""Thin, idempotent tasks: bundles of hot read bodies, rendered once per registry revision."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import bundles, webhooks

TRANSIENT = (OperationalError, InterfaceError, bundles.RevisionNotSeenYet)


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
    """Fan out one render per application with a usable token (sent when the revision moves)."""
    applications = bundles.bundle_applications()
    for application_id in applications:
        bundle_render.delay(application_id)
    return len(applications)


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
