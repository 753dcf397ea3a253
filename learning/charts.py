"""Tool-health charts as SVG drawn on the server (pure: no Django, no JavaScript).

Served inline in the tool's admin page, so they need nothing from a CDN and no script: calls per
day as bars, error rate and p50/p95 latency as lines, with markers where a version was published
or drift was found. Every point carries its day and value (``data-day``, ``data-value``) and a
``<title>`` tooltip, so a person can hover and a test can read them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from html import escape
from typing import Any

from .aggregates import aggregate_percentile

WIDTH, HEIGHT = 640, 210
LEFT, RIGHT, TOP, BOTTOM = 56, 40, 30, 30


@dataclass(frozen=True)
class DayPoint:
    day: date
    calls: int
    errors: int
    error_rate: float | None
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class Marker:
    at: datetime
    label: str
    kind: str  # "version" or "drift"
    title: str = ""


@dataclass
class Series:
    name: str  # css suffix: "errors", "p50", "p95"
    label: str
    values: list[float | None] = field(default_factory=list)


def day_points(rows: Iterable[Mapping[str, Any]]) -> list[DayPoint]:
    """Rows of ``ToolDayStats`` values (day, calls, errors, durations) as points, by day."""
    points = []
    for row in sorted(rows, key=lambda row: row["day"]):
        calls, errors = int(row["calls"]), int(row["errors"])
        histogram = {"durations": row.get("durations") or {}}
        points.append(
            DayPoint(
                day=row["day"],
                calls=calls,
                errors=errors,
                error_rate=errors / calls if calls else None,
                p50=aggregate_percentile(histogram, 50),
                p95=aggregate_percentile(histogram, 95),
            )
        )
    return points


def chart_window(
    points: Sequence[DayPoint], markers: Sequence[Marker], *, today: date, days: int
) -> tuple[date, date]:
    """From the first day with anything to show (at most ``days`` back) through today."""
    earliest = today - timedelta(days=days - 1)
    seen = [point.day for point in points] + [marker.at.date() for marker in markers]
    start = max(earliest, min(seen)) if seen else earliest
    return start, today


def calls_chart(
    points: Sequence[DayPoint], markers: Sequence[Marker], *, start: date, end: date
) -> str:
    by_day = {point.day: point for point in points if start <= point.day <= end}
    top = _nice_max(max((point.calls for point in by_day.values()), default=0))
    frame = _Frame(start, end, top)
    parts = [frame.axes(lambda value: f"{value:,.0f}")]
    width = max(frame.day_width * 0.7, 1.5)
    for day, point in sorted(by_day.items()):
        x = frame.x(day) - width / 2
        y = frame.y(point.calls)
        parts.append(
            f'<rect class="bar point-calls" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
            f'height="{frame.bottom - y:.1f}" data-day="{day.isoformat()}" '
            f'data-value="{point.calls}"><title>{day.isoformat()}: {point.calls:,} calls, '
            f"{point.errors:,} errors</title></rect>"
        )
    parts += frame.markers(markers)
    return _svg("Calls per day", "chart-calls", parts)


def rate_chart(
    points: Sequence[DayPoint], markers: Sequence[Marker], *, start: date, end: date
) -> str:
    shown = [point for point in points if start <= point.day <= end]
    values = [point.error_rate for point in shown]
    top = _nice_max(max((value for value in values if value is not None), default=0) * 100) / 100
    frame = _Frame(start, end, top or 0.01)
    parts = [frame.axes(lambda value: f"{value * 100:.0f} %" if top >= 0.03 else f"{value:.1%}")]
    parts += frame.line(
        Series("errors", "error rate", values),
        [point.day for point in shown],
        lambda value: f"{value * 100:.1f} %",
        counts=[f"{point.errors:,} of {point.calls:,} calls" for point in shown],
    )
    parts += frame.markers(markers)
    return _svg("Error rate per day", "chart-errors", parts)


def latency_chart(
    points: Sequence[DayPoint], markers: Sequence[Marker], *, start: date, end: date
) -> str:
    shown = [point for point in points if start <= point.day <= end]
    p50 = [point.p50 for point in shown]
    p95 = [point.p95 for point in shown]
    top = _nice_max(max((value for value in p95 + p50 if value is not None), default=0))
    frame = _Frame(start, end, top)
    parts = [frame.axes(lambda value: f"{value:,.0f} ms")]
    days = [point.day for point in shown]
    for series in (Series("p95", "p95", p95), Series("p50", "p50", p50)):
        parts += frame.line(series, days, lambda value: f"{value:,.0f} ms")
    parts += frame.markers(markers)
    return _svg("Latency per day (p50, p95)", "chart-latency", parts)


class _Frame:
    """Scales and axes of one chart: days along x (one slot per day), values up y from 0."""

    def __init__(self, start: date, end: date, top: float) -> None:
        self.start, self.end = start, end
        self.slots = (end - start).days + 1
        self.top = top or 1
        self.left, self.right = LEFT, WIDTH - RIGHT
        self.upper, self.bottom = TOP, HEIGHT - BOTTOM
        self.day_width = (self.right - self.left) / self.slots

    def x(self, day: date, fraction: float = 0.5) -> float:
        return self.left + ((day - self.start).days + fraction) * self.day_width

    def y(self, value: float) -> float:
        return self.bottom - (value / self.top) * (self.bottom - self.upper)

    def axes(self, label: Any) -> str:
        parts = []
        steps = _steps(self.top)
        for step in range(steps + 1):
            value = self.top * step / steps
            y = self.y(value)
            parts.append(
                f'<line class="axis" x1="{self.left}" x2="{self.right}" y1="{y:.1f}" '
                f'y2="{y:.1f}"/><text x="{self.left - 6}" y="{y + 4:.1f}" '
                f'text-anchor="end">{escape(label(value))}</text>'
            )
        ticks = sorted({0, self.slots // 2, self.slots - 1})
        for index in ticks:
            day = self.start + timedelta(days=index)
            parts.append(
                f'<text x="{self.x(day):.1f}" y="{HEIGHT - 10}" text-anchor="middle">'
                f"{day.isoformat()}</text>"
            )
        return "".join(parts)

    def line(
        self,
        series: Series,
        days: list[date],
        label: Any,
        counts: list[str] | None = None,
    ) -> list[str]:
        """A polyline through consecutive days with a value (a missing day breaks it), and
        one circle per value."""
        parts: list[str] = []
        run: list[str] = []
        previous: date | None = None
        for index, (day, value) in enumerate(zip(days, series.values, strict=True)):
            if value is None:
                continue
            if previous is not None and (day - previous).days > 1 and run:
                parts.append(_polyline(series.name, run))
                run = []
            point = f"{self.x(day):.1f},{self.y(value):.1f}"
            run.append(point)
            previous = day
            extra = f" ({counts[index]})" if counts else ""
            parts.append(
                f'<circle class="point point-{series.name}" cx="{self.x(day):.1f}" '
                f'cy="{self.y(value):.1f}" r="3" data-day="{day.isoformat()}" '
                f'data-value="{value:.6g}"><title>{day.isoformat()}: {series.label} '
                f"{escape(label(value))}{escape(extra)}</title></circle>"
            )
        if run:
            parts.insert(0, _polyline(series.name, run))
        return parts

    def markers(self, markers: Sequence[Marker]) -> list[str]:
        parts = []
        for marker in markers:
            day = marker.at.date()
            if not self.start <= day <= self.end:
                continue
            seconds = marker.at.hour * 3600 + marker.at.minute * 60 + marker.at.second
            x = self.x(day, seconds / 86400)
            parts.append(
                f'<g class="marker marker-{escape(marker.kind)}" data-day="{day.isoformat()}">'
                f'<line class="marker-{escape(marker.kind)}" x1="{x:.1f}" x2="{x:.1f}" '
                f'y1="{self.upper - 8}" y2="{self.bottom}"/>'
                # Drift labels sit lower than version labels: both often fall on the same day.
                f'<text class="marker-label" x="{x + 3:.1f}" '
                f'y="{self.upper - 10 if marker.kind == "version" else self.upper + 4}">'
                f"{escape(marker.label)}</text><title>{escape(marker.title or marker.label)}"
                "</title></g>"
            )
        return parts


def _polyline(name: str, points: list[str]) -> str:
    return f'<polyline class="line-{name}" points="{" ".join(points)}"/>'


def _svg(title: str, css_id: str, parts: list[str]) -> str:
    return (
        f'<svg id="{css_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f'<title>{escape(title)}</title><text class="chart-title" x="{LEFT}" y="12">'
        f"{escape(title)}</text>{''.join(parts)}</svg>"
    )


def _steps(top: float) -> int:
    """Gridlines that fall on round values: 2 → 0.5 steps, 2.5 and 5 → 5 steps, 1 → 5."""
    leading = top / 10 ** math.floor(math.log10(top)) if top > 0 else 1
    return 4 if math.isclose(leading, 2) else 5


def _nice_max(value: float) -> float:
    """A round number at or above ``value`` for the top of an axis (1, 2, 2.5, 5 × 10^k)."""
    if value <= 0:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude
