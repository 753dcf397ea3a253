from __future__ import annotations

import gc
import threading
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, Q, Subquery, TextField
from django.db.models.fields.json import KT
from django.utils import timezone

from registry.json_display import json_text
from registry.models import ContractVersion, Tool
from registry.revision import revision_memo, transaction_open

from .charts import DayPoint, Marker, chart_window, day_points
from .evidence import contract_differences
from .models import DriftReport, InferredContract, ToolDayStats, ToolStats, Trace
from .otel import states_whole
from .risk import RISK_ORDER, LabelIndex, Lexicon, label_read, lexicon

HEALTH_DAYS = 90
RECENT_VERSIONS = 10
COMPARED_FIELDS = ("requires", "produces", "risk", "input_schema", "cost")


def inferred_contracts_export() -> list[dict[str, Any]]:
    """The latest inferred contract of each tool, as contract documents with their support."""
    return [
        {**inferred.document, "support": inferred.support}
        for inferred in InferredContract.objects.order_by("tool_name")
    ]


def drift_reports_recent(*, limit: int = 8) -> list[DriftReport]:
    """The latest drift reports with their tool, base version and ticket, in one query."""
    return list(
        DriftReport.objects.select_related("tool", "base", "ticket").order_by("-updated_at", "-pk")[
            :limit
        ]
    )


def trace_states_whole(*, trace: Trace) -> tuple[dict[str, Any], dict[str, Any]]:
    """A step's whole state before and after. An assembled OpenTelemetry trace stores a large
    state once (``learning.otel.states_shared``): its earlier steps are read to rebuild it."""
    if not any(SHARED in state for state in (trace.state_before, trace.state_after)):
        return trace.state_before, trace.state_after
    steps = (
        Trace.objects.filter(
            application=trace.application_id, trace_id=trace.trace_id, step__lte=trace.step
        )
        .order_by("step")
        .values_list("step", "state_before", "state_after")
    )
    return states_whole(list(steps)).get(trace.step, (trace.state_before, trace.state_after))


SHARED = "$same_as"


@dataclass(frozen=True)
class ComparedField:
    field: str
    approved: str
    inferred: str
    differs: bool


@dataclass(frozen=True)
class ToolHealth:
    """What a tool's health page shows: its days, markers and window, and its inferred contract
    beside the approved one."""

    points: list[DayPoint]
    markers: list[Marker]
    start: date
    end: date
    days: int
    calls: int
    errors: int
    last_seen: datetime | None
    versions: int
    drift_reports: int
    approved_version: ContractVersion | None
    inferred: InferredContract | None
    comparison: list[ComparedField]
    differing: list[str]
    recent_versions: list[ContractVersion]
    # Whether traces arrived since the inference above (then a refresh is due soon).
    stats: ToolStats | None


