from django.conf import settings
from django.db import models
from django.db.models import Q

from registry.models import ContractVersion, Tool


class ReviewError(Exception):
    """A decision that cannot be taken; the message is shown to the reviewer as it is."""


class ProposalChanged(ReviewError):
    """A decision about a proposal the ticket no longer holds: a source replaced it since."""

    def __init__(self, message: str, *, ticket_id: int) -> None:
        super().__init__(message)
        self.ticket_id = ticket_id


class ReviewTicket(models.Model):
    class Kind(models.TextChoices):
        NEW_TOOL = "new_tool", "New tool"
        CHANGE = "change", "Change"
        DRIFT = "drift", "Drift"
        RETIREMENT = "retirement", "Retirement"

    class Status(models.TextChoices):
        OPEN = "open"
        APPROVED = "approved"
        REJECTED = "rejected"
        SUPERSEDED = "superseded"

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="tickets")
    base = models.ForeignKey(
        ContractVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    proposed = models.OneToOneField(
        ContractVersion, on_delete=models.PROTECT, related_name="ticket"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    needs_rebase = models.BooleanField(
        default=False,
        help_text="Set when another version was published after this proposal was written.",
    )
    evidence = models.JSONField(default=dict, blank=True)
    # NULL, not "": tickets without a fingerprint must stay outside the unique constraint.
    fingerprint = models.CharField(  # noqa: DJ001
        max_length=64, null=True, blank=True, editable=False
    )
    approvals_required = models.PositiveSmallIntegerField(default=1)
    proposer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="proposed_tickets",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decided_tickets",
    )
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # The same drift never opens two tickets, whichever worker sees it first.
            models.UniqueConstraint(
                fields=["fingerprint"],
                condition=Q(fingerprint__isnull=False),
                name="unique_drift_fingerprint",
            ),
        ]
        indexes = [models.Index(fields=["status", "kind"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()} {self.tool.name}"


class Approval(models.Model):
    ticket = models.ForeignKey(ReviewTicket, on_delete=models.CASCADE, related_name="approvals")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "reviewer"], name="one_approval_per_reviewer")
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} approved #{self.ticket_id}"


class Comment(models.Model):
    ticket = models.ForeignKey(ReviewTicket, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"comment by {self.author} on #{self.ticket_id}"


class AuditQuerySet(models.QuerySet["AuditEntry"]):
    def update(self, **kwargs):
        raise ReviewError("Audit entries are append-only.")

    def delete(self):
        raise ReviewError("Audit entries are append-only.")


class AuditEntry(models.Model):
    """Append-only: who did what to which contract, with the hashes before and after."""

    class Action(models.TextChoices):
        PROPOSED = "proposed"
        APPROVED = "approved"
        REJECTED = "rejected"
        PUBLISHED = "published"
        AUTO_PUBLISHED = "auto_published", "Published automatically"
        REBASED = "rebased"
        DRIFT_UPDATED = "drift_updated", "Drift evidence updated"
        PROPOSAL_UPDATED = "proposal_updated", "Inferred proposal updated"
        TRUSTED = "trusted_on_first_use", "Published on first use by an operator"
        WITHDRAWN = "withdrawn", "Proposal withdrawn by its source"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )
    action = models.CharField(max_length=30, choices=Action.choices)
    tool = models.ForeignKey(Tool, on_delete=models.PROTECT, related_name="audit_entries")
    ticket = models.ForeignKey(
        ReviewTicket, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries"
    )
    version = models.ForeignKey(
        ContractVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    before_hash = models.CharField(max_length=64, blank=True)
    after_hash = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} {self.tool.name}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ReviewError("Audit entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ReviewError("Audit entries are append-only.")
