"""Every change to a contract goes through here: propose, approve, reject, rebase, publish.

Transitions claim their row with a conditional UPDATE (or a row lock), and the database's
one-approved-version constraint backs them up, so two reviewers or a retried request never
publish twice.
"""

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone

from registry.contract import ContractDocument, proposal_of, with_defaults
from registry.models import ContractVersion, RiskLevel, Tool, contract_hash
from registry.pins import definition_hash
from registry.revision import revision_bump
from registry.services import (
    PublishError,
    applications_save,
    contract_validate,
    contract_version_create,
    contract_version_publish,
    contract_version_rebase,
    contract_version_replace,
    registry_file_check,
    state_variables_add,
    tool_lock,
    tool_lock_or_create,
    vocabulary_save,
)
from registry.signals import contract_published
from registry.validation import ContractInvalid, RegistryContext

from .diff import ContractDiff, contract_diff, needs_person, widened_hints
from .models import Approval, AuditEntry, Comment, ProposalChanged, ReviewError, ReviewTicket
from .shapes import TicketEvidence

logger = logging.getLogger(__name__)
REVIEWERS_GROUP = "Reviewers"


def is_reviewer(user: User) -> bool:
    return user.is_active and user.groups.filter(name=REVIEWERS_GROUP).exists()


@transaction.atomic
def contract_propose(
    *,
    document: ContractDocument | dict[str, Any],
    author: User | None,
    source: str = ContractVersion.Source.MANUAL,
    context: RegistryContext | None = None,
    evidence: TicketEvidence | None = None,
    fingerprint: str | None = None,
    kind: str | None = None,
    notify: bool = True,
    definition: dict[str, Any] | None = None,
) -> ReviewTicket | None:
    """Open a ticket proposing ``document`` (with the MCP ``definition`` its server declared,
    if any); None when it equals the approved contract. ``notify=False``: the caller tells
    reviewers itself, in one digest (``reviewers_notify``)."""
    normalised = contract_validate(document=dict(document), context=context)
    version = contract_version_create(
        document=normalised, author=author, source=source, definition=definition
    )
    if version is None:
        return None
    base = version.based_on
    ticket = ReviewTicket.objects.create(
        tool=version.tool,
        base=base,
        proposed=version,
        kind=kind or (ReviewTicket.Kind.CHANGE if base else ReviewTicket.Kind.NEW_TOOL),
        evidence=evidence or {},
        fingerprint=fingerprint,
        approvals_required=ticket_approvals_required(base=base, proposed=version),
        proposer=author,
    )
    audit_record(AuditEntry.Action.PROPOSED, actor=author, ticket=ticket, version=version)
    if notify:
        transaction.on_commit(lambda: _notify_reviewers(ticket.pk))
    return ticket


# The risk level a change that widens its tool's MCP hints is judged at, at least.
WIDENED_HINT_RISK = "high"


def ticket_risk(
    *,
    base: ContractVersion | None,
    proposed: ContractVersion,
    levels: dict[str, RiskLevel] | None = None,
) -> RiskLevel:
    """The risk a ticket is judged at, and so the approvals it needs: the higher of the approved
    and the proposed version's, and at least WIDENED_HINT_RISK when the proposal widens what
    its annotations say the tool may do (``reviews.diff.widened_hints``). ``levels`` (every
    risk level by name, read once by a caller judging many tickets) spares a query."""
    candidates = [proposed.risk] if base is None else [proposed.risk, base.risk]
    if base is not None and widened_hints(base.annotations, proposed.annotations):
        if levels is None:
            candidates += RiskLevel.objects.filter(name=WIDENED_HINT_RISK)
        elif WIDENED_HINT_RISK in levels:
            candidates.append(levels[WIDENED_HINT_RISK])
    return max(candidates, key=lambda risk: (risk.rank, risk.approvals_required))


def ticket_approvals_required(
    *,
    base: ContractVersion | None,
    proposed: ContractVersion,
    levels: dict[str, RiskLevel] | None = None,
) -> int:
    """How many approvals a ticket proposing ``proposed`` over ``base`` needs: those of the
    risk it is judged at (``ticket_risk``)."""
    return ticket_risk(base=base, proposed=proposed, levels=levels).approvals_required


@dataclass(frozen=True)
class Proposal:
    """One proposal of ``contract_proposals_open``: a document checked by ``contract_validate``,
    for a tool its caller holds locked (``tool_lock``), with the MCP ``definition`` its server
    declared, if any."""

    tool: Tool
    document: ContractDocument
    evidence: TicketEvidence
    kind: str
    definition: dict[str, Any] | None = None


# Rows a bulk insert sends at once: far below PostgreSQL's 65,535 parameters for the widest row.
BULK_BATCH = 500


