"""Reads of the review queue: what waits, for whom, and for how long.

Each figure is one query whatever the number of tickets (counts are grouped in the database,
lists are sliced), so the reviewer's home costs the same with ten tickets or ten thousand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, QuerySet

from registry.models import RiskLevel

from .models import Approval, AuditEntry, ReviewTicket
from .services import REVIEWERS_GROUP

PUBLISHED_ACTIONS = (AuditEntry.Action.PUBLISHED, AuditEntry.Action.AUTO_PUBLISHED)


def open_tickets() -> QuerySet[ReviewTicket]:
    return ReviewTicket.objects.filter(status=ReviewTicket.Status.OPEN)


def tickets_awaiting_approval_by(
    *, user: User | AnonymousUser, tickets: QuerySet[ReviewTicket] | None = None
) -> QuerySet[ReviewTicket]:
    """Open tickets this reviewer may approve now and has not: not needing a rebase, not their
    own proposal, at a risk level with no named reviewers or naming them."""
    tickets = open_tickets() if tickets is None else tickets
    if not user.is_authenticated or not user.groups.filter(name=REVIEWERS_GROUP).exists():
        return tickets.none()
    # Semi-joins (IN) rather than correlated EXISTS: PostgreSQL hashes the small side once
    # instead of probing it for each of thousands of tickets.
    named = RiskLevel.reviewers.through.objects.values("risklevel_id")
    levels = RiskLevel.objects.exclude(pk__in=named) | RiskLevel.objects.filter(reviewers=user)
    return (
        tickets.filter(
            status=ReviewTicket.Status.OPEN,
            needs_rebase=False,
            proposed__risk_id__in=levels.values("pk"),
        )
        .exclude(proposer=user)
        .exclude(proposed__author=user)
        .exclude(pk__in=Approval.objects.filter(reviewer=user).values("ticket_id"))
    )


def tickets_awaiting_second_reviewer(
    tickets: QuerySet[ReviewTicket] | None = None,
) -> QuerySet[ReviewTicket]:
    """Open tickets with an approval that need more: the next reviewer finishes them."""
    tickets = open_tickets() if tickets is None else tickets
    return tickets.filter(
        status=ReviewTicket.Status.OPEN,
        needs_rebase=False,
        pk__in=Approval.objects.values("ticket_id"),
    )


def ticket_source_servers() -> list[str]:
    """The names of the sources (MCP servers) whose declarations opened tickets, as their
    evidence names them."""
    names = (
        ReviewTicket.objects.filter(evidence__source="mcp")
        .order_by()  # the model's ordering would make DISTINCT return a row per ticket
        .values_list("evidence__server", flat=True)
        .distinct()
    )
    return sorted({name for name in names if isinstance(name, str)})


def tickets_from_source(tickets: QuerySet[ReviewTicket], server: str) -> QuerySet[ReviewTicket]:
    return tickets.filter(evidence__source="mcp", evidence__server=server)


def tickets_needing_rebase(tickets: QuerySet[ReviewTicket] | None = None) -> QuerySet[ReviewTicket]:
    tickets = open_tickets() if tickets is None else tickets
    return tickets.filter(status=ReviewTicket.Status.OPEN, needs_rebase=True)


@dataclass
class ReviewQueue:
    open_total: int = 0
    # (risk id, risk name, rank) → {kind: count}; highest risk first.
    by_risk: list[dict[str, Any]] = field(default_factory=list)
    kinds: list[tuple[str, str]] = field(default_factory=list)
    kind_totals: dict[str, int] = field(default_factory=dict)
    oldest: list[ReviewTicket] = field(default_factory=list)
    awaiting_me: int = 0
    awaiting_second: int = 0
    needing_rebase: int = 0
    publications: list[AuditEntry] = field(default_factory=list)


def review_queue(
    *,
    user: User | AnonymousUser,
    oldest: int = 5,
    publications: int = 8,
    now: datetime | None = None,
) -> ReviewQueue:
    """The reviewer's home: open tickets by risk and kind, the oldest waiting, what waits for
    this reviewer, for a second reviewer, for a rebase, and the latest publications."""
    queue = ReviewQueue(kinds=[(kind.value, kind.label) for kind in ReviewTicket.Kind])
    rows = (
        open_tickets()
        .values("proposed__risk_id", "proposed__risk__name", "proposed__risk__rank", "kind")
        .annotate(count=Count("pk"))
        .order_by("-proposed__risk__rank", "proposed__risk__name", "kind")
    )
    by_risk: dict[int, dict[str, Any]] = {}
    for row in rows:
        risk = by_risk.setdefault(
            row["proposed__risk_id"],
            {
                "id": row["proposed__risk_id"],
                "name": row["proposed__risk__name"],
                "kinds": {kind: 0 for kind, _ in queue.kinds},
                "total": 0,
            },
        )
        risk["kinds"][row["kind"]] = row["count"]
        risk["total"] += row["count"]
        queue.kind_totals[row["kind"]] = queue.kind_totals.get(row["kind"], 0) + row["count"]
        queue.open_total += row["count"]
    queue.by_risk = list(by_risk.values())
    for risk in queue.by_risk:
        risk["cells"] = [(kind, risk["kinds"][kind]) for kind, _ in queue.kinds]
    queue.oldest = list(
        open_tickets()
        .select_related("tool", "proposed__risk")
        .defer("evidence")
        .order_by("created_at", "pk")[:oldest]
    )
    queue.awaiting_second = tickets_awaiting_second_reviewer().count()
    queue.needing_rebase = tickets_needing_rebase().count()
    queue.awaiting_me = tickets_awaiting_approval_by(user=user).count()
    queue.publications = list(
        AuditEntry.objects.filter(action__in=PUBLISHED_ACTIONS)
        .select_related("tool", "actor", "version")
        .order_by("-created_at", "-pk")[:publications]
    )
    return queue
