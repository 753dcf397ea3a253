"""Failed admin logins are throttled per account and per address (django-axes), a locked-out
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


def test_the_account_stays_locked_from_any_address(reviewer):
    for attempt in range(LIMIT):
        login("rita", f"wrong-{attempt}", address=f"198.51.100.{attempt}")
    client, response = login("rita", "pw-rita", address="203.0.113.50")
    assert response.status_code == 429 and not logged_in(client)


def test_an_address_guessing_many_accounts_is_locked_for_all_of_them(reviewer, second_reviewer):
    for attempt in range(LIMIT):
        login(f"guess-{attempt}", "password", address="203.0.113.9")
    client, response = login("sam", "pw-sam", address="203.0.113.9")
    assert response.status_code == 429 and not logged_in(client)
    # Another address is not held back by it.
    client, response = login("sam", "pw-sam", address="198.51.100.77")
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
