"""Every change to a contract goes through here: propose, approve, reject, rebase, publish.

Transitions claim their row with a conditional UPDATE (or a row lock), and the database's
one-approved-version constraint backs them up, so two reviewers or a retried request never
publish twice.
"""

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from registry.models import ContractVersion, Revision, RiskLevel, Tool
from registry.selectors import REVISION_CACHE_KEY, registry_context
from registry.validation import ContractInvalid, RegistryContext, contract_check

from .diff import contract_diff, has_poisoning
from .models import Approval, AuditEntry, Comment, ReviewError, ReviewTicket

logger = logging.getLogger(__name__)
REVIEWERS_GROUP = "Reviewers"


def is_reviewer(user: AbstractBaseUser) -> bool:
    return user.is_active and user.groups.filter(name=REVIEWERS_GROUP).exists()


def contract_validate(*, document: dict, context: RegistryContext | None = None) -> dict:
    """The normalised document, or ContractInvalid naming the tool, field and reason."""
    normalised, errors = contract_check(document, context=context or registry_context())
    if errors:
        raise ContractInvalid(str(document.get("name", "?")), errors)
    return normalised


def _version_fields(document: dict, risk: RiskLevel) -> dict:
    fields = {field: document.get(field) for field in ContractVersion.CONTRACT_FIELDS}
    for field in (
        "requires",
        "produces",
        "permissions",
        "invariants",
        "config_params",
        "dependencies",
    ):
        fields[field] = fields[field] or []
    for field in ("effects", "cost", "resource_limits"):
        fields[field] = fields[field] or {}
    fields["input_schema"] = fields["input_schema"] or {"type": "object"}
    fields["risk"] = risk
    fields["lifecycle"] = document.get("status") or Tool.Lifecycle.ACTIVE
    return fields


@transaction.atomic
def contract_propose(
    *,
    document: dict,
    author: AbstractBaseUser | None,
    source: str = ContractVersion.Source.MANUAL,
    context: RegistryContext | None = None,
    evidence: dict | None = None,
    fingerprint: str | None = None,
    kind: str | None = None,
) -> ReviewTicket | None:
    """Open a ticket proposing ``document``; None when it equals the approved contract."""
    document = contract_validate(document=document, context=context)
    tool, created = Tool.objects.get_or_create(name=document["name"])
    # The tool row is the lock that serialises version numbering and publishing per tool.
    tool = Tool.objects.select_for_update(no_key=True).get(pk=tool.pk)
    base = tool.current_version
    risk = RiskLevel.objects.get(name=document["risk"])
    version = ContractVersion(
        tool=tool,
        number=(tool.versions.aggregate(n=Max("number"))["n"] or 0) + 1,
        status=ContractVersion.Status.PROPOSED,
        source=source,
        based_on=base,
        author=author,
        **_version_fields(document, risk),
    )
    version.content_hash = version.compute_hash()
    if base is not None and base.content_hash == version.content_hash:
        return None
    version.save()
    approvals_required = risk.approvals_required
    if base is not None:
        approvals_required = max(approvals_required, base.risk.approvals_required)
    ticket = ReviewTicket.objects.create(
        tool=tool,
        base=base,
        proposed=version,
        kind=kind or (ReviewTicket.Kind.CHANGE if base else ReviewTicket.Kind.NEW_TOOL),
        evidence=evidence or {},
        fingerprint=fingerprint,
        approvals_required=approvals_required,
        proposer=author,
    )
    _audit(AuditEntry.Action.PROPOSED, actor=author, ticket=ticket, version=version)
    transaction.on_commit(lambda: _notify_reviewers(ticket.pk))
    return ticket


def ticket_diff(ticket: ReviewTicket) -> dict:
    ranks = dict(RiskLevel.objects.values_list("name", "rank"))
    base = ticket.base.document() if ticket.base else None
    return contract_diff(base, ticket.proposed.document(), risk_rank=ranks)


