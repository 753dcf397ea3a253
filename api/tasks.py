"""Thin, idempotent tasks: bundles of hot read bodies, rendered once per registry revision."""

from functools import partial

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from registry.queueing import TRANSIENT, durable_task, task_send

from . import bundles, webhooks
from .models import WebhookDelivery


@durable_task(
    soft_time_limit=240,
    time_limit=300,
    autoretry_for=(*TRANSIENT, bundles.RevisionNotSeenYet),
    retry_backoff=1,
)
def bundle_render(self, application_id: int) -> int | None:
    """One application's bundle for the current revision (nothing when it already exists)."""
    return bundles.bundle_render(application_id=application_id)


@durable_task(soft_time_limit=60, time_limit=90)
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
    if application_id is None:
        send = partial(bundles_render.apply_async, retry=False)
    else:
        send = partial(bundle_render.apply_async, args=[application_id], retry=False)
    if not task_send(send, what=f"bundle render of {application_id or 'all'}"):
        bundles.bundle_render_started(application_id=application_id)


# A little above one attempt's deadline: the deadline ends an attempt, these only a stuck one
# (its attempt is counted already, and recorded as stopped).
WEBHOOK_SOFT_TIME_LIMIT = settings.WEBHOOK_DEADLINE_SECONDS + 20
# The attempts are counted on the delivery's row, which decides when to give up; Celery's own
# count only stops a task whose database keeps failing.
WEBHOOK_MAX_RETRIES = webhooks.MAX_ATTEMPTS + 5


@durable_task(
    soft_time_limit=WEBHOOK_SOFT_TIME_LIMIT,
    time_limit=WEBHOOK_SOFT_TIME_LIMIT + 10,
    retry_backoff=2,
    retry_backoff_max=600,
    max_retries=WEBHOOK_MAX_RETRIES,
)
def webhook_deliver(self, delivery_id: int) -> str:
    """One attempt at a webhook delivery (on the ``webhooks`` queue: CELERY_TASK_ROUTES); a
    pending one is tried again later, with exponential backoff."""
    try:
        delivery = webhooks.webhook_deliver(delivery_id=delivery_id)
    except SoftTimeLimitExceeded:
        delivery = webhooks.webhook_attempt_stopped(delivery_id=delivery_id)
    except WebhookDelivery.DoesNotExist:
        return "gone"  # its webhook was deleted meanwhile
    if delivery.status == WebhookDelivery.Status.PENDING:
        raise self.retry(countdown=webhooks.retry_countdown(delivery.attempts))
    return delivery.status
