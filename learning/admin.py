import json
from datetime import UTC, date, datetime, time, timedelta

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import F, FloatField, OuterRef, Subquery, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from registry.admin import ToolAdmin
from registry.json_display import json_text, stored_json_text
from registry.models import ContractVersion, Tool

from .charts import Marker, calls_chart, chart_window, day_points, latency_chart, rate_chart
from .evidence import contract_differences
from .models import (
    CandidateVariable,
    DriftReport,
    InferredContract,
    OtelTrace,
    SpanIntake,
    ToolDayStats,
    ToolStats,
    Trace,
)
from .otel_ingest import candidate_variable_adopt

HEALTH_DAYS = 90
RECENT_VERSIONS = 10
COMPARED_FIELDS = ("requires", "produces", "risk", "input_schema", "cost")
RUN_JSON = ("args", "state_before", "state_after", "output")


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


def pretty(value) -> str:
    return format_html("<pre>{}</pre>", json_text(value))


def pretty_stored(text: str | None) -> str:
    return format_html("<pre>{}</pre>", stored_json_text(text))


class ToolNameFilter(admin.SimpleListFilter):
    """Traces of one registered tool (by name: traces of unregistered names keep theirs too).
    Its choices come from the registry, never from a scan of the traces."""

    title = "tool"
    parameter_name = "tool_name"

    def lookups(self, request, model_admin):
        names = Tool.objects.order_by("name").values_list("name", flat=True)
        return [(name, name) for name in names]

    def queryset(self, request, queryset):
        return queryset.filter(tool_name=self.value()) if self.value() else queryset


class DayFilter(admin.SimpleListFilter):
    """A day's traces: the recent days that had any, with their counts, read from the per-day
    statistics (small) rather than from the traces (large), so the list stays fast."""

    title = "day"
    parameter_name = "day"
    DAYS = 14

    def lookups(self, request, model_admin):
        days = ToolDayStats.objects.filter(
            day__gte=timezone.now().date() - timedelta(days=self.DAYS - 1)
        )
        name = request.GET.get(ToolNameFilter.parameter_name)
        if name:
            days = days.filter(tool_name=name)
        totals: dict = {}
        for day, calls in days.values_list("day", "calls"):
            totals[day] = totals.get(day, 0) + calls
        return [
            (day.isoformat(), f"{day.isoformat()} ({calls:,})")
            for day, calls in sorted(totals.items(), reverse=True)
        ]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        try:
            day = date.fromisoformat(self.value())
        except ValueError:
            return queryset.none()
        start = datetime.combine(day, time.min, tzinfo=UTC)
        return queryset.filter(occurred_at__gte=start, occurred_at__lt=start + timedelta(days=1))


