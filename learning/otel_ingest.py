"""OpenTelemetry spans in: buffer them per trace, then assemble and ingest whole traces.

``spans_receive`` stores the tool-call spans an OTLP request brought (decoded by the pure
``learning.otel``) in a buffer per (application, trace id), within caps per trace and per
application. ``otel_traces_assemble`` (a Celery task, queued when a trace completes and run
periodically) claims the traces that are ready, rebuilds their steps with
``learning.otel.trace_assemble`` and hands them to ``learning.ingest.traces_ingest`` for the
application that sent them: the same rules, aggregates, inference and drift as native traces,
each state stored once per trace (``learning.otel.states_shared``).

Caps count bytes as well as spans (``OTLP_MAX_TRACE_BYTES``, ``OTLP_MAX_PENDING_BYTES`` per
application), and assembly claims traces in chunks of at most ``OTLP_ASSEMBLE_BYTES`` buffered
bytes (at least one trace), so a worker's memory follows the chunk, never the buffer. A trace's
root span, which SDKs send last and which carries the initial state, is never the one refused
at a trace's cap.

A trace is ready when its root span has arrived and no span came for ``OTLP_SETTLE_SECONDS``
(spans of one trace exported by several processes may still be on their way), or when no span
came for ``OTLP_QUIET_SECONDS`` (a root span that never arrives). Once assembled, a trace is
closed: spans arriving later are refused (partial success), because its steps and the state
they carry were already decided. Closed traces are remembered for ``OTLP_KEEP_ASSEMBLED``.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from registry.models import Application
from registry.selectors import alias_map

from .ingest import collector_paused, tool_names_refused, traces_ingest, unknown_tool_reason
from .models import OtelSpan, OtelTrace, SpanIntake
from .otel import CONTENT_CAPTURE, DecodedBatch, SpanRecord, trace_assemble

logger = logging.getLogger(__name__)
ASSEMBLE_CHUNK = 500  # traces per transaction, at most (and OTLP_ASSEMBLE_BYTES)
MAX_IGNORED_REASONS = 20  # distinct reasons for ignored spans kept per application
MAX_PROBLEMS = 10


class BufferFull(Exception):
    """The application's buffer is full: retry after ``retry_after`` seconds (429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


ASSEMBLED_REASON = "its trace was already assembled into steps; later spans are not added"


@dataclass
class SpansReceived:
    buffered: int = 0
    ignored: int = 0
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    complete: list[str] = field(default_factory=list)  # trace ids now complete
    uncaptured: int = 0  # tool calls buffered without arguments or result

    def reject(self, reason: str, count: int = 1) -> None:
        """Count ``count`` spans refused for ``reason``."""
        self.rejected += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count

    def message(self) -> str:
        """The partial-success message: each refusal's reason once, with its count, and what
        to set when tool calls came without their arguments and result."""
        parts = [
            f"{reason} ({count} span{'s' if count != 1 else ''})"
            for reason, count in self.reasons.items()
        ]
        if self.uncaptured:
            parts.append(
                f"{self.uncaptured} tool-call span{'s' if self.uncaptured != 1 else ''} carried "
                "neither arguments nor result: counted (calls, errors, latency), not learnt "
                f"from; to send them, set {CONTENT_CAPTURE}"
            )
        return "; ".join(parts)


