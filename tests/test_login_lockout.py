"""Failed admin logins lock an account at an address (django-axes, its real configuration),
guesses from many addresses are slowed but never keep the owner out, a locked-out or slowed
attempt costs no password hash, and the documented commands let a reviewer back in."""

import pytest
from django.conf import settings
from django.contrib.auth.hashers import MD5PasswordHasher
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db
LIMIT = settings.AXES_FAILURE_LIMIT


@pytest.fixture
def hashes(monkeypatch):
    """How many passwords were hashed (checked, or hashed to even out an unknown user's time)."""
    counted = {"n": 0}
    verify, encode = MD5PasswordHasher.verify, MD5PasswordHasher.encode

    def counting(original):
        def hashed(*args, **kwargs):
            counted["n"] += 1
            return original(*args, **kwargs)

        return hashed

    monkeypatch.setattr(MD5PasswordHasher, "verify", counting(verify))
    monkeypatch.setattr(MD5PasswordHasher, "encode", counting(encode))
    return counted


def login(username: str, password: str, address: str = "192.0.2.10"):
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}
    )
    return client, response


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_it_locks_an_account_after_wrong_passwords_and_refuses_the_right_one(reviewer, hashes):
    statuses = [login("rita", f"wrong-{attempt}")[1].status_code for attempt in range(LIMIT)]
    # The form again with its error, until the failure that reaches the limit locks the account.
    assert statuses == [200] * (LIMIT - 1) + [429]
    hashed = hashes["n"]

    for _ in range(20):
        client, response = login("rita", "pw-rita")
        assert response.status_code == 429
        assert not logged_in(client)
    assert hashes["n"] == hashed  # a locked-out attempt hashes nothing


def test_wrong_passwords_from_five_addresses_never_lock_the_owner_out(reviewer):
    for attempt in range(LIMIT):
        _, response = login("rita", f"wrong-{attempt}", address=f"198.51.100.{attempt}")
        assert response.status_code == 200  # the form again: no address reached the limit
    client, response = login("rita", "pw-rita", address="203.0.113.50")
    assert response.status_code == 302 and logged_in(client)


def test_an_account_is_locked_at_the_guessing_address_only(reviewer):
    for attempt in range(LIMIT):
        login("rita", f"wrong-{attempt}", address="203.0.113.9")
    client, response = login("rita", "pw-rita", address="203.0.113.9")
    assert response.status_code == 429 and not logged_in(client)
    client, response = login("rita", "pw-rita", address="198.51.100.77")
    assert response.status_code == 302 and logged_in(client)


def test_guesses_from_many_addresses_are_slowed_and_a_new_address_still_logs_in(reviewer, hashes):
    for attempt in range(LIMIT):
        login("rita", f"wrong-{attempt}", address=f"198.51.100.{attempt}")
    # The account had its limit of failures: an address that failed takes one turn per pace.
    _, first = login("rita", "wrong-again", address="198.51.100.1")
    hashed = hashes["n"]
    slowed = [login("rita", "pw-rita", address=f"198.51.100.{n}")[1] for n in range(LIMIT)]

    assert first.status_code == 200
    assert {response.status_code for response in slowed} == {429}
    assert int(slowed[0]["Retry-After"]) == settings.LOGIN_ACCOUNT_PACE_SECONDS
    assert hashes["n"] == hashed  # a slowed attempt hashes nothing
    # The turn is taken, and still an address that never failed for the account gets in.
    client, response = login("rita", "pw-rita", address="203.0.113.50")
    assert response.status_code == 302 and logged_in(client)


def test_one_address_guessing_many_accounts_is_slowed_and_the_owner_elsewhere_is_not(
    reviewer, hashes
):
    sprayer = "198.51.100.77"
    for n in range(settings.LOGIN_ADDRESS_ACCOUNTS):  # a guess or two at each of many accounts
        assert login(f"user{n}", "guess-1", address=sprayer)[1].status_code == 200
    _, first = login("rita", "guess-1", address=sprayer)  # the address's one turn per pace
    hashed = hashes["n"]
    slowed = [login(f"user{n}", "guess-2", address=sprayer)[1] for n in range(5)]
    slowed.append(login("rita", "pw-rita", address=sprayer)[1])

    assert first.status_code == 200
    assert {response.status_code for response in slowed} == {429}
    assert int(slowed[0]["Retry-After"]) == settings.LOGIN_ACCOUNT_PACE_SECONDS
    assert hashes["n"] == hashed  # a slowed attempt hashes nothing
    client, response = login("rita", "pw-rita", address="203.0.113.51")
    assert response.status_code == 302 and logged_in(client)


def test_the_slowdown_ends_with_the_pace(reviewer, settings):
    from django.core.cache import cache

    for attempt in range(LIMIT):
        login("rita", f"wrong-{attempt}", address=f"198.51.100.{attempt}")
    login("rita", "wrong-again", address="198.51.100.1")
    assert login("rita", "pw-rita", address="198.51.100.2")[1].status_code == 429
    cache.clear()  # as the pace's seconds passing does: the turn's key expires

    client, response = login("rita", "pw-rita", address="198.51.100.2")
    assert response.status_code == 302 and logged_in(client)


@pytest.mark.parametrize(
    "command", [("axes_reset_username", "rita"), ("axes_reset",)], ids=lambda c: c[0]
)
def test_the_reset_commands_let_a_locked_out_reviewer_back_in(reviewer, command):
    for attempt in range(LIMIT):
        login("rita", f"wrong-{attempt}")
    assert login("rita", "pw-rita")[1].status_code == 429

    call_command(*command)

    client, response = login("rita", "pw-rita")
    assert response.status_code == 302 and logged_in(client)


def test_a_mistyped_password_then_the_right_one_logs_in(reviewer):
    _, response = login("rita", "typo")
    assert response.status_code == 200
    client, response = login("rita", "pw-rita")
    assert response.status_code == 302 and logged_in(client)


def test_a_spoofed_forwarded_for_neither_escapes_nor_aims_the_lock(reviewer, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    victim = "198.51.100.7"
    for attempt in range(LIMIT):
        Client(REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR=victim).post(
            "/admin/login/", {"username": "rita", "password": f"wrong-{attempt}"}
        )
    # The attacker's own address is locked, whatever address it wrote,
    spoofed = Client(REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="192.0.2.1")
    response = spoofed.post("/admin/login/", {"username": "rita", "password": "pw-rita"})
    assert response.status_code == 429
    # and the address it named is not.
    client, response = login("rita", "pw-rita", address=victim)
    assert response.status_code == 302 and logged_in(client)


def test_the_address_a_trusted_proxy_forwarded_is_the_one_locked(reviewer, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1"]

    def via_proxy(client_address: str, password: str):
        client = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=client_address)
        return client, client.post(
            "/admin/login/?next=/admin/", {"username": "rita", "password": password}
        )

    for attempt in range(LIMIT):
        via_proxy("203.0.113.9", f"wrong-{attempt}")
    assert via_proxy("203.0.113.9", "pw-rita")[1].status_code == 429
    client, response = via_proxy("198.51.100.7", "pw-rita")
    assert response.status_code == 302 and logged_in(client)