@transaction.atomic
def contract_proposals_open(
    *, proposals: list[Proposal], author: User | None, source: str
) -> list[ReviewTicket | None]:
    """``contract_propose`` (with ``notify=False``) for many tools at once, in a number of
    queries that does not grow with them: the versions, tickets and audit entries are each
    written by one bulk insert (per BULK_BATCH rows). Each tool appears once. The ticket of
    each proposal, in order; None where the document and the definition equal the tool's
    approved version (nothing to propose)."""
    if not proposals:
        return []
    levels = {level.name: level for level in RiskLevel.objects.all()}
    tool_ids = [proposal.tool.pk for proposal in proposals]
    # One aggregate for every tool's last number (the ordering cleared, or it joins the GROUP BY).
    last_numbers = dict(
        ContractVersion.objects.filter(tool_id__in=tool_ids)
        .order_by()
        .values("tool_id")
        .annotate(last=Max("number"))
        .values_list("tool_id", "last")
    )
    current_ids = [p.tool.current_version_id for p in proposals if p.tool.current_version_id]
    bases = ContractVersion.objects.select_related("risk").in_bulk(current_ids)
    versions: list[ContractVersion] = []
    written: list[tuple[Proposal, ContractVersion]] = []
    for proposal in proposals:
        base = bases.get(proposal.tool.current_version_id or 0)
        version = _version_of(proposal, base, levels, author, source)
        version.number = (last_numbers.get(proposal.tool.pk) or 0) + 1
        if (
            base is not None
            and base.content_hash == version.content_hash
            and base.definition_hash == version.definition_hash
        ):
            continue
        versions.append(version)
        written.append((proposal, version))
    ContractVersion.objects.bulk_create(versions, batch_size=BULK_BATCH)
    tickets = [
        ReviewTicket(
            tool=proposal.tool,
            base=version.based_on,
            proposed=version,
            kind=proposal.kind,
            evidence=proposal.evidence,
            approvals_required=ticket_approvals_required(
                base=version.based_on, proposed=version, levels=levels
            ),
            proposer=author,
        )
        for proposal, version in written
    ]
    ReviewTicket.objects.bulk_create(tickets, batch_size=BULK_BATCH)
    AuditEntry.objects.bulk_create(
        [
            _audit_entry(AuditEntry.Action.PROPOSED, actor=author, ticket=ticket, version=version)
            for ticket, (_proposal, version) in zip(tickets, written, strict=True)
        ],
        batch_size=BULK_BATCH,
    )
    opened = {
        id(proposal): ticket for ticket, (proposal, _version) in zip(tickets, written, strict=True)
    }
    return [opened.get(id(proposal)) for proposal in proposals]


def _version_of(
    proposal: Proposal,
    base: ContractVersion | None,
    levels: dict[str, RiskLevel],
    author: User | None,
    source: str,
) -> ContractVersion:
    """The unsaved version ``contract_version_create`` would write for ``proposal``."""
    fields = with_defaults(proposal.document)
    version = ContractVersion(
        tool=proposal.tool,
        status=ContractVersion.Status.PROPOSED,
        source=source,
        based_on=base,
        author=author,
        risk=levels[proposal.document["risk"]],
        lifecycle=fields["status"],
        **{name: fields[name] for name in ContractVersion.CONTRACT_FIELDS},
    )
    definition = proposal.definition
    version.definition = base.definition if definition is None and base is not None else definition
    version.content_hash = version.compute_hash()
    return version


def _proposal_set(ticket: ReviewTicket, version: ContractVersion) -> None:
    """``ticket`` now proposes ``version`` over the version it is based on. Approvals given to
    other content are withdrawn (they judged another diff); the approvals it needs are those
    of its new risk. The caller saves the ticket and audits the change."""
    ticket.approvals.all().delete()
    ticket.proposed = version
    ticket.base = version.based_on
    ticket.needs_rebase = False
    ticket.approvals_required = ticket_approvals_required(base=ticket.base, proposed=version)


def ticket_diff(ticket: ReviewTicket) -> ContractDiff:
    ranks = dict(RiskLevel.objects.values_list("name", "rank"))
    base = ticket.base.document() if ticket.base else None
    return contract_diff(base, ticket.proposed.document(), risk_rank=ranks)


@dataclass(frozen=True)
class ProposalSeen:
    """The proposal a decision is about, as the page the reviewer decided on showed it: its
    version and content hash. A source may replace an open ticket's proposal at any moment
    (``ticket_proposal_replace``), so a decision names what it decides on."""

    version_id: int
    content_hash: str

    @classmethod
    def of(cls, ticket: ReviewTicket) -> "ProposalSeen":
        """What ``ticket`` (as read, perhaps some time ago) proposes."""
        return cls(version_id=ticket.proposed_id, content_hash=ticket.proposed.content_hash)


