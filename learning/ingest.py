"""Ingest: store traces first; the fold (``learning.fold``) adds them to statistics after.

Ingest parses and checks a batch, finds each trace's data flow where the user's words are,
stores it (COPY on PostgreSQL, a bulk insert on SQLite) not yet folded (``aggregated = false``)
and answers; nothing it does locks anything another request for another application waits on.
Once the batch commits, ``traces_stored`` is sent and the fold task is queued
(``learning.tasks``).
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from itertools import islice
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from registry.jsonlimits import more_nodes_than
from registry.models import Application
from registry.selectors import alias_map, tool_ids_visible, tool_names_visible, tools_by_name

from .candidates import candidate_example
from .dataflow import trace_reconstruct, vocabulary_names
from .models import Trace
from .otel import SAME, states_shared, states_whole
from .signals import traces_stored
from .traces import STEP_COLUMNS, trace_parse

logger = logging.getLogger(__name__)
TRACE_FIELDS = [*STEP_COLUMNS, "application_id"]


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {"index", "field", "reason"}


def traces_ingest(
    *,
    items: Iterable[tuple[int, object]],
    application: Application | None = None,
    batch_size: int | None = None,
    share_states: bool = False,
    uncaptured: Collection[int] = (),
) -> IngestResult:
    """Store valid traces in batches, skip duplicates of (trace_id, step), report the rest.

    ``items`` pairs each trace with where it came from (a list index, a line number), which
    problems report. Each batch commits on its own: a bad line late in a file never loses the
    good ones before it, and memory stays bounded by the batch size.

    Traces belong to ``application`` (None: an operator's import, trusted with every tool). A
    trace of a tool the application may not see is treated exactly like one of an unregistered
    name, so a runtime learns nothing of tools it cannot see: both are kept within the
    application's allowance of unregistered names and never count toward a registered tool's
    learning; past the allowance both are refused with the same reason.

    Each trace's data flow is found here, where the user's words are (they are read, never
    stored): from the batch's steps and the trace's steps stored before them
    (``learning.dataflow``), and kept with the trace until it is folded (``dataflow``). Traces
    are stored unfolded; the fold (``traces_fold``), queued when the batch commits, adds them
    to their tools' statistics, and output fields that fed a variable under another name to
    the application's candidate aliases. ``share_states`` stores each state once per trace
    (``learning.otel.states_shared``: for assembled OpenTelemetry traces, whose steps all
    repeat one initial state); the fold reads the whole states all the same. Traces whose
    index is in ``uncaptured`` (a call sent without its arguments or result) are stored
    ``captured = false``: counted in the tool's days (calls, errors, latency), folded into no
    aggregate, since their missing arguments and output say nothing.
    """
    batch_size = batch_size or settings.TRACE_BATCH_SIZE
    aliases = alias_map()
    vocabulary = vocabulary_names(aliases)
    result = IngestResult()
    iterator = iter(items)
    application_id = application.pk if application else None
    while True:
        with collector_paused():
            batch = list(islice(iterator, batch_size))
            if not batch:
                break
            parsed = _parsed(batch, aliases=aliases, result=result)
            rows = _rows(parsed, application=application, uncaptured=uncaptured, result=result)
            if not rows:
                continue
            _reconstruct(
                rows,
                application_id=application_id,
                aliases=aliases,
                vocabulary=vocabulary,
                learnt_from=partial(_learnt_from, application),
            )
            _store(rows, application=application, share_states=share_states, result=result)
    return result


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a batch is read (from a file: decoded),
    checked and stored.

    A batch builds a few containers a step (its dicts, lists, data flow), none in a cycle, all
    freed by reference counting once the batch is stored. While they live, every pass of the
    collector walks them, and its full passes every object the process holds, finding nothing:
    a third of ``import_traces``' time on 10,000 traces (docs/benchmarks.md). The collector
    runs again after the batch, which ``TRACE_BATCH_SIZE`` bounds; where it was off already,
    it stays off.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _parsed(
    batch: list[tuple[int, object]], *, aliases: dict[str, str], result: IngestResult
) -> list[tuple[int, dict[str, Any]]]:
    """The batch's valid traces with their index; each problem of the others reported."""
    parsed: list[tuple[int, dict[str, Any]]] = []
    for index, item in batch:
        trace, errors = trace_parse(item, aliases=aliases)
        if trace is None:
            result.rejected += [
                {"index": index, "field": name, "reason": reason} for name, reason in errors
            ]
        else:
            parsed.append((index, trace))
    return parsed


def _rows(
    parsed: list[tuple[int, dict[str, Any]]],
    *,
    application: Application | None,
    uncaptured: Collection[int],
    result: IngestResult,
) -> dict[tuple[str, int], dict[str, Any]]:
    """The rows to store by (trace_id, step), the first of a repeated key kept (the others
    counted as duplicates), each naming its tool only if the application may see it."""
    # Only the batch's names are looked up (one query, by name), so a batch costs the same
    # with a thousand tools in the registry or a hundred thousand.
    names = {trace["tool"] for _, trace in parsed}
    visible = _visible_ids(application, names)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for index, trace in parsed:
        key = (trace["trace_id"], trace["step"])
        if key in rows:
            result.duplicates += 1
            continue
        known = trace["tool"] in visible
        rows[key] = {
            **trace,
            "index": index,
            "tool_name": trace["tool"],
            "tool_id": visible[trace["tool"]] if known else None,
            # A registered tool the application may not see is kept like an unknown name,
            # never folded into that tool's learning (``learning.fold._foldable``).
            "unknown_tool": not known,
            "error": trace["error"] or "",
            "application_id": application.pk if application else None,
            "captured": index not in uncaptured,
            "aggregated": False,
        }
    return rows


def _learnt_from(application: Application | None, names: set[str]) -> set[str]:
    """The names whose calls are learnt from: those the application may see (an operator's
    import sees every tool), and those with no approved contract."""
    tools = tools_by_name(names)
    seen = _visible(application, names, tools)
    return {name for name in names if name in seen or tools.get(name, (0, None))[1] is None}


def _store(
    rows: dict[tuple[str, int], dict[str, Any]],
    *,
    application: Application | None,
    share_states: bool,
    result: IngestResult,
) -> None:
    """Store the rows in one transaction, those past the application's allowance of
    unregistered names refused; count what was stored and what was a duplicate."""
    with transaction.atomic():
        if application is not None:
            for key in _over_allowance(application, rows):
                row = rows.pop(key)
                result.rejected.append(
                    {
                        "index": row["index"],
                        "field": "tool",
                        "reason": unknown_tool_reason(row["tool_name"], application),
                    }
                )
        if not rows:
            return
        # Either way, exactly the rows this transaction stored are counted as accepted; a
        # (trace_id, step) this application stored before, or a concurrent writer did, is a
        # duplicate.
        written = list(rows.values())
        if share_states:
            written = [
                {**row, "state_before": before, "state_after": after}
                for row, (before, after) in zip(written, states_shared(written), strict=True)
            ]
        if connection.vendor == "postgresql":
            stored = _insert_returning(written)
        else:
            stored = _insert_new(written, application_id=application.pk if application else None)
        if stored:
            transaction.on_commit(partial(traces_stored.send, None, count=stored))
    result.accepted += stored
    result.duplicates += len(rows) - stored


def _visible_ids(application: Application | None, names: set[str]) -> dict[str, int]:
    """The tools among ``names`` the application may see, name -> id, in one query; an
    operator's import (None) is trusted with every registered tool."""
    if application is None:
        return {name: tool[0] for name, tool in tools_by_name(names).items()}
    return tool_ids_visible(application, among=names)


def _visible(application: Application | None, names: set[str], tools: Collection[str]) -> set[str]:
    """Which of ``names`` the application may see; an operator's import (None) is trusted with
    every registered tool (``tools``: the registered ones among ``names``)."""
    return set(tools) if application is None else tool_names_visible(application, among=names)


def _insert_new(rows: list[dict[str, Any]], *, application_id: int | None) -> int:
    """SQLite: store the rows whose (trace_id, step) the owner has not stored; return how many.

    A transaction there takes the write lock as it begins (``transaction_mode`` IMMEDIATE): no
    other writer comes between the read of the keys stored and the insert.
    """
    stored = set(
        Trace.objects.filter(
            _owner(application_id), trace_id__in={row["trace_id"] for row in rows}
        ).values_list("trace_id", "step")
    )
    new = [row for row in rows if (row["trace_id"], row["step"]) not in stored]
    Trace.objects.bulk_create([Trace(**_model_fields(row)) for row in new], batch_size=500)
    return len(new)


MAX_EARLIER_STEPS = 1000  # stored steps of a trace read back to reconstruct its later ones
MAX_LOGGED = 80  # characters of a runtime's trace id written to the log


def _reconstruct(
    rows: dict[tuple[str, int], dict[str, Any]],
    *,
    application_id: int | None,
    aliases: dict[str, str],
    vocabulary: frozenset[str],
    learnt_from: Callable[[set[str]], set[str]],
) -> None:
    """Find each row's data flow (``learning.dataflow``) from the steps before it: those of the
    batch and, for a trace whose first step here is not its first, the ones stored earlier
    (a runtime that posts a call at a time). Each row gets its ``dataflow``: what the fold
    reads of it, with, on the first row of a trace here, the effects of earlier, foldable
    steps that these steps reveal (``revealed``, by tool; only of the tools ``learnt_from``
    admits, asked once with the earlier steps' names), and on each row the candidate aliases
    its output showed (``candidates``, for an application's traces)."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in rows.values():
        by_trace.setdefault(row["trace_id"], []).append(row)
    later = {
        trace_id: first
        for trace_id, steps in by_trace.items()
        if (first := min(row["step"] for row in steps)) > 0
    }
    earlier: dict[str, list[dict[str, Any]]] = {}
    if later:
        stored = (
            Trace.objects.filter(_owner(application_id), trace_id__in=later)
            .order_by("trace_id", "step")
            .values(*STEP_COLUMNS, "captured")[: MAX_EARLIER_STEPS * len(later)]
        )
        for stored_step in stored:
            if stored_step["step"] < later[stored_step["trace_id"]]:
                earlier.setdefault(stored_step["trace_id"], []).append(
                    {**stored_step, "tool": stored_step["tool_name"]}
                )
        for steps in earlier.values():
            whole = states_whole([(s["step"], s["state_before"], s["state_after"]) for s in steps])
            for step in steps:
                step["state_before"], step["state_after"] = whole[step["step"]]
    foldable = (
        learnt_from({step["tool"] for steps in earlier.values() for step in steps})
        if earlier
        else set()
    )
    for trace_id, steps in by_trace.items():
        steps.sort(key=lambda row: row["step"])
        context = earlier.get(trace_id, [])
        reconstruction = trace_reconstruct(
            [*context, *steps], aliases=aliases, vocabulary=vocabulary
        )
        for row, flow in zip(steps, reconstruction.steps[len(context) :], strict=True):
            row["dataflow"] = dict(flow)
        if reconstruction.capped:
            logger.info(
                "trace %r: its data flow was read up to the caps (%s)",
                trace_id[:MAX_LOGGED],
                ", ".join(sorted(reconstruction.capped)),
            )
        if context:
            # An effect shows when a later call uses the value: the stored calls' effects that
            # these steps reveal, beyond what was found when they were stored, are folded with
            # these steps.
            found = trace_reconstruct(context, aliases=aliases, vocabulary=vocabulary).steps
            revealed: list[tuple[str, list[tuple[str, str]]]] = []
            for earlier_step, was, now in zip(
                context, found, reconstruction.steps[: len(context)], strict=True
            ):
                effects = [effect for effect in now["effects"] if effect not in was["effects"]]
                if (
                    effects
                    and earlier_step["status"] == "success"
                    and earlier_step["captured"]
                    and earlier_step["tool"] in foldable
                ):
                    revealed.append((earlier_step["tool"], effects))
            if revealed:
                steps[0]["dataflow"]["revealed"] = revealed
        if application_id is None:
            continue
        for number, tool, name, variable, example in reconstruction.candidates:
            if number >= len(context):
                row = steps[number - len(context)]
                row["dataflow"].setdefault("candidates", []).append(
                    (tool, name, candidate_example(example), variable)
                )


def _owner(application_id: int | None) -> Q:
    """The traces of one application, or the operator's imports (None)."""
    return (
        Q(application__isnull=True) if application_id is None else Q(application_id=application_id)
    )


def states_read_whole(rows: list[dict[str, Any]]) -> None:
    """Give each step of an assembled trace that stores its states once per trace
    (``learning.otel.states_shared``) its whole states, rebuilt from its trace's stored steps:
    the output check reads ``state_after``."""
    shared: dict[int | None, set[str]] = {}
    for row in rows:
        if SAME in row["state_before"] or SAME in row["state_after"]:
            shared.setdefault(row["application_id"], set()).add(row["trace_id"])
    for application_id, trace_ids in shared.items():
        steps: dict[str, list[tuple[int, dict[str, Any], dict[str, Any]]]] = {}
        for trace_id, *step in (
            Trace.objects.filter(_owner(application_id), trace_id__in=trace_ids)
            .order_by("trace_id", "step")
            .values_list("trace_id", "step", "state_before", "state_after")
        ):
            steps.setdefault(trace_id, []).append((step[0], step[1], step[2]))
        whole = {trace_id: states_whole(found) for trace_id, found in steps.items()}
        for row in rows:
            if row["application_id"] == application_id and row["trace_id"] in whole:
                states = whole[row["trace_id"]].get(row["step"])
                if states is not None:
                    row["state_before"], row["state_after"] = states


def unknown_tool_reason(name: str, application: Application) -> str:
    # The same words for an unregistered name and a tool the application may not see.
    return (
        f"{name!r} is not a tool this application may use, and it has reported the "
        f"{application.unknown_tool_names} unregistered tool names it may"
    )


def tool_names_refused(*, application: Application, names: set[str]) -> set[str]:
    """Which of these names ingest would refuse now: names the application may not see (an
    unregistered name or a tool hidden from it) past its allowance of unregistered names.

    An early answer for receivers that store before they ingest (OTLP); ingest decides again,
    under the application's lock, when the traces arrive.
    """
    unseen = names - tool_names_visible(application, among=names)
    if not unseen:
        return set()
    # ``order_by()``: the model's ordering (``-pk``) would join the DISTINCT selection and
    # return a row per trace instead of one per name (here and below).
    used = set(
        Trace.objects.filter(application=application, unknown_tool=True, tool_name__in=unseen)
        .order_by()
        .values_list("tool_name", flat=True)
        .distinct()
    )
    used_total = (
        Trace.objects.filter(application=application, unknown_tool=True)
        .order_by()
        .values("tool_name")
        .distinct()
        .count()
    )
    room = max(application.unknown_tool_names - used_total, 0)
    newcomers = sorted(unseen - used)
    return set(newcomers[room:])


def _over_allowance(
    application: Application, rows: dict[tuple[str, int], dict[str, Any]]
) -> list[tuple[str, int]]:
    """Keys of rows whose unregistered name would take the application past its allowance.

    The application row is locked while names are counted, so two concurrent batches cannot
    both take the last place.
    """
    names = {row["tool_name"] for row in rows.values() if row["unknown_tool"]}
    if not names:
        return []
    list(Application.objects.select_for_update().filter(pk=application.pk).values_list("pk"))
    used = set(
        Trace.objects.filter(application=application, unknown_tool=True)
        .order_by()
        .values_list("tool_name", flat=True)
        .distinct()
    )
    room = max(application.unknown_tool_names - len(used), 0)
    admitted = used | set(sorted(names - used)[:room])
    return [
        key for key, row in rows.items() if row["unknown_tool"] and row["tool_name"] not in admitted
    ]


def _model_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {column: row[column] for column in TRACE_COLUMNS if column in row}


TRACE_COLUMNS = [
    *STEP_COLUMNS, "tool_id", "unknown_tool", "received_at", "application_id", "aggregated",
    "captured", "dataflow",
]  # fmt: skip


# A row of at most this many JSON nodes is encoded in one piece by the C encoder, which holds a
# string per node until it joins them: 60 bytes or so for each "1, " of a long list.
SMALL_JSON_NODES = 256
COPY_CHUNK = 1 << 16  # characters sent to COPY at a time, at most
COPY_PIECES = 1024  # or pieces
_STREAMING_ENCODER = json.JSONEncoder(check_circular=False)
# The columns a row sends as one JSON array, in this order; ``received_at`` is the batch's.
ARRIVING_COLUMNS = [column for column in TRACE_COLUMNS if column != "received_at"]


def _arriving(row: dict[str, Any]) -> list[Any]:
    """The row's columns as JSON values: a time as ISO 8601, every other value as it is."""
    values = [row.get(column) for column in ARRIVING_COLUMNS]
    occurred_at = values[_OCCURRED_AT]
    if isinstance(occurred_at, datetime):
        values[_OCCURRED_AT] = occurred_at.isoformat()
    return values


_OCCURRED_AT = ARRIVING_COLUMNS.index("occurred_at")


def _copy_pieces(row: dict[str, Any]) -> Iterator[str]:
    """One row in COPY's text format: its columns as one JSON array on a line, in pieces when
    it is large.

    One encoding of the whole row by the C encoder costs about what one column's did, and
    PostgreSQL splits it into columns (``_from_arriving``). A large row is encoded as a stream,
    so storing a trace holds a bounded amount of memory besides the trace itself: a
    50,000-character key over a 25,000-item list took 15 times its size to encode in one piece.
    JSON has no tab or line break left; its backslashes are doubled for COPY.
    """
    values = _arriving(row)
    if not more_nodes_than(values, SMALL_JSON_NODES):
        yield json.dumps(values).replace("\\", "\\\\") + "\n"
        return
    for chunk in _STREAMING_ENCODER.iterencode(values):
        yield chunk.replace("\\", "\\\\")
    yield "\n"


def _from_arriving() -> str:
    """The trace table's columns, in ``TRACE_COLUMNS``' order, read from a row's JSON array
    (``row``) and the batch's time of arrival (the query's parameter): a JSON value as it is
    (JSON null as NULL), text as it is, anything else cast to its column's type."""
    types = {field.column: field.db_type(connection) for field in Trace._meta.concrete_fields}
    selected = []
    for column in TRACE_COLUMNS:
        if column == "received_at":
            selected.append("%s::timestamptz")
            continue
        index = ARRIVING_COLUMNS.index(column)
        kind = str(types[column])
        if kind == "jsonb":
            selected.append(f"NULLIF(row -> {index}, 'null')")
        elif kind == "text" or kind.startswith("varchar"):
            selected.append(f"row ->> {index}")
        else:
            selected.append(f"(row ->> {index})::{kind}")
    return ", ".join(selected)


def _insert_returning(rows: list[dict[str, Any]]) -> int:
    """PostgreSQL: COPY the batch into a temporary table, a JSON array a row, then INSERT ...
    SELECT its columns ON CONFLICT DO NOTHING: the rows this transaction stored are counted;
    return how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS learning_trace_arriving (row jsonb NOT NULL)"
        )
        with cursor.cursor.copy("COPY learning_trace_arriving (row) FROM STDIN") as copy:
            for chunk in _copy_chunks(rows):
                copy.write(chunk)
        cursor.execute(
            f"INSERT INTO learning_trace ({', '.join(TRACE_COLUMNS)}) "
            f"SELECT {_from_arriving()} FROM learning_trace_arriving ON CONFLICT DO NOTHING",
            [timezone.now()],
        )
        stored = cursor.rowcount
        cursor.execute("DELETE FROM learning_trace_arriving")
    return int(stored)


def _copy_chunks(rows: list[dict[str, Any]]) -> Iterator[str]:
    """The rows in COPY's text format, in chunks of at most ``COPY_CHUNK`` characters or
    ``COPY_PIECES`` pieces (a streamed value yields pieces of a few characters, each a 50-byte
    string while it waits)."""
    pending: list[str] = []
    size = 0
    for row in rows:
        for piece in _copy_pieces(row):
            pending.append(piece)
            size += len(piece)
            if size >= COPY_CHUNK or len(pending) >= COPY_PIECES:
                yield "".join(pending)
                pending, size = [], 0
    yield "".join(pending)