@admin.register(Trace)
class TraceAdmin(ReadOnlyAdmin):
    """Traces, newest first; filtered to one ``trace_id`` (a run), its steps in order."""

    list_display = [
        "run",
        "step",
        "tool_name",
        "status",
        "duration",
        "application",
        "occurred",
    ]
    list_filter = [ToolNameFilter, DayFilter, "status", "unknown_tool", "application"]
    list_select_related = ["application"]
    search_fields = ["=trace_id", "=tool_name"]
    raw_id_fields = ["tool", "application"]
    show_full_result_count = False
    list_per_page = 50
    fields = [
        "run",
        "step",
        "tool_name",
        "tool",
        "application",
        "status",
        "duration_ms",
        "occurred_at",
        "received_at",
        "args_pretty",
        "state_before_pretty",
        "state_after_pretty",
        "output_pretty",
        "error",
        "unknown_tool",
        "aggregated",
    ]
    readonly_fields = fields

    def get_queryset(self, request):
        # What a runtime sent is read as text: a value nested deeper than Python's JSON parser
        # goes must not take the run's page (or the list) down (registry.json_display).
        return (
            super()
            .get_queryset(request)
            .defer(*RUN_JSON)
            .annotate(**{f"{name}_text": Cast(name, TextField()) for name in RUN_JSON})
        )

    def get_ordering(self, request):
        # One run: its steps in the order they ran. Otherwise the newest first.
        return ["step", "pk"] if request.GET.get("trace_id") else ["-pk"]

    @admin.display(description="trace id", ordering="trace_id")
    def run(self, obj: Trace) -> str:
        query = f"?trace_id={obj.trace_id}" + (
            f"&application__id__exact={obj.application_id}"
            if obj.application_id
            else "&application__isnull=True"
        )
        url = reverse("admin:learning_trace_changelist")
        return format_html(
            '<a class="nowrap mono" href="{}{}" title="the whole run, step by step">{}</a>',
            url,
            query,
            obj.trace_id,
        )

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: Trace) -> str:
        return "—" if obj.duration_ms is None else f"{obj.duration_ms:,} ms"

    @admin.display(description="occurred", ordering="occurred_at")
    def occurred(self, obj: Trace) -> str:
        return format_html(
            '<span class="nowrap">{}</span>', obj.occurred_at.strftime("%Y-%m-%d %H:%M:%S")
        )

    @admin.display(description="args")
    def args_pretty(self, obj: Trace) -> str:
        return pretty_stored(obj.args_text)

    @admin.display(description="state before")
    def state_before_pretty(self, obj: Trace) -> str:
        return pretty_stored(obj.state_before_text)

    @admin.display(description="state after")
    def state_after_pretty(self, obj: Trace) -> str:
        return pretty_stored(obj.state_after_text)

    @admin.display(description="output")
    def output_pretty(self, obj: Trace) -> str:
        return pretty_stored(obj.output_text)


@admin.register(ToolStats)
class ToolStatsAdmin(ReadOnlyAdmin):
    list_display = [
        "tool_name",
        "traces_total",
        "error_rate",
        "last_seen",
        "traces_since_version",
        "dirty",
        "inferred_at",
    ]
    search_fields = ["tool_name"]
    list_filter = ["dirty"]
    exclude = ["aggregate", "aggregate_since_version"]
    readonly_fields = [
        "tool_name",
        "tool",
        "since_version",
        "traces_total",
        "error_rate",
        "last_seen",
        "traces_since_version",
        "inferred_at",
    ]

    def get_queryset(self, request):
        # Error rate and last seen come from the database (the aggregate's counts, the latest
        # day row), so the list sorts by them and never loads an aggregate.
        last_seen = ToolDayStats.objects.filter(tool_name=OuterRef("tool_name")).order_by("-day")
        return (
            super()
            .get_queryset(request)
            .defer("aggregate", "aggregate_since_version")
            .annotate(
                errors=Cast(KT("aggregate__errors"), FloatField()),
                calls=Cast(KT("aggregate__total"), FloatField()),
                last_seen_at=Subquery(last_seen.values("last_seen_at")[:1]),
            )
            .annotate(rate=F("errors") / NullIf(F("calls"), 0.0))
        )

    @admin.display(description="error rate", ordering="rate")
    def error_rate(self, obj: ToolStats) -> str:
        return "—" if obj.rate is None else f"{obj.rate * 100:.1f} %"

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj: ToolStats) -> str:
        return _last_seen(obj.last_seen_at)