def tool_health(*, tool: Tool) -> ToolHealth:
    """Days, markers, the inferred-against-approved comparison and the latest versions of one
    tool, in seven queries whatever the number of days, reports or versions. Drawn from the
    per-day statistics folded at ingest, so the charts outlive the traces."""
    today = timezone.now().date()
    rows = list(
        ToolDayStats.objects.filter(
            tool_name=tool.name, day__gte=today - timedelta(days=HEALTH_DAYS - 1)
        ).values("day", "calls", "errors", "durations", "last_seen_at")
    )
    points = day_points(rows)
    versions = list(
        ContractVersion.objects.filter(tool=tool, approved_at__isnull=False).values_list(
            "number", "approved_at"
        )
    )
    markers = [
        Marker(at=approved_at, label=f"v{number}", kind="version", title=f"v{number} published")
        for number, approved_at in versions
        if approved_at is not None
    ]
    for created_at, items, ticket_id in DriftReport.objects.filter(tool=tool).values_list(
        "created_at", "items", "ticket_id"
    ):
        fields = ", ".join(sorted({str(item.get("field", "?")) for item in items}))
        where = f" (ticket #{ticket_id})" if ticket_id else ""
        markers.append(
            Marker(at=created_at, label="drift", kind="drift", title=f"drift: {fields}{where}")
        )
    start, end = chart_window(points, markers, today=today, days=HEALTH_DAYS)
    current = (
        ContractVersion.objects.select_related("risk", "tool").get(pk=tool.current_version_id)
        if tool.current_version_id
        else None
    )
    inferred = InferredContract.objects.filter(tool_name=tool.name).first()
    recent_versions = list(
        ContractVersion.objects.filter(tool=tool)
        .select_related("risk", "author")
        .order_by("-number")[:RECENT_VERSIONS]
    )
    approved_document = current.document() if current else None
    comparison = []
    differing: list[str] = []
    if inferred is not None:
        differing = contract_differences(approved_document, inferred.document)
        comparison = [
            ComparedField(
                field=key,
                approved=field_text(approved_document.get(key)) if approved_document else "—",
                inferred=field_text(inferred.document.get(key)),
                differs=key in differing,
            )
            for key in COMPARED_FIELDS
        ]
    shown = [point for point in points if start <= point.day <= end]
    seen = [row["last_seen_at"] for row in rows if row["last_seen_at"]]
    return ToolHealth(
        points=points,
        markers=markers,
        start=start,
        end=end,
        days=len(shown),
        calls=sum(point.calls for point in shown),
        errors=sum(point.errors for point in shown),
        last_seen=max(seen, default=None),
        versions=len(versions),
        drift_reports=sum(marker.kind == "drift" for marker in markers),
        approved_version=current,
        inferred=inferred,
        comparison=comparison,
        differing=differing,
        recent_versions=recent_versions,
        stats=ToolStats.objects.filter(tool_name=tool.name).only("dirty", "traces_total").first(),
    )


def field_text(value: Any) -> str:
    """A contract field as the comparison shows it: names joined, the rest as JSON."""
    if value is None:
        return "—"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value) or "—"
    if isinstance(value, str):
        return value
    return json_text(value, sort_keys=True)


def risk_lexicon() -> Lexicon:
    """The risk lexicon: the reviewed one, with the operator's file (``RISK_VERBS_FILE``) over
    it when one is set. Built once per process and file (``learning.risk.lexicon``)."""
    return lexicon(Path(settings.RISK_VERBS_FILE) if settings.RISK_VERBS_FILE else None)


def risk_labels() -> list[dict[str, Any]]:
    """The risk labels people gave approved tools, with what the suggester reads of each
    (``learning.risk.prepare_labels``): what risk suggestions learn from."""
    return _labels_read(None)


def _labels_read(content_hashes: set[str] | None) -> list[dict[str, Any]]:
    """``risk_labels``, of the approved contracts with these content hashes only when given."""
    fields = ("description", "produces", "requires", "permissions", "input_schema",
              "annotations", "gated", "gated_text")  # fmt: skip
    # The preconditions its calls failed without, from its inferred contract (one per tool).
    gated = InferredContract.objects.filter(tool_name=OuterRef("tool__name")).values(
        "document__evidence__gated"
    )[:1]
    return [
        {
            "name": name,
            "risk": risk,
            "content_hash": content_hash,
            **dict(zip(fields, values, strict=True)),
        }
        for content_hash, name, risk, *values in ContractVersion.objects.filter(
            status=ContractVersion.Status.APPROVED,
            **({} if content_hashes is None else {"content_hash__in": content_hashes}),
        )
        .annotate(gated=Subquery(gated), gated_text=_gated_text())
        .values_list("content_hash", "tool__name", "risk__name", *fields)
    ]


def _gated_text() -> Subquery:
    """A labelled contract's ``gated`` as the database writes it in text: a key that needs no
    JSON decoding, for reading a hundred thousand of them."""
    return Subquery(
        InferredContract.objects.filter(tool_name=OuterRef("tool__name")).values(
            text=KT("document__evidence__gated")
        )[:1],
        output_field=TextField(),
    )


def risk_label_index() -> LabelIndex:
    """The labelled tools, read and indexed for suggestions (``learning.risk.LabelIndex``), once
    per registry revision in this process: a refresh of one tool then costs the same with a
    thousand labelled tools or a hundred thousand.

    An approval moves the revision, so a new label is seen at once. The preconditions a
    labelled tool's calls failed without (``gated``, from its inferred contract) are read with
    the labels, so a change there is seen at the next revision. The index is kept from one
    revision to the next and changed in place (``_label_index_update``): each revision reads
    which contracts are approved (their id and content hash, which covers the name and the
    label) and which inferred contracts were written since the last read, then reads and
    indexes only the contracts it has not seen.
    """
    return revision_memo("learning:risk-labels", _label_index_update)