def _check_seen(ticket: ReviewTicket, seen: ProposalSeen) -> None:
    """Refuse a decision about another proposal than the ticket's; ``ticket`` is locked."""
    proposed = ticket.proposed
    if proposed.pk != seen.version_id or proposed.content_hash != seen.content_hash:
        raise ProposalChanged(
            f"The proposal of ticket #{ticket.pk} changed after you saw it (it is now "
            f"v{proposed.number}): nothing was decided. Review the new diff.",
            ticket_id=ticket.pk,
        )


@transaction.atomic
def review_approve(
    *, ticket: ReviewTicket, reviewer: User, seen: ProposalSeen
) -> ContractVersion | None:
    """Record one approval of the proposal ``seen``; publish when the ticket has enough.
    Returns the published version. Raises ProposalChanged (nothing written) when the ticket
    proposes something else now."""
    if not is_reviewer(reviewer):
        raise ReviewError("Only members of the Reviewers group may approve.")
    # Locks are always taken tool first, then tickets: publishing marks the tool's other open
    # tickets, so taking a ticket first would deadlock against a reviewer of a sibling ticket.
    # Replacing a proposal takes the same locks, so the proposal checked here is the one
    # approved and published below.
    tool_lock(tool_id=ticket.tool_id)
    ticket = ReviewTicket.objects.select_for_update().select_related("proposed").get(pk=ticket.pk)
    if ticket.status != ReviewTicket.Status.OPEN:
        raise ReviewError(f"Ticket #{ticket.pk} was already decided ({ticket.status}).")
    _check_seen(ticket, seen)
    if reviewer.pk in (ticket.proposer_id, ticket.proposed.author_id):
        raise ReviewError("You proposed this change: another reviewer must approve it.")
    if ticket.needs_rebase:
        raise ReviewError(f"Ticket #{ticket.pk} is based on a superseded version: rebase it first.")
    try:
        with transaction.atomic():
            Approval.objects.create(ticket=ticket, reviewer=reviewer)
    except IntegrityError:
        raise ReviewError(f"You already approved ticket #{ticket.pk}.") from None
    audit_record(AuditEntry.Action.APPROVED, actor=reviewer, ticket=ticket, version=ticket.proposed)
    if ticket.approvals.count() < ticket.approvals_required:
        return None
    vocabulary_adopt(ticket=ticket, reviewer=reviewer)
    return contract_publish(ticket=ticket, actor=reviewer)


def vocabulary_adopt(*, ticket: ReviewTicket, reviewer: User) -> list[str]:
    """The vocabulary grows only through a person: approving an inferred proposal adds the
    state variables its evidence lists as missing (``unknown_variables``) and puts them in the
    contract's ``requires``/``produces``, in the approval's transaction. Returns the names added.
    """
    unknown = (ticket.evidence or {}).get("unknown_variables")
    if ticket.proposed.source != ContractVersion.Source.INFERRED or not isinstance(unknown, dict):
        return []
    wanted = {
        key: [name for name in unknown.get(key) or [] if isinstance(name, str)]
        for key in ("requires", "produces")
    }
    names = sorted(set(wanted["requires"]) | set(wanted["produces"]))
    if not names:
        return []
    try:
        canonical = state_variables_add(
            names=names,
            description=f"Added on approving ticket #{ticket.pk} ({ticket.tool.name}): "
            "its traces showed it.",
        )
    except ValidationError as exc:
        raise ReviewError(f"The vocabulary cannot take these variables: {exc}.") from None
    if not canonical:
        return []
    document = ticket.proposed.document()
    for key in ("requires", "produces"):
        extra = [canonical[name] for name in wanted[key] if name in canonical]
        document[key] = list(dict.fromkeys([*document[key], *extra]))
    try:
        normalised = contract_validate(document=proposal_of(document))
        version = contract_version_replace(version=ticket.proposed, document=normalised)
    except (ContractInvalid, PublishError) as exc:
        raise ReviewError(f"Ticket #{ticket.pk} cannot take the new variables: {exc}.") from None
    ticket.proposed = version
    ticket.save(update_fields=["proposed", "updated_at"])
    added = sorted(set(canonical.values()))
    audit_record(
        AuditEntry.Action.PROPOSAL_UPDATED,
        actor=reviewer,
        ticket=ticket,
        version=version,
        detail={"vocabulary_added": added},
    )
    return added