@collector_paused()
@transaction.atomic
def spans_receive(*, application: Application, batch: DecodedBatch) -> SpansReceived:
    """Buffer a request's spans for their traces; refuse what no cap or rule allows.

    The application row is locked while its buffer is counted and written, so two concurrent
    requests cannot both take the last place. Nothing is written when the application's buffer
    would overflow (``BufferFull``): the runtime retries the whole request later. A span
    already buffered (an exporter's retry) is counted as buffered again and stored once.

    The phases: refuse the spans of tools the application may not use, lock the traces
    (``_traces_locked``), group the spans by trace (``_spans_by_trace``), keep what each
    trace's caps allow (``_spans_admitted``), store them (``_spans_store``), mark the traces
    received (``_traces_received``) and count the request in the intake (``_intake_count``).
    """
    now = timezone.now()
    result = SpansReceived(
        ignored=batch.ignored, rejected=batch.rejected, reasons=dict(batch.reasons)
    )
    uncaptured = {span["span_id"] for span in batch.spans if not span.get("captured", True)}
    reject = result.reject

    spans = batch.spans
    names = {span["tool"] for span in spans if span["tool"] is not None}
    refused = tool_names_refused(application=application, names=names) if names else set()
    if refused:
        kept = []
        for span in spans:
            if span["tool"] in refused:
                reject(unknown_tool_reason(span["tool"] or "", application))
            else:
                kept.append(span)
        spans = kept
    ids = {span["trace_id"] for span in spans} | batch.roots
    existing, assembling = _traces_locked(application, ids)
    if assembling:
        kept = []
        for span in spans:
            if span["trace_id"] in assembling:
                reject(ASSEMBLED_REASON)
            else:
                kept.append(span)
        spans = kept
    roots = batch.roots - assembling
    by_trace = _spans_by_trace(spans, existing, result)
    new_spans = _spans_admitted(by_trace, existing, result, uncaptured)
    rows = _spans_store(application, new_spans, existing, roots=roots, now=now)
    result.complete = _traces_received(rows, new_spans, existing, roots=roots, now=now)
    _intake_count(application, batch, result, now=now)
    return result


def _traces_locked(
    application: Application, ids: set[str]
) -> tuple[dict[str, OtelTrace], set[str]]:
    """The application's buffered traces among ``ids``, locked, by trace id, and the ids of
    those an assembly holds; the application row is locked first.

    One order, the application then its traces: two requests of an application take their turn
    on its row, so a request never holds a trace another request waits for. A trace locked all
    the same is an assembly's, which is turning it into steps (``_claim``), and may wait for the
    application's row itself (ingest counts unregistered names under it): it is not waited for
    but treated as assembled, which it is once that assembly commits, and its spans are refused
    as those of any assembled trace.
    """
    list(Application.objects.select_for_update().filter(pk=application.pk).values_list("pk"))
    existing = {
        trace.trace_id: trace
        for trace in OtelTrace.objects.select_for_update(skip_locked=True)
        .filter(application=application, trace_id__in=ids)
        .order_by("pk")
    }
    assembling = set(
        OtelTrace.objects.filter(application=application, trace_id__in=ids - set(existing))
        .values_list("trace_id", flat=True)
        .order_by()
    )
    return existing, assembling


def _spans_by_trace(
    spans: list[SpanRecord], existing: dict[str, OtelTrace], result: SpansReceived
) -> dict[str, dict[str, SpanRecord]]:
    """Each trace's spans by span id, the first of a repeated id kept; spans of an assembled
    trace are refused."""
    # A root span alone says a trace is complete; it starts no trace (most traces of a runtime
    # are not agent runs), and carries nothing to keep unless it holds the initial state.
    by_trace: dict[str, dict[str, SpanRecord]] = defaultdict(dict)
    for span in spans:
        trace = existing.get(span["trace_id"])
        if trace is not None and trace.state == OtelTrace.State.ASSEMBLED:
            result.reject(ASSEMBLED_REASON)
            continue
        by_trace[span["trace_id"]].setdefault(span["span_id"], span)
    return by_trace


def _spans_admitted(
    by_trace: dict[str, dict[str, SpanRecord]],
    existing: dict[str, OtelTrace],
    result: SpansReceived,
    uncaptured: set[str],
) -> dict[str, list[SpanRecord]]:
    """Each trace's spans to store: those not buffered yet, within the trace's caps; spans
    already buffered count as buffered again."""
    known_ids = _buffered_span_ids(
        [existing[trace_id] for trace_id in by_trace if trace_id in existing], by_trace
    )
    new_spans: dict[str, list[SpanRecord]] = {}
    for trace_id, records in by_trace.items():
        trace = existing.get(trace_id)
        fresh = [record for span_id, record in records.items() if span_id not in known_ids]
        result.buffered += len(records) - len(fresh)
        fresh = _within_trace_caps(trace, fresh, result)
        if fresh:
            new_spans[trace_id] = fresh
            result.buffered += len(fresh)
            result.uncaptured += sum(1 for record in fresh if record["span_id"] in uncaptured)
    return new_spans