@transaction.atomic
def review_approve(*, ticket: ReviewTicket, reviewer: AbstractBaseUser) -> ContractVersion | None:
    """Record one approval; publish when the ticket has enough. Returns the published version."""
    if not is_reviewer(reviewer):
        raise ReviewError("Only members of the Reviewers group may approve.")
    # Locks are always taken tool first, then tickets: publishing marks the tool's other open
    # tickets, so taking a ticket first would deadlock against a reviewer of a sibling ticket.
    Tool.objects.select_for_update(no_key=True).get(pk=ticket.tool_id)
    ticket = ReviewTicket.objects.select_for_update().get(pk=ticket.pk)
    if ticket.status != ReviewTicket.Status.OPEN:
        raise ReviewError(f"Ticket #{ticket.pk} was already decided ({ticket.status}).")
    if reviewer.pk in (ticket.proposer_id, ticket.proposed.author_id):
        raise ReviewError("You proposed this change: another reviewer must approve it.")
    if ticket.needs_rebase:
        raise ReviewError(f"Ticket #{ticket.pk} is based on a superseded version: rebase it first.")
    try:
        with transaction.atomic():
            Approval.objects.create(ticket=ticket, reviewer=reviewer)
    except IntegrityError:
        raise ReviewError(f"You already approved ticket #{ticket.pk}.") from None
    _audit(AuditEntry.Action.APPROVED, actor=reviewer, ticket=ticket, version=ticket.proposed)
    if ticket.approvals.count() < ticket.approvals_required:
        return None
    return contract_publish(ticket=ticket, actor=reviewer)


@transaction.atomic
def contract_publish(
    *,
    ticket: ReviewTicket,
    actor: AbstractBaseUser | None,
    action: str = AuditEntry.Action.PUBLISHED,
) -> ContractVersion:
    """Make the ticket's proposal the approved, current version, all or nothing."""
    tool = Tool.objects.select_for_update(no_key=True).get(pk=ticket.tool_id)
    now = timezone.now()
    claimed = ReviewTicket.objects.filter(
        pk=ticket.pk, status=ReviewTicket.Status.OPEN, needs_rebase=False
    ).update(status=ReviewTicket.Status.APPROVED, decided_by=actor, decided_at=now)
    if claimed != 1:
        raise ReviewError(f"Ticket #{ticket.pk} can no longer be published.")
    previous = tool.current_version
    if ticket.base_id != (previous.pk if previous else None):
        raise ReviewError(f"Ticket #{ticket.pk} is based on a superseded version: rebase it first.")
    ContractVersion.objects.filter(tool=tool, status=ContractVersion.Status.APPROVED).update(
        status=ContractVersion.Status.SUPERSEDED
    )
    published = ContractVersion.objects.filter(
        pk=ticket.proposed_id, status=ContractVersion.Status.PROPOSED
    ).update(status=ContractVersion.Status.APPROVED, approved_at=now)
    if published != 1:
        raise ReviewError(f"Version of ticket #{ticket.pk} is no longer a proposal.")
    version = ContractVersion.objects.select_related("tool", "risk").get(pk=ticket.proposed_id)
    tool.current_version = version
    tool.lifecycle = version.lifecycle
    tool.save(update_fields=["current_version", "lifecycle"])
    # Proposals written against the version just superseded must be rebased before approval.
    ReviewTicket.objects.filter(tool=tool, status=ReviewTicket.Status.OPEN).exclude(
        pk=ticket.pk
    ).update(needs_rebase=True)
    revision_bump()
    _audit(
        action,
        actor=actor,
        ticket=ticket,
        version=version,
        before_hash=previous.content_hash if previous else "",
    )
    ticket.refresh_from_db()
    transaction.on_commit(lambda: _notify_proposer(ticket.pk))
    return version


def revision_bump() -> None:
    """Move the counter runtimes poll; cached copies are dropped once the change commits."""
    if not Revision.objects.filter(pk=1).update(value=F("value") + 1, changed_at=timezone.now()):
        Revision.objects.create(pk=1, value=1)
    transaction.on_commit(_revision_forget)


def _revision_forget() -> None:
    from api.selectors import forget_revision

    cache.delete(REVISION_CACHE_KEY)
    forget_revision()


@transaction.atomic
def review_reject(*, ticket: ReviewTicket, reviewer: AbstractBaseUser, reason: str) -> ReviewTicket:
    if not is_reviewer(reviewer):
        raise ReviewError("Only members of the Reviewers group may reject.")
    if not reason.strip():
        raise ReviewError("Say why the change is rejected.")
    Tool.objects.select_for_update(no_key=True).get(pk=ticket.tool_id)  # tool first, always
    claimed = ReviewTicket.objects.filter(pk=ticket.pk, status=ReviewTicket.Status.OPEN).update(
        status=ReviewTicket.Status.REJECTED,
        decided_by=reviewer,
        decided_at=timezone.now(),
        reason=reason.strip(),
    )
    if claimed != 1:
        raise ReviewError(f"Ticket #{ticket.pk} was already decided.")
    ContractVersion.objects.filter(
        pk=ticket.proposed_id, status=ContractVersion.Status.PROPOSED
    ).update(status=ContractVersion.Status.REJECTED)
    ticket.refresh_from_db()
    _audit(
        AuditEntry.Action.REJECTED,
        actor=reviewer,
        ticket=ticket,
        version=ticket.proposed,
        detail={"reason": ticket.reason},
    )
    transaction.on_commit(lambda: _notify_proposer(ticket.pk))
    return ticket


