"""Webhooks through a real Celery worker to a local HTTP server: signed, retried after a 500."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from api.models import Webhook, WebhookDelivery, webhook_url_problem
from registry.models import Application
from reviews.services import registry_import
from tests.helpers import contract, wait_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def receiver():
    """A local HTTP server that answers 500 to the first POST, then 204, and keeps each."""
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers), body))
            self.send_response(500 if len(received) == 1 else 204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()


def test_a_publication_reaches_the_webhook_signed_and_retried_after_a_500(
    worker,
    receiver,
    vocabulary,
):
    url, received = receiver
    application = Application.objects.create(name="assistant", all_tools=True, all_permissions=True)
    other = Application.objects.create(name="other", all_permissions=True)  # enables no tool
    hook = Webhook.objects.create(application=application, url=url, secret="s3cret")
    Webhook.objects.create(application=other, url=url, secret="x")

    registry_import(data=[contract()], approve=True)

    assert wait_for(lambda: len(received) >= 2, timeout=60), received
    headers, body = received[-1]
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Registry-Signature"], expected)
    payload = json.loads(body)
    assert payload["event"] == "contract.published"
    assert payload["tool"] == "calendar.find_events" and payload["application"] == "assistant"
    assert received[0][1] == body  # the retry sends the same delivery
    delivery = WebhookDelivery.objects.get()
    assert wait_for(lambda: WebhookDelivery.objects.get().status == "delivered", timeout=20)
    delivery.refresh_from_db()
    assert delivery.webhook == hook and delivery.attempts == 2 and delivery.response_code == 204


def test_the_test_endpoint_sends_a_signed_test_delivery(
    worker,
    receiver,
    runtime_client_factory,
):
    url, received = receiver
    client = runtime_client_factory("assistant")
    Webhook.objects.create(application=Application.objects.get(name="assistant"), url=url)

    response = client.post("/api/v1/webhooks/test/")

    assert response.status_code == 202
    assert wait_for(lambda: len(received) >= 2, timeout=60)
    assert json.loads(received[-1][1])["event"] == "webhook.test"


@pytest.mark.parametrize(
    "url, allowed, problem",
    [
        ("file:///etc/passwd", [], "Only http and https"),
        ("gopher://example.com/", [], "Only http and https"),
        ("https://hooks.example.com/x", ["hooks.example.com"], ""),
        ("https://169.254.169.254/latest", ["hooks.example.com"], "not in WEBHOOK_ALLOWED_HOSTS"),
    ],
)
def test_it_refuses_urls_outside_http_and_the_allowlist(settings, url, allowed, problem):
    settings.WEBHOOK_ALLOWED_HOSTS = allowed
    assert (problem in webhook_url_problem(url)) if problem else webhook_url_problem(url) == ""


def test_the_admin_sends_a_test_delivery_and_shows_the_log(admin_client, monkeypatch):
    from api import webhooks

    queued = []
    monkeypatch.setattr(webhooks.celery_app, "send_task", lambda *a, **kw: queued.append(a))
    application = Application.objects.create(name="assistant")
    hook = Webhook.objects.create(application=application, url="https://hooks.example.com/x")

    response = admin_client.post(
        "/admin/api/webhook/", {"action": "send_test", "_selected_action": [hook.pk]}, follow=True
    )

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == "webhook.test" and delivery.status == "pending"
    assert ("api.tasks.webhook_deliver", (delivery.pk,)) in queued
    log = admin_client.get("/admin/api/webhookdelivery/")
    assert log.status_code == 200 and "webhook.test" in log.content.decode()
    page = admin_client.get(f"/admin/api/webhook/{hook.pk}/change/")
    assert page.status_code == 200 and "webhook.test" in page.content.decode()

    WebhookDelivery.objects.update(status="failed", attempts=7)
    queued.clear()
    admin_client.post(
        "/admin/api/webhookdelivery/",
        {"action": "send_again", "_selected_action": [delivery.pk]},
        follow=True,
    )
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.attempts == 0
    assert ("api.tasks.webhook_deliver", (delivery.pk,)) in queued
