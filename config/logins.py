"""Admin logins: a per-account slowdown beside django-axes' lockout by account and address.

django-axes locks an account *at an address* after ``LOGIN_FAILURE_LIMIT`` failures from it
(``AXES_LOCKOUT_PARAMETERS``): wrong passwords sent from elsewhere never lock the account's
owner out. Guesses spread over many addresses are slowed instead: once an account has had that
many failures within the cool-off, from any addresses, each address that already failed for it
may try again only once per ``LOGIN_ACCOUNT_PACE_SECONDS``, all of them together, and is answered
429 with ``Retry-After`` before any password is hashed. An address with no failure for the
account is never held back, so the right password from a new address always gets through.

One address guessing many accounts (a few passwords each, under the lockout) is slowed too:
once it failed for ``LOGIN_ADDRESS_ACCOUNTS`` accounts within the cool-off, it may try any
account only once per ``LOGIN_ACCOUNT_PACE_SECONDS``. People sharing that address are slowed
with it, never locked out.
"""

import hashlib
from collections.abc import Callable
from datetime import datetime

from axes.models import AccessAttempt
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone

from api.auth import client_address


def login_wait(*, username: str, address: str) -> int:
    """Seconds this address must wait before trying ``username`` again; 0: it may now (and
    it took the account's, or the address's, turn)."""
    if not username:
        return 0
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    return _address_wait(address, since) or _account_wait(username, address, since)


def _address_wait(address: str, since: datetime) -> int:
    accounts = (
        AccessAttempt.objects.filter(
            ip_address=address, attempt_time__gte=since, failures_since_start__gt=0
        )
        .order_by()
        .values("username")
        .distinct()[: settings.LOGIN_ADDRESS_ACCOUNTS]
        .count()
    )
    if accounts < settings.LOGIN_ADDRESS_ACCOUNTS:
        return 0
    return _turn("login-pace-address:" + address)


def _account_wait(username: str, address: str, since: datetime) -> int:
    failed = AccessAttempt.objects.filter(
        username=username, attempt_time__gte=since, failures_since_start__gt=0
    ).values_list("ip_address", "failures_since_start")
    failures: dict[str, int] = {}
    for ip_address, count in failed:
        failures[ip_address] = failures.get(ip_address, 0) + count
    if sum(failures.values()) < settings.AXES_FAILURE_LIMIT or address not in failures:
        return 0
    return _turn("login-pace:" + hashlib.sha256(username.encode()).hexdigest())


def _turn(key: str) -> int:
    """0 when the turn of ``key`` (one per pace, whoever takes it: add() is atomic) was free and
    is now taken; else the seconds to wait."""
    pace = settings.LOGIN_ACCOUNT_PACE_SECONDS
    return 0 if cache.add(key, 1, pace) else pace


class LoginSlowdownMiddleware:
    """Answers a slowed login attempt (``login_wait``) with 429 before the admin's login view."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path == reverse("admin:login"):
            username = request.POST.get("username", "")
            wait = login_wait(username=username, address=client_address(request))
            if wait:
                return HttpResponse(
                    "Many wrong passwords were sent for this account or from this address: "
                    f"try again in {wait} seconds.\n",
                    status=429,
                    content_type="text/plain; charset=utf-8",
                    headers={"Retry-After": str(wait)},
                )
        return self.get_response(request)
