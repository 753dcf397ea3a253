"""Per-tool, per-day statistics folded at ingest: calls, errors, a duration histogram and the
last call seen. Called from ``learning.fold._fold`` in the same transaction, after the tools'
stats rows are locked, so the day rows of one tool are only ever written by the holder of that
tool's lock: no lost update, no deadlock (they are also locked in name and day order).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection

from .aggregates import BUCKET_BASE
from .models import ToolDayStats

WRITE_CHUNK = 500


def day_of(moment: datetime | str) -> date:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment.astimezone(UTC).date() if moment.tzinfo else moment.date()


def days_delta(traces: list[dict[str, Any]]) -> dict[date, dict[str, Any]]:
    """Fold one tool's traces into one delta per day."""
    days: dict[date, dict[str, Any]] = {}
    for trace in traces:
        moment = trace.get("occurred_at")
        if moment is None:
            continue
        day = days.setdefault(
            day_of(moment), {"calls": 0, "errors": 0, "durations": {}, "last_seen_at": None}
        )
        day["calls"] += 1
        if trace.get("status") != "success":
            day["errors"] += 1
        duration = trace.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
            # The same buckets as the tool's aggregate, so percentiles read the same way.
            bucket = str(int(math.log(max(duration, 1), BUCKET_BASE)))
            day["durations"][bucket] = day["durations"].get(bucket, 0) + 1
        when = moment if isinstance(moment, datetime) else datetime.fromisoformat(moment)
        if day["last_seen_at"] is None or when > day["last_seen_at"]:
            day["last_seen_at"] = when
    return days


def days_fold(by_tool: dict[str, list[dict[str, Any]]], tool_ids: dict[str, int | None]) -> None:
    """Add these traces to their tools' day rows (created when missing), in a few queries."""
    deltas = {
        (name, day): delta
        for name, traces in by_tool.items()
        for day, delta in days_delta(traces).items()
    }
    if not deltas:
        return
    ToolDayStats.objects.bulk_create(
        [ToolDayStats(tool_name=name, day=day) for name, day in sorted(deltas)],
        ignore_conflicts=True,
    )
    names = sorted({name for name, _ in deltas})
    days = sorted({day for _, day in deltas})
    rows = [
        row
        for row in ToolDayStats.objects.select_for_update()
        .filter(tool_name__in=names, day__gte=days[0], day__lte=days[-1])
        .order_by("tool_name", "day")
        if (row.tool_name, row.day) in deltas
    ]
    for row in rows:
        delta = deltas[(row.tool_name, row.day)]
        row.tool_id = tool_ids.get(row.tool_name)
        row.calls += delta["calls"]
        row.errors += delta["errors"]
        durations = dict(row.durations or {})
        for bucket, count in delta["durations"].items():
            durations[bucket] = durations.get(bucket, 0) + count
        row.durations = durations
        if row.last_seen_at is None or delta["last_seen_at"] > row.last_seen_at:
            row.last_seen_at = delta["last_seen_at"]
    _write(rows)


def _write(rows: list[ToolDayStats]) -> None:
    fields = ["tool", "calls", "errors", "durations", "last_seen_at"]
    if connection.vendor != "postgresql":
        ToolDayStats.objects.bulk_update(rows, fields, batch_size=WRITE_CHUNK)
        return
    # One UPDATE ... FROM (VALUES ...) per chunk: bulk_update would build a CASE per field.
    with connection.cursor() as cursor:
        for start in range(0, len(rows), WRITE_CHUNK):
            chunk = rows[start : start + WRITE_CHUNK]
            params: list[Any] = []
            for row in chunk:
                params += [
                    row.pk, row.tool_id, row.calls, row.errors, json.dumps(row.durations),
                    row.last_seen_at,
                ]  # fmt: skip
            values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk))
            cursor.execute(
                "UPDATE learning_tooldaystats AS d SET tool_id = v.tool_id::bigint, "
                "calls = v.calls::bigint, errors = v.errors::bigint, "
                "durations = v.durations::jsonb, last_seen_at = v.last_seen_at::timestamptz "
                f"FROM (VALUES {values}) AS v(id, tool_id, calls, errors, durations, "
                "last_seen_at) WHERE d.id = v.id::bigint",
                params,
            )
