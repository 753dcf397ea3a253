"""Webhooks through a real Celery worker to local HTTP receivers: signed, retried after a 500,
bounded against receivers that answer slowly, hugely or not at all, on a queue of their own."""

import hashlib
import hmac
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from api import webhooks
from api.models import Webhook, WebhookDelivery, webhook_url_problem
from config.celery_app import app as celery_app
from registry.models import Application
from reviews.services import registry_import
from tests.helpers import contract, database_url, wait_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.0/8"


@pytest.fixture
def webhooks_worker():
    """A worker that consumes only the webhooks queue, as docker-compose.yml's ``webhooks``
    service does, allowed to reach this machine's receivers, with a 2-second deadline."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "WEBHOOK_ALLOWED_NETWORKS": LOOPBACK,
        "WEBHOOK_DEADLINE_SECONDS": "2",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--queues", "webhooks", "--loglevel", "WARNING", "--without-heartbeat",
         "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    yield process
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()


class Receiver:
    """A TCP server on a free loopback port that runs ``answer(connection, receiver)`` for each
    connection, in a thread, and counts what it sent (``sent``) and connections (``calls``)."""

    def __init__(self, answer):
        self.answer = answer
        self.sent = 0
        self.calls = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.calls += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                conn.recv(65536)  # the request (small, one segment on loopback)
                self.answer(conn, self)
            except OSError:
                pass  # the registry hung up: what the tests want

    def send(self, conn, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self):
        self.listener.close()


def one_byte_a_second(conn, receiver):
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
        receiver.send(conn, bytes([byte]))
        time.sleep(1)


HUGE = 300 * 1024 * 1024
CHUNK = b"x" * 65536


def huge_status_line(conn, receiver):
    """300 MB of a status line that never ends."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    while receiver.sent < HUGE:
        receiver.send(conn, CHUNK)


def huge_body(conn, receiver):
    """A 200 with a 300 MB body."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    receiver.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % HUGE)
    while receiver.sent < HUGE:
        receiver.send(conn, CHUNK)


@pytest.fixture
def receiver_of(settings):
    """Receivers answering as told; webhooks may reach them (WEBHOOK_ALLOWED_NETWORKS)."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [LOOPBACK]
    started = []

    def start(answer):
        started.append(Receiver(answer))
        return started[-1]

    yield start
    for receiver in started:
        receiver.close()


def a_delivery(url: str) -> WebhookDelivery:
    application, _ = Application.objects.get_or_create(name="assistant")
    return webhooks.webhook_test_send(
        webhook=Webhook.objects.create(application=application, url=url)
    )


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
    webhooks_worker,
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
    webhooks_worker,
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


def test_it_ends_an_attempt_at_a_tarpit_at_the_deadline_and_records_it(settings, receiver_of):
    settings.WEBHOOK_DEADLINE_SECONDS = 2
    tarpit = receiver_of(one_byte_a_second)
    delivery = a_delivery(tarpit.url)

    result = webhooks.webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert result.status == delivery.status == "pending"  # to be retried
    assert delivery.attempts == 1 and delivery.error == "could not deliver"
    # One byte a second: a per-read timeout would have waited for all 38 of them.
    assert 1 <= tarpit.sent <= 3


def test_the_last_attempt_at_a_tarpit_gives_the_delivery_up(settings, receiver_of):
    settings.WEBHOOK_DEADLINE_SECONDS = 1
    tarpit = receiver_of(one_byte_a_second)
    delivery = a_delivery(tarpit.url)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=webhooks.MAX_ATTEMPTS - 1)

    webhooks.webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.finished_at is not None
    assert delivery.attempts == webhooks.MAX_ATTEMPTS and delivery.error == "could not deliver"