def _within_trace_caps(
    trace: OtelTrace | None, fresh: list[SpanRecord], result: SpansReceived
) -> list[SpanRecord]:
    """The new spans of one trace its span and byte caps leave room for, its root span first."""
    # The root span comes last and carries the initial state: it is kept past the caps
    # (one per trace), and the caps refuse the other spans instead.
    root = None
    if not (trace and trace.complete):
        root = next((record for record in fresh if not record["parent_span_id"]), None)
    others = [record for record in fresh if record is not root]
    others = _within_span_cap(trace, others, result)
    others = _within_byte_cap(trace, others, result)
    return ([root] if root is not None else []) + others


def _within_span_cap(
    trace: OtelTrace | None, others: list[SpanRecord], result: SpansReceived
) -> list[SpanRecord]:
    """The first of ``others`` (root span aside) the trace's span cap has room for."""
    per_trace = settings.OTLP_MAX_SPANS_PER_TRACE
    room = max(per_trace - (trace.span_count if trace else 0), 0)
    if len(others) <= room:
        return others
    result.reject(
        f"a trace holds at most {per_trace} tool-call spans (its root span is always kept)",
        len(others) - room,
    )
    return others[:room]


def _within_byte_cap(
    trace: OtelTrace | None, others: list[SpanRecord], result: SpansReceived
) -> list[SpanRecord]:
    """The first of ``others`` (root span aside) the trace's byte cap has room for."""
    per_trace_bytes = settings.OTLP_MAX_TRACE_BYTES
    room_bytes = per_trace_bytes - (trace.span_bytes if trace else 0)
    weights = [_weight(record) for record in others]
    fits = 0
    while fits < len(others) and weights[fits] <= room_bytes:
        room_bytes -= weights[fits]
        fits += 1
    if fits == len(others):
        return others
    result.reject(
        f"a trace holds at most {per_trace_bytes} bytes of spans (its root span is always kept)",
        len(others) - fits,
    )
    return others[:fits]


def _spans_store(
    application: Application,
    new_spans: dict[str, list[SpanRecord]],
    existing: dict[str, OtelTrace],
    *,
    roots: set[str],
    now: datetime,
) -> dict[str, OtelTrace]:
    """Start the new traces and buffer the new spans, if the application's buffer has room
    (``BufferFull`` otherwise); return the traces they touch by trace id: the new ones, and
    the buffered ones that received a span or their root.

    A new trace is written as it now stands (its spans, their bytes, whether its root came):
    the application's row is locked, so no other request counts its spans meanwhile. Its id
    comes back from the insert, where the database returns it, instead of a second read.
    """
    new_traces = [trace_id for trace_id in new_spans if trace_id not in existing]
    _check_room(
        application,
        len(new_traces),
        sum(map(len, new_spans.values())),
        sum(_weight(record) for records in new_spans.values() for record in records),
    )
    created = OtelTrace.objects.bulk_create(
        [
            OtelTrace(
                application=application,
                trace_id=trace_id,
                first_received_at=now,
                last_received_at=now,
                complete=trace_id in roots,
                span_count=len(new_spans[trace_id]),
                span_bytes=sum(map(_weight, new_spans[trace_id])),
            )
            for trace_id in new_traces
        ]
    )
    if created and created[0].pk is None:
        created = list(OtelTrace.objects.filter(application=application, trace_id__in=new_traces))
    rows = {trace.trace_id: trace for trace in created}
    rows |= {
        trace_id: trace
        for trace_id, trace in existing.items()
        if trace_id in new_spans or trace_id in roots
    }
    _spans_insert(
        [(rows[trace_id], record) for trace_id, records in new_spans.items() for record in records]
    )
    return rows


def _spans_insert(spans: list[tuple[OtelTrace, SpanRecord]]) -> None:
    """Buffer the spans of their traces, any already buffered skipped.

    On PostgreSQL the request's spans go as one JSON array, encoded once by the C encoder and
    split into rows by the database: a bulk insert builds a model instance for each and sends
    each record as an element of a text array, which the driver escapes quote by quote.
    """
    if not spans:
        return
    if connection.vendor != "postgresql":
        OtelSpan.objects.bulk_create(
            [OtelSpan(trace=trace, span_id=record["span_id"], record=record)
             for trace, record in spans],
            ignore_conflicts=True,
        )  # fmt: skip
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO learning_otelspan (trace_id, span_id, record) "
            "SELECT (span ->> 0)::bigint, span ->> 1, span -> 2 "
            "FROM jsonb_array_elements(%s::jsonb) AS span ON CONFLICT DO NOTHING",
            [json.dumps([[trace.pk, record["span_id"], record] for trace, record in spans])],
        )


