"""Webhooks: publications and retirements pushed to the applications that see the tool.

Only applications that can see the version hear of it (``within_application``, the one place
visibility is decided). Each delivery is a row (the log the admin shows) and one Celery task
that posts the JSON body signed with the webhook's secret and retries with backoff.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import uuid
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from config.celery_app import app as celery_app
from registry.models import ContractVersion, Tool
from registry.queueing import task_send_on_commit
from registry.selectors import within_application

from . import outbound
from .models import Webhook, WebhookDelivery, webhook_allowed_networks, webhook_url_problem

logger = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Registry-Signature"
MAX_ERROR_CHARS = 500
MAX_ATTEMPTS = 7  # the first and six retries, at about 2, 4, 8, 16, 32 and 64 seconds
# What the delivery log says of any failure to get an answer: the same words for a closed port,
# an open one that never answers and a name that does not resolve (see ``webhook_deliver``).
UNREACHABLE = "could not deliver"
STOPPED = "could not deliver: the attempt did not finish (a time limit, or its worker stopped)"


def signature(secret: str, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of the exact body bytes, keyed by the secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@transaction.atomic
def webhook_deliveries_create(*, version_id: int) -> list[int]:
    """A delivery for each enabled webhook subscribed to this publication's event whose
    application sees the version; returns their ids, for the caller to queue after commit."""
    version = ContractVersion.objects.select_related("tool", "risk").get(pk=version_id)
    retired = version.lifecycle == Tool.Lifecycle.DEPRECATED
    event = Webhook.Event.RETIRED if retired else Webhook.Event.PUBLISHED
    payload = {
        "event": str(event),
        "tool": version.tool.name,
        "version": version.number,
        "content_hash": version.content_hash,
        "approved_at": version.approved_at.isoformat() if version.approved_at else None,
    }
    created = []
    versions = ContractVersion.objects.filter(pk=version.pk)
    for webhook in Webhook.objects.filter(enabled=True).select_related("application"):
        if str(event) not in webhook.events:
            continue
        # Judged on the version's own risk and permissions, whatever its lifecycle: an
        # application that saw the tool hears of its retirement.
        if not within_application(versions, webhook.application).exists():
            continue
        created.append(_delivery_create(webhook, str(event), payload).pk)
    return created


def webhook_deliveries_queue(delivery_ids: list[int]) -> None:
    """Queue deliveries once the transaction commits. Sent by task name: ``api.tasks`` imports
    this module. A broker that refuses leaves them pending in the log, for the admin's "Send
    again" (``webhook_deliveries_retry``)."""
    for delivery_id in delivery_ids:
        send = partial(
            celery_app.send_task, "api.tasks.webhook_deliver", (delivery_id,), retry=False
        )
        task_send_on_commit(send, what=f"webhook delivery {delivery_id}")


@transaction.atomic
def webhook_deliveries_retry(*, delivery_ids: list[int]) -> list[int]:
    """Deliveries given up (or never queued: a broker that refused) made pending again, with a
    fresh count of attempts; returns the ids to queue after commit. Delivered ones stay."""
    retried = list(
        WebhookDelivery.objects.filter(pk__in=delivery_ids)
        .exclude(status=WebhookDelivery.Status.DELIVERED)
        .values_list("pk", flat=True)
    )
    WebhookDelivery.objects.filter(pk__in=retried).exclude(
        status=WebhookDelivery.Status.DELIVERED
    ).update(status=WebhookDelivery.Status.PENDING, attempts=0, finished_at=None)
    return retried


@transaction.atomic
def webhook_test_send(*, webhook: Webhook) -> WebhookDelivery:
    """A ``webhook.test`` delivery, to check the URL and the signature."""
    return _delivery_create(webhook, "webhook.test", {"event": "webhook.test"})


def _delivery_create(webhook: Webhook, event: str, payload: dict[str, Any]) -> WebhookDelivery:
    # Queued by the caller once this commits (api.tasks.webhook_deliveries_queue).
    return WebhookDelivery.objects.create(
        webhook=webhook,
        event=event,
        payload={**payload, "delivery": str(uuid.uuid4()), "application": webhook.application.name},
    )