@pytest.mark.parametrize("answer", [huge_status_line, huge_body])
def test_it_reads_no_more_of_a_huge_answer_than_the_cap(settings, receiver_of, answer):
    settings.WEBHOOK_MAX_ANSWER_BYTES = 65536
    receiver = receiver_of(answer)
    delivery = a_delivery(receiver.url)

    webhooks.webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    if answer is huge_body:  # the status line decides; the body is never read
        assert delivery.status == "delivered" and delivery.response_code == 200
    else:
        assert delivery.status == "pending" and delivery.error == "could not deliver"
    assert delivery.attempts == 1
    # What the receiver got rid of before the registry hung up: the cap, plus what the two
    # kernels' socket buffers hold, never the 300 MB.
    assert wait_for(lambda: receiver.sent < HUGE, timeout=10)
    assert receiver.sent < 16 * 1024 * 1024, receiver.sent


def test_an_attempt_stopped_by_the_time_limit_is_counted_and_retried(receiver_of, monkeypatch):
    from celery.exceptions import Retry, SoftTimeLimitExceeded

    from api import outbound
    from api.tasks import webhook_deliver

    def stopped(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(outbound, "post", stopped)
    delivery = a_delivery("http://127.0.0.1:9/hook")

    with pytest.raises(Retry):
        webhook_deliver.apply(args=[delivery.pk], throw=True)

    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert delivery.error.startswith("could not deliver: the attempt did not finish")


def test_an_attempt_whose_worker_was_killed_stays_counted(receiver_of):
    delivery = a_delivery("http://127.0.0.1:9/hook")
    # As a killed worker leaves it: the attempt counted, no outcome recorded.
    started = webhooks.webhook_attempt_start(delivery_id=delivery.pk)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=webhooks.MAX_ATTEMPTS)

    webhooks.webhook_deliver(delivery_id=delivery.pk)  # the redelivered message

    delivery.refresh_from_db()
    assert started is not None and started.attempts == 1
    assert delivery.status == "failed" and delivery.attempts == webhooks.MAX_ATTEMPTS
    assert delivery.error.startswith("could not deliver: the attempt did not finish")


def test_deliveries_and_folds_have_a_queue_of_their_own_and_nothing_else_is_on_them():
    route = celery_app.amqp.router.route
    assert route({}, "api.tasks.webhook_deliver")["queue"].name == "webhooks"
    others = [name for name in celery_app.tasks if not name.startswith("celery.")]
    assert "api.tasks.bundle_render" in others and "learning.tasks.prune_traces" in others
    own_queues = {"api.tasks.webhook_deliver": "webhooks", "learning.tasks.traces_fold": "fold"}
    for name in others:
        assert route({}, name)["queue"].name == own_queues.get(name, "celery"), name
    # A worker started without --queues consumes them all (the embedded default).
    queues = {queue.name for queue in celery_app.conf.task_queues}
    assert queues == {"celery", "webhooks", "fold"}


def test_deliveries_to_a_tarpit_run_on_the_webhooks_worker_each_attempt_recorded(
    webhooks_worker, receiver_of, runtime_client_factory, monkeypatch
):
    """Eight test deliveries to a tarpit, through the webhooks-only worker: each attempt ends
    at the 2-second deadline, recorded."""
    tarpit = receiver_of(one_byte_a_second)
    client = runtime_client_factory("assistant")
    application = Application.objects.get(name="assistant")
    for _ in range(8):
        Webhook.objects.create(application=application, url=tarpit.url)

    response = client.post("/api/v1/webhooks/test/")

    assert response.status_code == 202 and len(response.json()["deliveries"]) == 8
    deliveries = WebhookDelivery.objects.all()

    def each_attempted_once() -> bool:
        # Attempt 1 over, whether it shows (pending, "could not deliver") or attempt 2 began.
        done = deliveries.filter(attempts=1, error=webhooks.UNREACHABLE).count()
        return done + deliveries.filter(attempts__gte=2).count() == 8

    assert wait_for(each_attempted_once, timeout=90), list(deliveries.values())
    assert not deliveries.exclude(status="pending").exists()
    attempts = sum(delivery.attempts for delivery in deliveries)
    # Each attempt ended at its deadline, long before the tarpit's 38 bytes (one a second):
    # about two bytes each, more on a loaded machine, never the whole answer.
    assert tarpit.calls <= attempts and tarpit.sent < 38 * attempts // 2