@transaction.atomic
def contract_publish(
    *,
    ticket: ReviewTicket,
    actor: User | None,
    action: str = AuditEntry.Action.PUBLISHED,
) -> ContractVersion:
    """Make the ticket's proposal the approved, current version, all or nothing."""
    tool = tool_lock(tool_id=ticket.tool_id)
    # Claimed only while it still proposes the version its caller read and checked.
    claimed = ReviewTicket.objects.filter(
        pk=ticket.pk,
        status=ReviewTicket.Status.OPEN,
        needs_rebase=False,
        proposed_id=ticket.proposed_id,
    ).update(status=ReviewTicket.Status.APPROVED, decided_by=actor, decided_at=timezone.now())
    if claimed != 1:
        raise ReviewError(f"Ticket #{ticket.pk} can no longer be published.")
    previous = tool.current_version
    try:
        version = contract_version_publish(version_id=ticket.proposed_id, base_id=ticket.base_id)
    except PublishError as exc:
        raise ReviewError(f"Ticket #{ticket.pk} cannot be published: {exc}.") from None
    # Proposals written against the version just superseded must be rebased before approval.
    ReviewTicket.objects.filter(tool=tool, status=ReviewTicket.Status.OPEN).exclude(
        pk=ticket.pk
    ).update(needs_rebase=True)
    audit_record(
        action,
        actor=actor,
        ticket=ticket,
        version=version,
        before_hash=previous.content_hash if previous else "",
    )
    ticket.refresh_from_db()
    transaction.on_commit(lambda: _notify_proposer(ticket.pk))
    return version


@transaction.atomic
def contract_proposals_publish(
    *,
    tickets: list[ReviewTicket],
    actor: User | None,
    action: str = AuditEntry.Action.PUBLISHED,
) -> None:
    """``contract_publish`` for many tickets of distinct tools at once, all or nothing, in a
    number of queries that does not grow with them: each ticket is claimed while it still
    proposes the version its caller read, each proposal must still be based on its tool's
    current version, and the revision moves once. Publications are announced after the commit
    (``contract_published``), one per version, as ever; ``tickets`` are updated in place."""
    if not tickets:
        return
    tool_ids = [ticket.tool_id for ticket in tickets]
    tools = {
        tool.pk: tool
        for tool in Tool.objects.select_for_update(no_key=True, of=("self",))
        .select_related("current_version")
        .filter(pk__in=tool_ids)
    }
    claimable = set(
        ReviewTicket.objects.select_for_update()
        .filter(
            pk__in=[ticket.pk for ticket in tickets],
            status=ReviewTicket.Status.OPEN,
            needs_rebase=False,
        )
        .values_list("pk", "proposed_id")
    )
    for ticket in tickets:
        if (ticket.pk, ticket.proposed_id) not in claimable:
            raise ReviewError(f"Ticket #{ticket.pk} can no longer be published.")
        if ticket.base_id != tools[ticket.tool_id].current_version_id:
            raise ReviewError(
                f"Ticket #{ticket.pk} cannot be published: it is based on a superseded version: "
                "rebase it first."
            )
    now = timezone.now()
    ticket_ids = [ticket.pk for ticket in tickets]
    version_ids = [ticket.proposed_id for ticket in tickets]
    ReviewTicket.objects.filter(pk__in=ticket_ids).update(
        status=ReviewTicket.Status.APPROVED, decided_by=actor, decided_at=now
    )
    ContractVersion.objects.filter(
        tool_id__in=tool_ids, status=ContractVersion.Status.APPROVED
    ).update(status=ContractVersion.Status.SUPERSEDED)
    published = ContractVersion.objects.filter(
        pk__in=version_ids, status=ContractVersion.Status.PROPOSED
    ).update(status=ContractVersion.Status.APPROVED, approved_at=now)
    if published != len(version_ids):
        raise ReviewError("A proposal to publish is no longer a proposal.")
    # Each tool takes its one approved version (the partial unique index finds it) and its
    # lifecycle, in one statement rather than a CASE per row.
    approved = ContractVersion.objects.filter(
        tool=OuterRef("pk"), status=ContractVersion.Status.APPROVED
    )
    Tool.objects.filter(pk__in=tool_ids).update(
        current_version=Subquery(approved.values("pk")[:1]),
        lifecycle=Subquery(approved.values("lifecycle")[:1]),
    )
    revision_bump()
    # Proposals written against the versions just superseded must be rebased before approval.
    ReviewTicket.objects.filter(tool_id__in=tool_ids, status=ReviewTicket.Status.OPEN).exclude(
        pk__in=ticket_ids
    ).update(needs_rebase=True)
    entries = []
    for ticket in tickets:
        previous = tools[ticket.tool_id].current_version
        ticket.proposed.status = ContractVersion.Status.APPROVED
        ticket.proposed.approved_at = now
        entries.append(
            _audit_entry(
                action,
                actor=actor,
                ticket=ticket,
                version=ticket.proposed,
                before_hash=previous.content_hash if previous else "",
            )
        )
        ticket.status, ticket.decided_by, ticket.decided_at = (
            ReviewTicket.Status.APPROVED,
            actor,
            now,
        )
    AuditEntry.objects.bulk_create(entries, batch_size=BULK_BATCH)

    def announce() -> None:
        for version_id in version_ids:
            contract_published.send(sender=ContractVersion, version_id=version_id)
        _notify_proposers(ticket_ids)

    transaction.on_commit(announce)