# An inferred contract's ``inferred_at`` is the writing process's clock before its commit: each
# update looks again at the inferred contracts written this long before the previous one began.
GATED_MARGIN = timedelta(minutes=10)


@dataclass
class _LabelState:
    """What this process's index was built from: each approved contract's key by version id,
    the tools whose key has a ``gated`` (an inferred contract's deletion is not stamped), and
    when the last update began. ``whole`` asks the next update to read every key again: the
    last one read inside a transaction, which may roll back what it saw."""

    index: LabelIndex
    lexicon: Lexicon
    keys: dict[int, tuple[str, str | None]]
    gated: dict[int, str]
    read_at: datetime
    whole: bool = False


# This process's index and what it was built from; a refresh runs in one thread of a worker
# process at a time, the only writer.
_index: dict[str, _LabelState] = {}
_index_lock = threading.Lock()


def _label_index_update() -> LabelIndex:
    """Keep this process's index to the approved contracts' keys (content hash, ``gated``): what
    a reading depends on. The first read, and one after a read inside a transaction, reads every
    key (with ``gated``, a subquery per contract: about a second at 100k); otherwise only the
    keys of the contracts approved, withdrawn or changed since (the approved ids and hashes,
    two short columns) and of the tools whose inferred contract was written since, or whose
    ``gated`` was set (which a deletion would take away)."""
    lex = risk_lexicon()
    with _index_lock:
        started = timezone.now()
        state = _index.get("labels")
        if state is not None and state.lexicon is not lex:
            state = None
        approved = ContractVersion.objects.filter(status=ContractVersion.Status.APPROVED).order_by()
        if state is None or state.whole:
            keys: dict[int, tuple[str, str | None]] = {}
            gated: dict[int, str] = {}
            rows = approved.annotate(gated_text=_gated_text()).values_list(
                "pk", "content_hash", "gated_text", "tool__name"
            )
        else:
            keys, gated = dict(state.keys), dict(state.gated)
            hashes = dict(approved.values_list("pk", "content_hash"))
            for pk in keys.keys() - hashes.keys():
                keys.pop(pk)
                gated.pop(pk, None)
            changed = [pk for pk, content_hash in hashes.items()
                       if keys.get(pk, (None,))[0] != content_hash]  # fmt: skip
            written = (
                InferredContract.objects.filter(inferred_at__gte=state.read_at - GATED_MARGIN)
                .order_by()
                .values_list("tool_name", flat=True)
            )
            names = {*written, *gated.values()}
            rows = (
                approved.filter(Q(pk__in=changed) | Q(tool__name__in=names))
                .annotate(gated_text=_gated_text())
                .values_list("pk", "content_hash", "gated_text", "tool__name")
            )
            for pk in changed:  # read again below, unless withdrawn meanwhile
                keys.pop(pk, None)
                gated.pop(pk, None)
        for pk, content_hash, gated_text, name in rows:
            keys[pk] = (content_hash, gated_text)
            gated.pop(pk, None)
            if gated_text is not None:
                gated[pk] = name
        index = state.index if state is not None else LabelIndex()
        current = set(keys.values())
        known = index.keys()
        new = current - known
        added = {}
        if new:
            for row in _labels_read({content_hash for content_hash, _ in new}):
                key = (row["content_hash"], row["gated_text"])
                if key in new and row["risk"] in RISK_ORDER:
                    added[key] = label_read(row, lex)
        index.update(added=added, removed=known - current)
        if state is None:
            # A first read leaves millions of objects that live as long as the process (at
            # 100k labels); the next full collection would scan them all, a second on the next
            # large read (often the first refresh after a publication), and so would each one
            # after. Collected once here, they are moved out of the collector's view.
            gc.collect()
            gc.freeze()
        _index["labels"] = _LabelState(
            index=index, lexicon=lex, keys=keys, gated=gated,
            read_at=started, whole=transaction_open(),
        )  # fmt: skip
        return index
