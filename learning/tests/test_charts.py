"""Tool-health charts drawn as SVG on the server. Pure."""

import re
from datetime import UTC, date, datetime

from learning.charts import (
    Marker,
    calls_chart,
    chart_window,
    day_points,
    latency_chart,
    rate_chart,
)

ROWS = [
    {"day": date(2026, 3, 3), "calls": 40, "errors": 4, "durations": {"30": 30, "40": 10}},
    {"day": date(2026, 3, 1), "calls": 10, "errors": 0, "durations": {"30": 10}},
    {"day": date(2026, 3, 4), "calls": 5, "errors": 5, "durations": {}},
]
MARKERS = [
    Marker(at=datetime(2026, 3, 2, 12, tzinfo=UTC), label="v2", kind="version"),
    Marker(at=datetime(2026, 3, 3, 6, tzinfo=UTC), label="drift", kind="drift", title="<b>x"),
]


def days_of(svg: str, css: str) -> list[str]:
    return re.findall(rf'class="[^"]*{css}[^"]*"[^>]*data-day="([^"]+)"', svg)


def test_points_read_rates_and_percentiles_from_the_day_rows():
    points = day_points(ROWS)
    assert [point.day.day for point in points] == [1, 3, 4]
    assert points[1].error_rate == 0.1 and points[2].error_rate == 1.0
    assert points[1].p50 is not None and points[1].p95 > points[1].p50
    assert points[2].p50 is None  # no durations that day


def test_every_day_with_calls_gets_a_bar_and_a_point_and_missing_days_none():
    points = day_points(ROWS)
    start, end = chart_window(points, MARKERS, today=date(2026, 3, 5), days=90)
    assert (start, end) == (date(2026, 3, 1), date(2026, 3, 5))
    expected = ["2026-03-01", "2026-03-03", "2026-03-04"]
    assert days_of(calls_chart(points, MARKERS, start=start, end=end), "point-calls") == expected
    assert days_of(rate_chart(points, MARKERS, start=start, end=end), "point-errors") == expected
    latency = latency_chart(points, MARKERS, start=start, end=end)
    assert days_of(latency, "point-p50") == ["2026-03-01", "2026-03-03"]
    # The gap on the 2nd breaks the line: two polylines per series.
    assert latency.count('class="line-p50"') == 2


def test_markers_show_where_versions_and_drift_fall_and_text_is_escaped():
    points = day_points(ROWS)
    svg = calls_chart(points, MARKERS, start=date(2026, 3, 1), end=date(2026, 3, 5))
    assert days_of(svg, "marker-version") == ["2026-03-02"]
    assert days_of(svg, "marker-drift") == ["2026-03-03"]
    assert "<b>" not in svg and "&lt;b&gt;x" in svg


def test_the_window_is_bounded_and_an_empty_tool_draws_axes_only():
    start, end = chart_window([], [], today=date(2026, 3, 5), days=90)
    assert (end - start).days == 89
    svg = calls_chart([], [], start=start, end=end)
    assert svg.startswith("<svg") and "point-calls" not in svg