def webhook_deliver(*, delivery_id: int) -> WebhookDelivery:
    """One attempt at a delivery, recorded whatever happens: the attempt is counted before
    anything is sent (a worker killed mid-attempt leaves it counted, with a reason saying so),
    and its outcome after. Pending afterwards: the caller retries it later."""
    delivery = webhook_attempt_start(delivery_id=delivery_id)
    if delivery is None or delivery.status != WebhookDelivery.Status.PENDING:
        return WebhookDelivery.objects.get(pk=delivery_id)
    webhook = delivery.webhook
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    code: int | None = None
    problem = webhook_url_problem(webhook.url)
    refused = bool(problem)  # no later attempt would go any better
    if not problem:
        try:
            code = outbound.post(
                webhook.url,
                body,
                {
                    "Content-Type": "application/json",
                    SIGNATURE_HEADER: signature(webhook.secret, body),
                    "X-Registry-Event": delivery.event,
                    "X-Registry-Delivery": str(delivery.payload["delivery"]),
                },
                limits=outbound.Limits(
                    deadline_seconds=settings.WEBHOOK_DEADLINE_SECONDS,
                    max_answer_bytes=settings.WEBHOOK_MAX_ANSWER_BYTES,
                ),
                allowed_networks=webhook_allowed_networks(),
            )
            problem = "" if 200 <= code < 300 else f"answered {code}"
        except outbound.Refused as exc:
            problem, refused = f"refused: {exc}", True
        except outbound.Unreachable as exc:
            # The detail (refused, reset, silent) tells a closed port from an open one: it
            # goes to the operator's log, the delivery log says only this.
            logger.info("webhook delivery %s: %s", delivery.pk, exc)
            problem = UNREACHABLE
    return webhook_attempt_finish(
        delivery_id=delivery.pk, code=code, problem=problem, final=refused
    )


@transaction.atomic
def webhook_attempt_start(*, delivery_id: int) -> WebhookDelivery | None:
    """Count an attempt at a pending delivery, or give it up once it had them all; None when it
    is not pending (a duplicated message: already delivered or given up)."""
    pending = WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING)
    claimed = pending.filter(attempts__lt=MAX_ATTEMPTS).update(
        attempts=F("attempts") + 1, error=STOPPED, response_code=None
    )
    if claimed != 1:
        # Every attempt was counted, the last one never finished (its worker was killed).
        pending.update(status=WebhookDelivery.Status.FAILED, finished_at=timezone.now())
        return None
    return WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)


@transaction.atomic
def webhook_attempt_finish(
    *, delivery_id: int, code: int | None, problem: str, final: bool = False
) -> WebhookDelivery:
    """Record how the attempt just counted went: delivered, failed for good once it was the
    last attempt (or ``final``: a refused target), else pending (to be retried)."""
    pending = WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING)
    error = problem[:MAX_ERROR_CHARS]
    if not problem:
        pending.update(
            status=WebhookDelivery.Status.DELIVERED,
            response_code=code,
            error="",
            finished_at=timezone.now(),
        )
    else:
        # The count is the row's (a redelivered message counted too): the last one gives up.
        last = pending if final else pending.filter(attempts__gte=MAX_ATTEMPTS)
        last.update(
            status=WebhookDelivery.Status.FAILED,
            response_code=code,
            error=error,
            finished_at=timezone.now(),
        )
        pending.update(response_code=code, error=error)  # not the last: stays pending
    return WebhookDelivery.objects.get(pk=delivery_id)


def webhook_attempt_stopped(*, delivery_id: int) -> WebhookDelivery:
    """The attempt ran into the task's soft time limit: recorded as a failed attempt."""
    return webhook_attempt_finish(delivery_id=delivery_id, code=None, problem=STOPPED)


def retry_countdown(attempts: int) -> float:
    """Seconds before the next attempt: 2, 4, 8 … (at most 600), less up to a quarter, so
    that deliveries failed together are not retried together."""
    countdown = min(2.0**attempts, 600.0)
    return countdown - random.uniform(0, countdown / 4)