def test_the_test_endpoint_is_throttled_per_application(runtime_client_factory, monkeypatch):
    from api.throttling import ApplicationScopedThrottle

    monkeypatch.setattr(
        ApplicationScopedThrottle,
        "THROTTLE_RATES",
        {"runtime": "1000/min", "webhook_test": "2/hour"},
    )
    queued = []
    monkeypatch.setattr(webhooks.celery_app, "send_task", lambda *a, **kw: queued.append(a))
    first = runtime_client_factory("assistant")
    second = runtime_client_factory("assistant")  # another token of the same application
    other = runtime_client_factory("other")
    Webhook.objects.create(
        application=Application.objects.get(name="assistant"), url="https://hooks.example.com/x"
    )

    statuses = [first.post("/api/v1/webhooks/test/").status_code for _ in range(2)]
    refused = second.post("/api/v1/webhooks/test/")

    assert statuses == [202, 202]
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert other.post("/api/v1/webhooks/test/").status_code == 202
    sent = [task for task in queued if task[0] == "api.tasks.webhook_deliver"]
    assert len(sent) == 2 and WebhookDelivery.objects.count() == 2


def test_every_queue_has_a_worker_in_compose_and_under_serve():
    import yaml

    from registry.management.commands.serve import processes_commands

    queues = {queue.name for queue in celery_app.conf.task_queues}

    def consumed(command: list[str]) -> set[str]:
        (option,) = [part for part in command if part.startswith("--queues=")]
        return set(option.removeprefix("--queues=").split(","))

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    workers = {
        name: consumed(service["command"])
        for name, service in services.items()
        if service.get("command", [])[:4] == ["celery", "-A", "config", "worker"]
    }
    assert workers == {"worker": {"celery"}, "webhooks": {"webhooks"}, "fold": {"fold"}}
    assert (
        consumed(
            processes_commands(python="python", addr="127.0.0.1:8000", gateway="127.0.0.1:8001")[
                "worker"
            ]
        )
        == queues
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",  # Redis
        "http://127.0.0.1:5432/",  # PostgreSQL
        "http://[::1]:8000/",
        "http://169.254.169.254/latest/meta-data/",  # the cloud's metadata
        "http://10.0.0.5/hook",
        "http://0.0.0.0:8000/",
        "http://[::ffff:127.0.0.1]/",  # IPv4 written as IPv6
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://[fe80::1]/",
    ],
)
def test_it_refuses_private_loopback_and_link_local_addresses_by_default(url):
    problem = webhook_url_problem(url)
    assert "private, loopback, link-local or reserved" in problem, problem
    hook = Webhook(application=Application.objects.create(name="assistant"), url=url)
    with pytest.raises(ValidationError) as refused:
        hook.full_clean()
    assert "url" in refused.value.message_dict


@pytest.mark.parametrize(
    "url",
    [
        "http://user:secret@hooks.example.com/x",
        "http://hooks.example.com@127.0.0.1/",
        "http://@x.io/",
    ],
)
def test_it_refuses_urls_with_a_user_name_or_password(url):
    assert webhook_url_problem(url) == "A URL may not carry a user name or password."


