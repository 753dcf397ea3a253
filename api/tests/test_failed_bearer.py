"""Failed bearer authentication is throttled per client address, before the database."""

import secrets
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from api.services import runtime_token_create

pytestmark = pytest.mark.django_db
LIMIT = 5
ATTACKER = "203.0.113.7"
NEIGHBOUR = "198.51.100.20"


@pytest.fixture(autouse=True)
def clock(settings, monkeypatch):
    """A small limit, and the throttle's clock held 20 s into a window (windows follow the
    clock: a test running across a minute's end would otherwise see its count start again)."""
    import api.auth

    settings.API_FAILED_BEARER_LIMIT = LIMIT
    settings.API_FAILED_BEARER_WINDOW_SECONDS = 60
    now = [1_000_040.0]
    monkeypatch.setattr(api.auth, "time", SimpleNamespace(time=lambda: now[0]))
    return now


def read(token: str, address: str, **headers):
    return APIClient().get(
        "/api/v1/revision/", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address, **headers
    )


def random_token() -> str:
    return f"trk_{secrets.token_urlsafe(32)}"


def test_it_refuses_an_address_that_sent_too_many_bad_tokens_without_a_query():
    for _ in range(LIMIT):
        assert read(random_token(), ATTACKER).status_code == 401

    with CaptureQueriesContext(connection) as queries:
        answers = [read(random_token(), ATTACKER) for _ in range(50)]
    assert {answer.status_code for answer in answers} == {429}
    assert len(queries) == 0, [query["sql"] for query in queries]
    answer = answers[-1]
    assert 1 <= int(answer["Retry-After"]) <= 60
    error = answer.json()["error"]
    assert error["code"] == "throttled"
    assert "failed authentications" in error["message"]


def test_a_forwarded_for_header_does_not_make_a_new_address():
    for _ in range(LIMIT):
        assert read(random_token(), ATTACKER).status_code == 401
    spoofed = read(random_token(), ATTACKER, HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert spoofed.status_code == 429


def test_it_trusts_the_address_a_configured_proxy_forwarded(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    via_proxy = {"HTTP_X_FORWARDED_FOR": f"192.0.2.1, {ATTACKER}"}  # the proxy appended it
    for _ in range(LIMIT):
        assert read(random_token(), "10.0.0.1", **via_proxy).status_code == 401
    assert read(random_token(), "10.0.0.1", **via_proxy).status_code == 429
    _, good = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    other = read(good, "10.0.0.1", HTTP_X_FORWARDED_FOR=NEIGHBOUR)
    assert other.status_code == 200, other.content


def test_a_spoofed_forwarded_for_from_an_untrusted_peer_is_ignored(settings):
    """Straight to gunicorn, past the proxy: each bad token names a new address."""
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    answers = [
        read(random_token(), ATTACKER, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").status_code
        for n in range(LIMIT + 1)
    ]
    assert answers == [401] * LIMIT + [429]
    _, good = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    # The address the attacker named is not the one held back.
    assert read(good, "10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.0").status_code == 200


def test_a_good_token_from_another_address_is_unaffected():
    _, good = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    for _ in range(LIMIT + 10):
        read(random_token(), ATTACKER)
    assert read(random_token(), ATTACKER).status_code == 429

    answer = read(good, NEIGHBOUR)
    assert answer.status_code == 200, answer.content
    assert read(random_token(), NEIGHBOUR).status_code == 401  # its own count, not the attacker's


def test_a_known_token_passes_from_a_throttled_address_and_an_unknown_one_waits():
    _, known = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    _, unseen = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    assert read(known, ATTACKER).status_code == 200  # now cached
    for _ in range(LIMIT):
        read(random_token(), ATTACKER)

    assert read(known, ATTACKER).status_code == 200  # no database needed to know it
    assert read(unseen, ATTACKER).status_code == 429  # would need the database: after the wait


def test_the_count_starts_again_in_the_next_window(clock):
    for _ in range(LIMIT):
        read(random_token(), ATTACKER)
    refused = read(random_token(), ATTACKER)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "40"
    clock[0] += 40
    assert read(random_token(), ATTACKER).status_code == 401