def _traces_received(
    rows: dict[str, OtelTrace],
    new_spans: dict[str, list[SpanRecord]],
    existing: dict[str, OtelTrace],
    *,
    roots: set[str],
    now: datetime,
) -> list[str]:
    """Mark when the buffered pending traces last received a span and what they now hold (the
    new ones were written so); return the trace ids this request completed."""
    pending = {
        trace_id: trace
        for trace_id, trace in rows.items()
        if trace.state == OtelTrace.State.PENDING
    }
    complete = [
        trace_id
        for trace_id, trace in pending.items()
        if trace_id in roots and (trace_id not in existing or not trace.complete)
    ]
    buffered = [trace for trace_id, trace in pending.items() if trace_id in existing]
    for trace in buffered:
        fresh = new_spans.get(trace.trace_id, [])
        trace.last_received_at = now
        trace.complete = trace.complete or trace.trace_id in roots
        # Locked since they were read (``_traces_locked``): their counts are the stored ones.
        trace.span_count += len(fresh)
        trace.span_bytes += sum(map(_weight, fresh))
    OtelTrace.objects.bulk_update(
        buffered, ["last_received_at", "complete", "span_count", "span_bytes"], batch_size=500
    )
    return complete


def _intake_count(
    application: Application, batch: DecodedBatch, result: SpansReceived, *, now: datetime
) -> None:
    """Add the request's counts, and the reasons spans were ignored, to the application's
    intake."""
    intake, _ = SpanIntake.objects.select_for_update().get_or_create(application=application)
    ignored = dict(intake.ignored_reasons)
    for reason, count in batch.ignored_reasons.items():
        if reason in ignored or len(ignored) < MAX_IGNORED_REASONS:
            ignored[reason] = ignored.get(reason, 0) + count
    SpanIntake.objects.filter(pk=intake.pk).update(
        received=F("received") + result.buffered + result.ignored + result.rejected,
        buffered=F("buffered") + result.buffered,
        ignored=F("ignored") + result.ignored,
        rejected=F("rejected") + result.rejected,
        uncaptured=F("uncaptured") + result.uncaptured,
        ignored_reasons=ignored,
        last_received_at=now,
    )


def _weight(record: SpanRecord) -> int:
    return int(record.get("bytes") or 0)


def _buffered_span_ids(
    traces: list[OtelTrace], by_trace: dict[str, dict[str, SpanRecord]]
) -> set[str]:
    """Span ids of this request already in the buffer (an exporter's retry)."""
    if not traces:
        return set()
    wanted = {span_id for trace in traces for span_id in by_trace[trace.trace_id]}
    return set(
        OtelSpan.objects.filter(trace__in=traces, span_id__in=wanted).values_list(
            "span_id", flat=True
        )
    )


def _check_room(application: Application, new_traces: int, new_spans: int, new_bytes: int) -> None:
    if not new_spans and not new_traces:
        return
    pending = OtelTrace.objects.filter(application=application, state=OtelTrace.State.PENDING)
    totals = pending.aggregate(traces=Count("pk"), spans=Sum("span_count"), bytes=Sum("span_bytes"))
    traces, spans = totals["traces"] or 0, totals["spans"] or 0
    buffered_bytes = totals["bytes"] or 0
    retry = settings.OTLP_QUIET_SECONDS
    if traces + new_traces > settings.OTLP_MAX_PENDING_TRACES:
        raise BufferFull(
            f"this application has {traces} traces waiting to be assembled, at most "
            f"{settings.OTLP_MAX_PENDING_TRACES}; retry after {retry} seconds",
            retry,
        )
    if spans + new_spans > settings.OTLP_MAX_PENDING_SPANS:
        raise BufferFull(
            f"this application has {spans} spans waiting to be assembled, at most "
            f"{settings.OTLP_MAX_PENDING_SPANS}; retry after {retry} seconds",
            retry,
        )
    if buffered_bytes + new_bytes > settings.OTLP_MAX_PENDING_BYTES:
        raise BufferFull(
            f"this application has {buffered_bytes} bytes of spans waiting to be assembled, at "
            f"most {settings.OTLP_MAX_PENDING_BYTES}; retry after {retry} seconds",
            retry,
        )


# -------------------------------------------------------------------------------- assembly
def traces_ready(now: datetime | None = None) -> Q:
    now = now or timezone.now()
    settled = now - timedelta(seconds=settings.OTLP_SETTLE_SECONDS)
    quiet = now - timedelta(seconds=settings.OTLP_QUIET_SECONDS)
    return Q(state=OtelTrace.State.PENDING) & (
        Q(complete=True, last_received_at__lte=settled) | Q(last_received_at__lte=quiet)
    )


def otel_traces_assemble(*, now: datetime | None = None) -> int:
    """Assemble and ingest every ready trace; forget closed ones past their keep; return how
    many traces were assembled.

    Each chunk is claimed with ``FOR UPDATE SKIP LOCKED`` and assembled in one transaction: two
    workers never assemble the same trace, and a failure leaves it pending for the next run.
    """
    now = now or timezone.now()
    assembled = 0
    while True:
        with transaction.atomic():
            claimed = _claim_chunk(now)
            if not claimed:
                break
            _assemble(claimed, now=now)
        assembled += len(claimed)
    OtelTrace.objects.filter(
        state=OtelTrace.State.ASSEMBLED, assembled_at__lt=now - settings.OTLP_KEEP_ASSEMBLED
    ).delete()
    return assembled


def _claim_chunk(now: datetime) -> list[OtelTrace]:
    """Ready traces holding at most ``OTLP_ASSEMBLE_BYTES`` of spans together (at least one),
    locked; another worker's claims are skipped.

    Sizes are read first, unlocked, so that only the chunk is locked: a trace another worker
    took meanwhile is skipped by the locking read, which checks readiness again.
    """
    budget = settings.OTLP_ASSEMBLE_BYTES
    candidates = (
        OtelTrace.objects.filter(traces_ready(now))
        .order_by("last_received_at", "pk")
        .values_list("pk", "span_bytes")[:ASSEMBLE_CHUNK]
    )
    chosen: list[int] = []
    total = 0
    for pk, size in candidates:
        if chosen and total + size > budget:
            break
        chosen.append(pk)
        total += size
    if not chosen:
        return []
    return list(
        OtelTrace.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(traces_ready(now), pk__in=chosen)
        .select_related("application")
        .order_by("last_received_at", "pk")
    )


def _assemble(claimed: list[OtelTrace], *, now: datetime) -> None:
    aliases = alias_map()
    records: dict[int, list[SpanRecord]] = defaultdict(list)
    for trace_pk, record in OtelSpan.objects.filter(trace__in=claimed).values_list(
        "trace_id", "record"
    ):
        records[trace_pk].append(record)
    by_application: dict[int, list[OtelTrace]] = defaultdict(list)
    for trace in claimed:
        by_application[trace.application_id].append(trace)
    for traces in by_application.values():
        application = traces[0].application
        items: list[tuple[int, dict[str, Any]]] = []
        owners: list[OtelTrace] = []
        uncaptured: set[int] = set()
        for trace in traces:
            assembly = trace_assemble(
                trace_id=trace.trace_id, spans=records.pop(trace.pk, []), aliases=aliases
            )
            trace.steps = len(assembly.traces)
            trace.problems = []
            for step in assembly.traces:
                if step["step"] in assembly.uncaptured:
                    uncaptured.add(len(items))
                items.append((len(items), step))
                owners.append(trace)
        result = traces_ingest(
            items=items, application=application, share_states=True, uncaptured=uncaptured
        )
        for problem in result.rejected:
            index = problem["index"]
            trace = owners[index]
            if len(trace.problems) < MAX_PROBLEMS:
                trace.problems.append(
                    {"step": items[index][1]["step"], "field": problem["field"],
                     "reason": problem["reason"]}
                )  # fmt: skip
    OtelSpan.objects.filter(trace__in=claimed).delete()
    OtelTrace.objects.filter(pk__in=[trace.pk for trace in claimed]).update(
        state=OtelTrace.State.ASSEMBLED, assembled_at=now
    )
    # One statement per distinct number of steps (a handful), not one per trace.
    by_steps: dict[int, list[int]] = defaultdict(list)
    for trace in claimed:
        by_steps[trace.steps].append(trace.pk)
    for steps, pks in by_steps.items():
        OtelTrace.objects.filter(pk__in=pks).update(steps=steps)
    troubled = [trace for trace in claimed if trace.problems]
    if troubled:
        OtelTrace.objects.bulk_update(troubled, ["problems"])