def test_an_operator_allows_a_private_network_by_a_setting(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert webhook_url_problem("http://10.1.2.3/hook") == ""
    assert "private" in webhook_url_problem("http://127.0.0.1/hook")
    assert webhook_url_problem("https://hooks.example.com/x") == ""


def test_a_name_that_resolves_inside_is_refused_at_delivery_and_nothing_is_sent(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    listener = Receiver(lambda conn, receiver: receiver.send(conn, b"HTTP/1.1 204 OK\r\n\r\n"))
    port = listener.listener.getsockname()[1]
    # Saved before the rule, or a name: only the delivery can judge where "localhost" goes.
    hook = Webhook.objects.create(
        application=Application.objects.create(name="assistant"),
        url=f"http://localhost:{port}/hook",
    )
    delivery = webhooks.webhook_test_send(webhook=hook)

    webhooks.webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 1  # no retry would do better
    assert delivery.error.startswith("refused: localhost resolves to a private, loopback")
    assert "127.0.0.1" not in delivery.error  # what an inside name resolves to stays inside
    assert listener.calls == 0
    listener.close()


def test_it_resolves_once_and_connects_to_the_address_it_judged():
    """DNS rebinding: a second lookup would answer otherwise; there is none."""
    from api import outbound

    seen = []
    listener = Receiver(lambda conn, receiver: receiver.send(conn, b"HTTP/1.1 204 OK\r\n\r\n"))
    port = listener.listener.getsockname()[1]
    lookups = []

    def rebinding(host, port):
        lookups.append(host)
        return [ipaddress.ip_address("127.0.0.1" if len(lookups) == 1 else "10.9.9.9")]

    original = listener.answer
    listener.answer = lambda conn, receiver: (seen.append(True), original(conn, receiver))
    limits = outbound.Limits(deadline_seconds=5, max_answer_bytes=1024)
    loopback = [ipaddress.ip_network(LOOPBACK)]

    code = outbound.post(
        f"http://hooks.example.test:{port}/x", b"{}", {}, limits=limits,
        allowed_networks=loopback, resolve=rebinding,
    )  # fmt: skip

    assert code == 204 and lookups == ["hooks.example.test"] and seen == [True]

    # A name with any address inside is refused whole, public ones beside it or not.
    def mixed(host, port):
        return [
            ipaddress.ip_address("93.184.215.14"),
            ipaddress.ip_address("127.0.0.1"),
        ]

    with pytest.raises(outbound.Refused):
        outbound.post(
            f"http://hooks.example.test:{port}/x", b"{}", {}, limits=limits, resolve=mixed
        )
    assert listener.calls == 1
    listener.close()


def test_the_log_tells_no_closed_port_from_an_open_one(settings, receiver_of):
    settings.WEBHOOK_DEADLINE_SECONDS = 1
    silent = receiver_of(lambda conn, receiver: time.sleep(3))
    hangs_up = receiver_of(lambda conn, receiver: None)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        closed_port = probe.getsockname()[1]
    urls = [silent.url, hangs_up.url, f"http://127.0.0.1:{closed_port}/hook"]
    deliveries = [a_delivery(url) for url in urls]

    for delivery in deliveries:
        webhooks.webhook_deliver(delivery_id=delivery.pk)

    recorded = {
        (d.status, d.attempts, d.response_code, d.error)
        for d in WebhookDelivery.objects.filter(pk__in=[d.pk for d in deliveries])
    }
    assert recorded == {("pending", 1, None, "could not deliver")}


def test_view_only_staff_neither_read_the_secret_nor_send_again(client, django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("vera", password="pw-vera", is_staff=True)
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_webhook", "view_webhookdelivery"])
    )
    client.force_login(viewer)
    hook = Webhook.objects.create(
        application=Application.objects.create(name="assistant"),
        url="https://hooks.example.com/x",
        secret="the-signing-secret",
    )
    delivery = webhooks.webhook_test_send(webhook=hook)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", attempts=7)

    page = client.get(f"/admin/api/webhook/{hook.pk}/change/")
    log = client.get("/admin/api/webhookdelivery/")
    pressed = client.post(
        "/admin/api/webhookdelivery/", {"action": "send_again", "_selected_action": [delivery.pk]}
    )

    assert page.status_code == 200 and "the-signing-secret" not in page.content.decode()
    assert log.status_code == 200 and "send_again" not in log.content.decode()
    delivery.refresh_from_db()
    assert pressed.status_code in (200, 302) and delivery.status == "failed"
    assert delivery.attempts == 7


def test_a_delivery_whose_webhook_was_deleted_is_dropped_quietly():
    from api.tasks import webhook_deliver

    delivery = a_delivery("https://hooks.example.com/x")
    delivery.webhook.delete()

    assert webhook_deliver.apply(args=[delivery.pk], throw=True).get() == "gone"