class DiffersFilter(admin.SimpleListFilter):
    title = "compared with the approved contract"
    parameter_name = "differs"

    def lookups(self, request, model_admin):
        return [("yes", "differs from approved"), ("no", "matches approved")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(differs=self.value() == "yes")
        return queryset


@admin.register(InferredContract)
class InferredContractAdmin(ReadOnlyAdmin):
    list_display = [
        "tool_name",
        "support",
        "inferred_risk",
        "approved",
        "differences",
        "inferred_at",
    ]
    list_filter = [DiffersFilter]
    search_fields = ["tool_name"]
    list_select_related = ["tool__current_version__risk"]
    fields = ["tool_name", "support", "inferred_at", "differences", "side_by_side"]
    readonly_fields = fields

    @admin.display(description="risk (inferred)")
    def inferred_risk(self, obj: InferredContract) -> str:
        return obj.document.get("risk", "")

    @admin.display(description="approved")
    def approved(self, obj: InferredContract) -> str:
        version = obj.tool.current_version if obj.tool else None
        if version is None:
            return "—"
        url = reverse("admin:registry_contractversion_change", args=[version.pk])
        return format_html('<a href="{}">v{} ({})</a>', url, version.number, version.risk.name)

    @admin.display(description="differs in", ordering="differs")
    def differences(self, obj: InferredContract) -> str:
        if not obj.differs:
            return "—"
        return format_html(
            '<span class="badge badge-differs">{}</span>', ", ".join(obj.differing_fields)
        )

    @admin.display(description="inferred | approved")
    def side_by_side(self, obj: InferredContract) -> str:
        version = obj.tool.current_version if obj.tool else None
        approved = version.document() if version else None
        differing = contract_differences(approved, obj.document)
        rows = format_html_join_rows(
            (
                key,
                key in differing,
                _pretty(obj.document.get(key)),
                _pretty(approved.get(key)) if approved else "—",
            )
            for key in COMPARED_FIELDS
        )
        return format_html(
            '<table class="compare-table"><thead><tr><th>field</th><th>inferred</th>'
            "<th>approved</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )


def format_html_join_rows(rows) -> str:
    return mark_safe(  # noqa: S308 - every value below goes through format_html
        "".join(
            format_html(
                '<tr class="{}"><th>{}</th><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>',
                "differs" if differs else "",
                key,
                inferred,
                approved,
            )
            for key, differs, inferred, approved in rows
        )
    )


@admin.register(DriftReport)
class DriftReportAdmin(ReadOnlyAdmin):
    list_display = ["tool", "base", "drifted_fields", "ticket_link", "auto_published", "updated_at"]
    list_filter = ["auto_published", "base__risk"]
    search_fields = ["tool__name"]
    list_select_related = ["tool", "base", "ticket"]
    fields = [
        "tool",
        "base",
        "fingerprint",
        "ticket",
        "auto_published",
        "created_at",
        "updated_at",
        "items_pretty",
        "evidence_pretty",
    ]
    readonly_fields = fields

    @admin.display(description="drifted fields")
    def drifted_fields(self, obj: DriftReport) -> str:
        return ", ".join(sorted({item.get("field", "?") for item in obj.items}))

    @admin.display(description="ticket")
    def ticket_link(self, obj: DriftReport) -> str:
        if obj.ticket_id is None:
            return "—"
        url = reverse("admin:reviews_reviewticket_change", args=[obj.ticket_id])
        return format_html('<a href="{}">#{}</a>', url, obj.ticket_id)

    @admin.display(description="drift")
    def items_pretty(self, obj: DriftReport) -> str:
        return pretty(obj.items)

    @admin.display(description="evidence")
    def evidence_pretty(self, obj: DriftReport) -> str:
        return pretty(obj.evidence)


@admin.register(CandidateVariable)
class CandidateVariableAdmin(ReadOnlyAdmin):
    """Result fields the vocabulary does not know, per application and tool: a person decides
    whether one is a state variable."""

    list_display = ["name", "tool_name", "application", "count", "examples_shown", "last_seen"]
    list_filter = ["application"]
    search_fields = ["name", "tool_name"]
    list_select_related = ["application"]
    actions = ["add_to_vocabulary"]

    @admin.display(description="examples")
    def examples_shown(self, obj: CandidateVariable) -> str:
        return ", ".join(json.dumps(example, ensure_ascii=False) for example in obj.examples)

    def has_add_to_vocabulary_permission(self, request) -> bool:
        return request.user.has_perm("registry.add_statevariable")

    @admin.action(description="Add to the vocabulary", permissions=["add_to_vocabulary"])
    def add_to_vocabulary(self, request, queryset) -> None:
        added = []
        for candidate in queryset.order_by("name"):
            if candidate.name in added:
                continue  # the same field name under another tool: added once
            try:
                candidate_variable_adopt(candidate=candidate)
            except ValidationError as exc:
                self.message_user(
                    request, f"{candidate.name}: {'; '.join(exc.messages)}", messages.ERROR
                )
                continue
            added.append(candidate.name)
        if added:
            self.message_user(request, f"Added {len(added)} to the vocabulary: {', '.join(added)}.")


@admin.register(OtelTrace)
class OtelTraceAdmin(ReadOnlyAdmin):
    list_display = [
        "trace_id", "application", "state", "complete", "span_count", "steps",
        "last_received_at", "assembled_at",
    ]  # fmt: skip
    list_filter = ["state", "complete", "application"]
    search_fields = ["=trace_id"]
    list_select_related = ["application"]
    raw_id_fields = ["application"]
    show_full_result_count = False
    readonly_fields = [
        "application", "trace_id", "state", "complete", "span_count", "first_received_at",
        "last_received_at", "assembled_at", "steps", "problems",
    ]  # fmt: skip


@admin.register(SpanIntake)
class SpanIntakeAdmin(ReadOnlyAdmin):
    list_display = [
        "application", "received", "buffered", "ignored", "rejected", "last_received_at",
    ]  # fmt: skip
    list_select_related = ["application"]
    readonly_fields = list_display


admin.site.unregister(Tool)


@admin.register(Tool)
class ToolHealthAdmin(ToolAdmin):
    """The tool's page with its health over time: calls, error rate and latency per day, with
    markers where a version was published or drift was found, and the inferred contract beside
    the approved one. Drawn from the per-day statistics folded at ingest, so the charts outlive
    the traces and cost a handful of queries whatever their number."""

    change_form_template = "admin/learning/tool_health.html"
    list_display = [*ToolAdmin.list_display, "last_seen"]
    # The latest versions are listed by the health template (bounded); all are one link away.
    inlines = []

    def get_queryset(self, request):
        last_seen = ToolDayStats.objects.filter(tool_name=OuterRef("name")).order_by("-day")
        return (
            super()
            .get_queryset(request)
            .annotate(last_seen_at=Subquery(last_seen.values("last_seen_at")[:1]))
        )

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj: Tool) -> str:
        return _last_seen(obj.last_seen_at)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        tool = self.get_object(request, object_id)
        if tool is not None:
            extra_context = {**(extra_context or {}), **tool_health(tool)}
        return super().change_view(request, object_id, form_url, extra_context)


def tool_health(tool: Tool) -> dict:
    """Charts, the inferred-against-approved comparison and the latest versions of one tool,
    in six queries whatever the number of days, reports or versions."""
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
        for key in COMPARED_FIELDS:
            comparison.append(
                {
                    "field": key,
                    "approved": _pretty(approved_document.get(key)) if approved_document else "—",
                    "inferred": _pretty(inferred.document.get(key)),
                    "differs": key in differing,
                }
            )
    shown = [point for point in points if start <= point.day <= end]
    seen = [row["last_seen_at"] for row in rows if row["last_seen_at"]]
    return {
        "health": {
            "start": start,
            "end": end,
            "days": len(shown),
            "calls": sum(point.calls for point in shown),
            "errors": sum(point.errors for point in shown),
            "last_seen": max(seen, default=None),
            # The SVG is built by learning.charts, which escapes every text it writes.
            "charts": [
                mark_safe(calls_chart(points, markers, start=start, end=end)),  # noqa: S308
                mark_safe(rate_chart(points, markers, start=start, end=end)),  # noqa: S308
                mark_safe(latency_chart(points, markers, start=start, end=end)),  # noqa: S308
            ],
            "versions": len(versions),
            "drift_reports": sum(marker.kind == "drift" for marker in markers),
        },
        "inferred": inferred,
        "comparison": comparison,
        "differing": differing,
        "approved_version": current,
        "recent_versions": recent_versions,
        "versions_url": reverse("admin:registry_contractversion_changelist")
        + f"?tool__id__exact={tool.pk}",
    }


def _pretty(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value) or "—"
    if isinstance(value, str):
        return value
    return json_text(value, sort_keys=True)


def _last_seen(moment) -> str:
    if moment is None:
        return "—"
    return format_html(
        '<span class="nowrap" title="{}">{} ago</span>',
        moment.isoformat(timespec="seconds"),
        _ago(timezone.now() - moment),
    )


def _ago(delta: timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "moments"