@transaction.atomic
def review_reject(
    *, ticket: ReviewTicket, reviewer: User, reason: str, seen: ProposalSeen
) -> ReviewTicket:
    """Reject the proposal ``seen`` with a reason. A reason written about one text is never
    recorded against another: raises ProposalChanged when the ticket proposes something else
    now."""
    if not is_reviewer(reviewer):
        raise ReviewError("Only members of the Reviewers group may reject.")
    if not reason.strip():
        raise ReviewError("Say why the change is rejected.")
    tool_lock(tool_id=ticket.tool_id)  # tool first, always
    current = ReviewTicket.objects.select_related("proposed").get(pk=ticket.pk)
    if current.status == ReviewTicket.Status.OPEN:
        _check_seen(current, seen)
    # The tool lock serialises replacing the proposal; the claim names it all the same.
    claimed = ReviewTicket.objects.filter(
        pk=ticket.pk, status=ReviewTicket.Status.OPEN, proposed_id=seen.version_id
    ).update(
        status=ReviewTicket.Status.REJECTED,
        decided_by=reviewer,
        decided_at=timezone.now(),
        reason=reason.strip(),
    )
    if claimed != 1:
        raise ReviewError(f"Ticket #{ticket.pk} was already decided.")
    _proposal_closed(
        ticket,
        version_id=seen.version_id,
        status=ContractVersion.Status.REJECTED,
        action=AuditEntry.Action.REJECTED,
        actor=reviewer,
        reason=reason.strip(),
    )
    transaction.on_commit(lambda: _notify_proposer(ticket.pk))
    return ticket


@transaction.atomic
def review_rebase(*, ticket: ReviewTicket, actor: User | None) -> ReviewTicket:
    """Re-propose the same content on top of the current approved version."""
    tool_lock(tool_id=ticket.tool_id)
    ticket = ReviewTicket.objects.select_for_update().get(pk=ticket.pk)
    if ticket.status != ReviewTicket.Status.OPEN or not ticket.needs_rebase:
        raise ReviewError(f"Ticket #{ticket.pk} does not need a rebase.")
    version = contract_version_rebase(version=ticket.proposed)
    # Approvals were given to a diff against the old base; the new diff needs fresh eyes.
    _proposal_set(ticket, version)
    ticket.save()
    audit_record(AuditEntry.Action.REBASED, actor=actor, ticket=ticket, version=version)
    return ticket


def review_comment(*, ticket: ReviewTicket, author: User, body: str) -> Comment:
    if not body.strip():
        raise ReviewError("A comment needs some text.")
    return Comment.objects.create(ticket=ticket, author=author, body=body.strip())


def inferred_change_may_auto_publish(ticket: ReviewTicket) -> bool:
    """A clean inferred change at a level that allows it: no poisoning flag in any text a model
    reads, nothing a call must carry loosened, risk not raised."""
    version = ticket.proposed
    if version.source != ContractVersion.Source.INFERRED or not version.risk.auto_approve_inferred:
        return False
    if ticket.base is not None and ticket.base.risk.rank < version.risk.rank:
        return False
    return not needs_person(ticket_diff(ticket))