@transaction.atomic
def review_rebase(*, ticket: ReviewTicket, actor: AbstractBaseUser | None) -> ReviewTicket:
    """Re-propose the same content on top of the current approved version."""
    tool = Tool.objects.select_for_update(no_key=True).get(pk=ticket.tool_id)
    ticket = ReviewTicket.objects.select_for_update().get(pk=ticket.pk)
    if ticket.status != ReviewTicket.Status.OPEN or not ticket.needs_rebase:
        raise ReviewError(f"Ticket #{ticket.pk} does not need a rebase.")
    old = ticket.proposed
    current = tool.current_version
    version = ContractVersion.objects.get(pk=old.pk)
    version.pk = None
    version.number = (tool.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version.based_on = current
    version.status = ContractVersion.Status.PROPOSED
    version.save()
    ContractVersion.objects.filter(pk=old.pk).update(status=ContractVersion.Status.SUPERSEDED)
    # Approvals were given to a diff against the old base; the new diff needs fresh eyes.
    ticket.approvals.all().delete()
    ticket.base = current
    ticket.proposed = version
    ticket.needs_rebase = False
    if current is not None:
        ticket.approvals_required = max(
            version.risk.approvals_required, current.risk.approvals_required
        )
    ticket.save()
    _audit(AuditEntry.Action.REBASED, actor=actor, ticket=ticket, version=version)
    return ticket


def review_comment(*, ticket: ReviewTicket, author: AbstractBaseUser, body: str) -> Comment:
    if not body.strip():
        raise ReviewError("A comment needs some text.")
    return Comment.objects.create(ticket=ticket, author=author, body=body.strip())


def inferred_change_may_auto_publish(ticket: ReviewTicket) -> bool:
    """A clean inferred change at a level that allows it: no poisoning, risk not raised."""
    version = ticket.proposed
    if version.source != ContractVersion.Source.INFERRED or not version.risk.auto_approve_inferred:
        return False
    if ticket.base is not None and ticket.base.risk.rank < version.risk.rank:
        return False
    return not has_poisoning(ticket_diff(ticket))


def _audit(
    action: str,
    *,
    actor: AbstractBaseUser | None,
    ticket: ReviewTicket | None,
    version: ContractVersion,
    before_hash: str | None = None,
    detail: dict | None = None,
) -> AuditEntry:
    if before_hash is None:
        before_hash = version.based_on.content_hash if version.based_on else ""
    return AuditEntry.objects.create(
        actor=actor,
        action=action,
        tool_id=version.tool_id,
        ticket=ticket,
        version=version,
        before_hash=before_hash,
        after_hash=version.content_hash,
        detail=detail or {},
    )


def _notify_reviewers(ticket_id: int) -> None:
    ticket = ReviewTicket.objects.select_related("tool", "proposed__risk").get(pk=ticket_id)
    risk = ticket.proposed.risk
    reviewers = (
        risk.reviewers.filter(is_active=True)
        if risk.reviewers.exists()
        else (get_user_model().objects.filter(groups__name=REVIEWERS_GROUP, is_active=True))
    )
    recipients = sorted({user.email for user in reviewers if user.email})
    if recipients:
        _send(
            f"[registry] Review needed: {ticket.get_kind_display()} of {ticket.tool.name}",
            f"Ticket #{ticket.pk} ({risk.name} risk) needs {ticket.approvals_required} "
            f"approval(s): /admin/reviews/reviewticket/{ticket.pk}/change/",
            recipients,
        )


def _notify_proposer(ticket_id: int) -> None:
    ticket = ReviewTicket.objects.select_related("tool", "proposer").get(pk=ticket_id)
    if ticket.proposer and ticket.proposer.email:
        reason = f"\nReason: {ticket.reason}" if ticket.reason else ""
        _send(
            f"[registry] Your proposal for {ticket.tool.name} was {ticket.status}",
            f"Ticket #{ticket.pk} was {ticket.status} by {ticket.decided_by}.{reason}",
            [ticket.proposer.email],
        )


def _send(subject: str, body: str, recipients: list[str]) -> None:
    # Runs after commit: a mail server hiccup must not undo a decision already taken.
    try:
        send_mail(subject, body, None, recipients)
    except Exception:
        logger.exception("could not send %r to %s", subject, recipients)


def reviewers_group() -> Group:
    return Group.objects.get(name=REVIEWERS_GROUP)
