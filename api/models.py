import hashlib
import ipaddress
import secrets
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

from registry.models import Application

from . import outbound

TOKEN_PREFIX = "trk_"


def _webhook_secret() -> str:
    return secrets.token_urlsafe(32)


def _all_events() -> list[str]:
    return ["contract.published", "tool.retired"]


def webhook_url_problem(url: str) -> str:
    """Why a webhook may not be sent to ``url``, or "": only http(s) without a user name or
    password, only the hosts ``WEBHOOK_ALLOWED_HOSTS`` names when it names any, and an address
    written in the URL must be one webhooks may reach (a name's addresses are judged at every
    delivery, ``api.outbound``)."""
    problem = outbound.url_problem(url)
    if problem:
        return problem
    host = urlsplit(url).hostname or ""
    allowed = settings.WEBHOOK_ALLOWED_HOSTS
    if allowed and host not in allowed:
        return f"{host} is not in WEBHOOK_ALLOWED_HOSTS."
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ""
    return outbound.address_problem(address, webhook_allowed_networks())


def webhook_allowed_networks() -> list[outbound.IPNetwork]:
    """WEBHOOK_ALLOWED_NETWORKS, parsed (the settings checked each value already)."""
    return [
        ipaddress.ip_network(value, strict=False) for value in settings.WEBHOOK_ALLOWED_NETWORKS
    ]


FAST_TOKEN_PREFIX = "registry:runtime:"


def forget_tokens(digests: list[str]) -> None:
    """Drop the cached authentications of these tokens once the change commits, so every
    process sharing the cache reads them again on their next request. Call it after the write:
    outside a transaction ``on_commit`` runs at once."""
    keys = [RuntimeToken.cache_key(digest) for digest in digests]
    keys += [RuntimeToken.fast_cache_key(digest) for digest in digests]
    if keys:
        transaction.on_commit(lambda: cache.delete_many(keys))


class RuntimeTokenQuerySet(models.QuerySet["RuntimeToken"]):
    """Bulk writes forget cached authentications too (the admin revokes with ``update()``)."""

    def update(self, **kwargs):
        # Recording the last use changes nothing a cached authentication decides on.
        digests = [] if set(kwargs) <= {"last_used_at"} else self._digests()
        count = super().update(**kwargs)
        forget_tokens(digests)
        return count

    def delete(self):
        digests = self._digests()
        deleted = super().delete()
        forget_tokens(digests)
        return deleted

    def _digests(self) -> list[str]:
        return list(self.values_list("token_hash", flat=True))


class RuntimeToken(models.Model):
    """A bearer token of one application; only its SHA-256 is stored."""

    class Scope(models.TextChoices):
        CONTRACTS_READ = "contracts:read"
        TRACES_WRITE = "traces:write"
        # Calling tools through the MCP gateway (gateway/), which checks each call first.
        TOOLS_CALL = "tools:call"

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(
        max_length=16, editable=False, help_text="Shown to tell tokens apart."
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = RuntimeTokenQuerySet.as_manager()

    class Meta:
        ordering = ["application__name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.application.name})"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        forget_tokens([self.token_hash])

    def delete(self, *args, **kwargs):
        deleted = super().delete(*args, **kwargs)
        forget_tokens([self.token_hash])
        return deleted

    def clean(self) -> None:
        if not isinstance(self.scopes, list) or not set(self.scopes) <= set(self.Scope.values):
            raise ValidationError(
                {"scopes": f"A list of scopes among: {', '.join(self.Scope.values)}."}
            )

    @staticmethod
    def cache_key(digest: str) -> str:
        """Where ``api.auth`` caches the token with this SHA-256 (shared by every process)."""
        return f"registry:token:{digest}"

    @staticmethod
    def fast_cache_key(digest: str) -> str:
        """Where the fast read path (``api/fast.py``) finds the token's plain-text record."""
        return f"{FAST_TOKEN_PREFIX}{digest}"

    @staticmethod
    def hash(raw: str) -> str:
        # Tokens are 256 random bits: a fast hash is enough, no salt or stretching needed.
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def generate(cls) -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)

    @property
    def is_usable(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class Webhook(models.Model):
    """Where an application wants to hear of publications and retirements of its tools."""

    class Event(models.TextChoices):
        PUBLISHED = "contract.published"
        RETIRED = "tool.retired"

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500, help_text="http or https; see WEBHOOK_ALLOWED_HOSTS.")
    secret = models.CharField(
        max_length=200, default=_webhook_secret, help_text="Signs each body (HMAC-SHA256)."
    )
    events = models.JSONField(default=_all_events, help_text="Any of the event names.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["application__name", "pk"]

    def __str__(self) -> str:
        return f"{self.application.name} → {self.url}"

    def clean(self) -> None:
        problem = webhook_url_problem(self.url)
        if problem:
            raise ValidationError({"url": problem})
        known = set(self.Event.values)
        if not isinstance(self.events, list) or not set(self.events) <= known or not self.events:
            raise ValidationError({"events": f"A non-empty list of: {', '.join(sorted(known))}."})


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the delivery log."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id} ({self.status})"
