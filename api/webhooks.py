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
import uuid
from typing import Any

import requests
from django.db import transaction
from django.utils import timezone

from config.celery_app import app as celery_app
from registry.models import ContractVersion, Tool
from registry.selectors import within_application

from .models import Webhook, WebhookDelivery, webhook_url_problem

logger = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Registry-Signature"
TIMEOUT_SECONDS = 10
MAX_ERROR_CHARS = 500


class DeliveryFailed(Exception):
    """The receiver did not answer 2xx (or could not be reached): the task retries."""


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
    """Queue deliveries (call it on commit). Sent by task name: ``api.tasks`` imports this
    module. A broker that refuses leaves them pending in the log, for the admin's "Send
    again" (``webhook_deliveries_retry``)."""
    for delivery_id in delivery_ids:
        try:
            celery_app.send_task("api.tasks.webhook_deliver", (delivery_id,), retry=False)
        except Exception as exc:  # the broker's errors vary by transport; the commit stands
            logger.warning("webhook delivery %s not queued: %s", delivery_id, exc)


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


def webhook_deliver(*, delivery_id: int, final: bool) -> WebhookDelivery:
    """Post one delivery; raise ``DeliveryFailed`` to be retried. ``final``: the last attempt,
    whose failure is recorded as such."""
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    if delivery.status != WebhookDelivery.Status.PENDING:
        return delivery  # a duplicated message: already delivered or given up
    webhook = delivery.webhook
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    code: int | None = None
    problem = webhook_url_problem(webhook.url)
    if not problem:
        try:
            response = requests.post(
                webhook.url,
                data=body,
                headers={
                    "Content-Type": "application/json",
                    SIGNATURE_HEADER: signature(webhook.secret, body),
                    "X-Registry-Event": delivery.event,
                    "X-Registry-Delivery": delivery.payload["delivery"],
                },
                timeout=TIMEOUT_SECONDS,
                allow_redirects=False,  # a redirect could lead past the allowlist
            )
            code = response.status_code
            problem = "" if 200 <= code < 300 else f"answered {code}"
        except requests.RequestException as exc:
            problem = f"{type(exc).__name__}: {exc}"
    status = WebhookDelivery.Status.DELIVERED
    if problem:
        status = WebhookDelivery.Status.FAILED if final else WebhookDelivery.Status.PENDING
    WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.PENDING).update(
        attempts=delivery.attempts + 1,
        response_code=code,
        error=problem[:MAX_ERROR_CHARS],
        status=status,
        finished_at=None if status == WebhookDelivery.Status.PENDING else timezone.now(),
    )
    if problem and not final:
        raise DeliveryFailed(problem)
    delivery.refresh_from_db()
    return delivery