def audit_record(
    action: str,
    *,
    actor: User | None,
    ticket: ReviewTicket | None,
    version: ContractVersion,
    before_hash: str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """The one writer of audit entries (they are append-only; ``contract_proposals_open``
    inserts the entries ``_audit_entry`` makes in bulk)."""
    entry = _audit_entry(
        action, actor=actor, ticket=ticket, version=version, before_hash=before_hash, detail=detail
    )
    entry.save()
    return entry


def _audit_entry(
    action: str,
    *,
    actor: User | None,
    ticket: ReviewTicket | None,
    version: ContractVersion,
    before_hash: str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    if before_hash is None:
        before_hash = version.based_on.content_hash if version.based_on else ""
    return AuditEntry(
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
    recipients = _reviewers_of(risk)
    if recipients:
        _send(
            f"[registry] Review needed: {ticket.get_kind_display()} of {ticket.tool.name}",
            f"Ticket #{ticket.pk} ({risk.name} risk) needs {ticket.approvals_required} "
            f"approval(s): /admin/reviews/reviewticket/{ticket.pk}/change/",
            recipients,
        )


def _reviewers_of(risk: RiskLevel) -> list[str]:
    reviewers = (
        risk.reviewers.filter(is_active=True)
        if risk.reviewers.exists()
        else (get_user_model().objects.filter(groups__name=REVIEWERS_GROUP, is_active=True))
    )
    return sorted({user.email for user in reviewers if user.email})


def reviewers_notify(*, ticket_ids: list[int], about: str) -> int:
    """One e-mail per reviewer listing the open tickets among ``ticket_ids`` that they review
    (``about`` says where they came from), instead of one e-mail per ticket. Call it after the
    tickets are committed. Returns the number of e-mails sent."""
    # Only what the lines say: a sync's thousand tickets carry evidence and contracts not read.
    tickets = (
        ReviewTicket.objects.filter(pk__in=ticket_ids, status=ReviewTicket.Status.OPEN)
        .order_by("pk")
        .values_list("pk", "kind", "approvals_required", "tool__name", "proposed__risk_id")
    )
    levels: dict[int, RiskLevel] = {}
    lines: dict[str, list[str]] = {}
    recipients_of: dict[int, list[str]] = {}
    for pk, kind, approvals_required, tool_name, risk_id in tickets:
        if risk_id not in recipients_of:
            levels[risk_id] = RiskLevel.objects.get(pk=risk_id)
            recipients_of[risk_id] = _reviewers_of(levels[risk_id])
        for recipient in recipients_of[risk_id]:
            lines.setdefault(recipient, []).append(
                f"- {ReviewTicket.Kind(kind).label} of {tool_name} ({levels[risk_id].name} risk, "
                f"{approvals_required} approval(s)): /admin/reviews/reviewticket/{pk}/change/"
            )
    for recipient, listed in lines.items():
        _send(
            f"[registry] Review needed: {len(listed)} ticket(s) from {about}",
            "\n".join(listed),
            [recipient],
        )
    return len(lines)


@transaction.atomic
def ticket_withdraw(*, ticket: ReviewTicket, reason: str) -> bool:
    """An open ticket whose source no longer proposes anything: superseded, its proposal
    withdrawn (audited with ``reason``). False when it was no longer open."""
    tool_lock(tool_id=ticket.tool_id)  # tool first, always
    claimed = ReviewTicket.objects.filter(pk=ticket.pk, status=ReviewTicket.Status.OPEN).update(
        status=ReviewTicket.Status.SUPERSEDED, decided_at=timezone.now(), reason=reason
    )
    if claimed != 1:
        return False
    _proposal_closed(
        ticket,
        version_id=ticket.proposed_id,
        status=ContractVersion.Status.SUPERSEDED,
        action=AuditEntry.Action.WITHDRAWN,
        actor=None,
        reason=reason,
    )
    return True


def _proposal_closed(
    ticket: ReviewTicket,
    *,
    version_id: int,
    status: str,
    action: str,
    actor: User | None,
    reason: str,
) -> None:
    """After a claim closed ``ticket``: its proposal, if still proposed, takes ``status``, and
    the decision is audited with ``reason``. ``ticket`` is read again."""
    ContractVersion.objects.filter(pk=version_id, status=ContractVersion.Status.PROPOSED).update(
        status=status
    )
    ticket.refresh_from_db()
    audit_record(
        action, actor=actor, ticket=ticket, version=ticket.proposed, detail={"reason": reason}
    )


def _notify_proposers(ticket_ids: list[int]) -> None:
    """``_notify_proposer`` for many tickets, read in one query."""
    for ticket in ReviewTicket.objects.select_related("tool", "proposer", "decided_by").filter(
        pk__in=ticket_ids, proposer__isnull=False
    ):
        _proposer_tell(ticket)


def _notify_proposer(ticket_id: int) -> None:
    _proposer_tell(ReviewTicket.objects.select_related("tool", "proposer").get(pk=ticket_id))


def _proposer_tell(ticket: ReviewTicket) -> None:
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


@dataclass
class ImportResult:
    variables: int = 0
    permissions: int = 0
    proposed: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    applications: list[str] = field(default_factory=list)


@transaction.atomic
def registry_import(*, data: Any, approve: bool = False, actor: User | None = None) -> ImportResult:
    """Import a registry file (or a bare list of contracts); nothing is written if anything fails.

    Without ``approve`` each new or changed contract becomes a proposal with a review ticket;
    with it, each is published at once (an operator's bootstrap), audited as such.
    """
    checked = registry_file_check(data=data)
    vocabulary_save(checked=checked)
    result = ImportResult(variables=len(checked.variables), permissions=len(checked.permissions))
    for document in checked.documents:
        ticket = contract_propose(
            document=document, author=actor, source="import", context=checked.context
        )
        if ticket is None:
            result.unchanged.append(document["name"])
        elif approve:
            contract_publish(ticket=ticket, actor=actor)
            result.published.append(document["name"])
        else:
            result.proposed.append(document["name"])
    result.applications = [application.name for application in applications_save(checked=checked)]
    return result


@dataclass
class DriftTicket:
    ticket: ReviewTicket
    created: bool
    published: bool


@transaction.atomic
def drift_ticket_open_or_update(
    *,
    tool: Tool,
    base: ContractVersion,
    document: dict[str, Any],
    evidence: TicketEvidence,
    fingerprint: str,
) -> DriftTicket | None:
    """The one ticket of one drift: opened the first time, its evidence updated afterwards.

    Idempotent on ``fingerprint`` (unique on tickets): a rerun, a retried task or two workers
    racing find the same ticket. A drift that grows or changes while its ticket is open (more
    traces show more) stays on that ticket: its proposal is replaced (approvals withdrawn,
    audited) and it takes the new fingerprint, so a tool has one open drift ticket per approved
    version, never two for reviewers to reconcile. At a risk level that does not ticket drift
    but lets clean inferred changes publish alone, a clean proposal is published at once
    (audited as ``auto_published``). None when the proposal is not a valid contract (logged).
    """
    tool_lock(tool_id=tool.pk)  # tool first, as publishing does
    ticket = ReviewTicket.objects.select_for_update().filter(fingerprint=fingerprint).first()
    created = False
    if ticket is None:
        grown = (
            ReviewTicket.objects.select_for_update()
            .filter(tool=tool, base=base, kind=ReviewTicket.Kind.DRIFT)
            .filter(status=ReviewTicket.Status.OPEN)
            .first()
        )
        try:
            with transaction.atomic():
                if grown is not None:
                    ticket = ticket_proposal_replace(
                        ticket=grown, document=document, evidence=evidence
                    )
                    ReviewTicket.objects.filter(pk=ticket.pk).update(fingerprint=fingerprint)
                    ticket.fingerprint = fingerprint
                else:
                    ticket = contract_propose(
                        document=document,
                        author=None,
                        source=ContractVersion.Source.INFERRED,
                        evidence=evidence,
                        fingerprint=fingerprint,
                        kind=ReviewTicket.Kind.DRIFT,
                    )
                    created = ticket is not None
        except IntegrityError:
            # Another worker opened it between our read and our insert: one drift, one ticket.
            ticket = ReviewTicket.objects.get(fingerprint=fingerprint)
        except ContractInvalid as exc:
            logger.warning("drift proposal for %s is not a valid contract: %s", tool.name, exc)
            return None
        if ticket is None:
            return None
    elif ticket.status == ReviewTicket.Status.OPEN and ticket.evidence != evidence:
        ReviewTicket.objects.filter(pk=ticket.pk).update(evidence=evidence)
        ticket.evidence = evidence
        audit_record(
            AuditEntry.Action.DRIFT_UPDATED,
            actor=None,
            ticket=ticket,
            version=ticket.proposed,
            before_hash=base.content_hash,
            detail={"traces_since_version": evidence.get("traces_since_version")},
        )
    published = False
    if (
        not base.risk.ticket_on_drift
        and ticket.status == ReviewTicket.Status.OPEN
        and inferred_change_may_auto_publish(ticket)
    ):
        contract_publish(ticket=ticket, actor=None, action=AuditEntry.Action.AUTO_PUBLISHED)
        published = True
    return DriftTicket(ticket=ticket, created=created, published=published)


@dataclass
class NewToolProposal:
    ticket: ReviewTicket
    created: bool
    updated: bool


def new_tool_fingerprint(name: str) -> str:
    """One inferred new-tool proposal per tool name, whichever worker sees it first."""
    return hashlib.sha256(f"new_tool:{name}".encode()).hexdigest()


@transaction.atomic
def new_tool_proposal_open_or_update(
    *, document: dict[str, Any], evidence: TicketEvidence
) -> NewToolProposal | None:
    """The one inferred proposal of an unregistered tool: opened once (a ``new_tool`` ticket,
    never published without people), then kept up to date while it is open.

    Idempotent on the name's fingerprint (unique on tickets) under the tool's row lock, so reruns
    and racing workers find the same ticket. New traces always update the evidence; they replace
    the proposed version (clearing approvals given to the old one, audited) only when the
    contract says something else, not when only its cost figures moved. A decided ticket stays
    decided: a rejected proposal is not opened again. None when the tool has an approved version
    or a proposal of someone else is open. Raises ContractInvalid (nothing written) when the
    document is not a valid contract.
    """
    normalised = contract_validate(document=document)
    fingerprint = new_tool_fingerprint(normalised["name"])
    tool = tool_lock_or_create(name=normalised["name"])
    if tool.current_version_id is not None:
        return None
    ticket = ReviewTicket.objects.select_for_update().filter(fingerprint=fingerprint).first()
    if ticket is None:
        if ReviewTicket.objects.filter(tool=tool, status=ReviewTicket.Status.OPEN).exists():
            return None
        ticket = contract_propose(
            document=normalised,
            author=None,
            source=ContractVersion.Source.INFERRED,
            evidence=evidence,
            fingerprint=fingerprint,
            kind=ReviewTicket.Kind.NEW_TOOL,
        )
        if ticket is None:  # cannot happen without an approved version; never half-written
            return None
        return NewToolProposal(ticket=ticket, created=True, updated=False)
    if ticket.status != ReviewTicket.Status.OPEN:
        return NewToolProposal(ticket=ticket, created=False, updated=False)
    updated = not _same_but_cost(ticket.proposed, normalised)
    if updated:
        version = contract_version_replace(version=ticket.proposed, document=normalised)
        _proposal_set(ticket, version)
        ticket.evidence = evidence
        ticket.save(
            update_fields=[
                "proposed",
                "base",
                "needs_rebase",
                "approvals_required",
                "evidence",
                "updated_at",
            ]
        )
        audit_record(
            AuditEntry.Action.PROPOSAL_UPDATED,
            actor=None,
            ticket=ticket,
            version=version,
            detail={"support": evidence.get("support")},
        )
    elif ticket.evidence != evidence:
        ReviewTicket.objects.filter(pk=ticket.pk).update(evidence=evidence)
        ticket.evidence = evidence
    return NewToolProposal(ticket=ticket, created=False, updated=updated)


@transaction.atomic
def ticket_proposal_replace(
    *,
    ticket: ReviewTicket,
    document: dict[str, Any],
    evidence: TicketEvidence,
    definition: dict[str, Any] | None = None,
) -> ReviewTicket:
    """An open ticket's proposal replaced by what its source now says: one ticket per change,
    however often the source changes again before a decision. Approvals given to the old
    content are withdrawn (audited). When the source says the approved contract again, the
    ticket has nothing left to decide: it is superseded and its proposal withdrawn (audited).
    Raises ContractInvalid (nothing written) when the document is not a valid contract.
    """
    normalised = contract_validate(document=document)
    tool = tool_lock(tool_id=ticket.tool_id)
    if normalised["name"] != tool.name:
        # The replacement would be filed, and published, on the tool the document names.
        raise ReviewError(
            f"Ticket #{ticket.pk} is about {tool.name}; a proposal for {normalised['name']} "
            "cannot replace its content."
        )
    ticket = ReviewTicket.objects.select_for_update().get(pk=ticket.pk)
    if ticket.status != ReviewTicket.Status.OPEN:
        raise ReviewError(f"Ticket #{ticket.pk} was already decided.")
    current = tool.current_version
    if (
        current is not None
        and contract_hash(current.document()) == contract_hash(with_defaults(normalised))
        and (definition is None or current.definition_hash == definition_hash(definition))
    ):
        ReviewTicket.objects.filter(pk=ticket.pk, status=ReviewTicket.Status.OPEN).update(
            status=ReviewTicket.Status.SUPERSEDED, evidence=evidence, decided_at=timezone.now()
        )
        ContractVersion.objects.filter(
            pk=ticket.proposed_id, status=ContractVersion.Status.PROPOSED
        ).update(status=ContractVersion.Status.SUPERSEDED)
        audit_record(AuditEntry.Action.WITHDRAWN, actor=None, ticket=ticket, version=current)
        ticket.refresh_from_db()
        return ticket
    version = contract_version_replace(
        version=ticket.proposed, document=normalised, definition=definition
    )
    _proposal_set(ticket, version)
    ticket.evidence = evidence
    ticket.save()
    audit_record(AuditEntry.Action.PROPOSAL_UPDATED, actor=None, ticket=ticket, version=version)
    return ticket


def _same_but_cost(version: ContractVersion, document: ContractDocument) -> bool:
    """Whether ``document`` says what ``version`` says, its cost figures aside."""
    current = {key: value for key, value in version.document().items() if key != "cost"}
    filled = with_defaults(document)
    proposed = {key: filled.get(key) for key in current}
    return contract_hash(current) == contract_hash(proposed)
