import json
from datetime import UTC, date, datetime, time, timedelta
from typing import ClassVar, TypeVar

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import F, FloatField, Model, OuterRef, QuerySet, Subquery, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince

from registry.admin import ToolAdmin
from registry.json_display import json_text, stored_json_text
from registry.models import Tool

from .candidates import candidate_variable_adopt
from .charts import calls_chart, latency_chart, rate_chart
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
from .selectors import (
    COMPARED_FIELDS,
    SHARED,
    field_text,
    tool_health,
    trace_states_whole,
)
from .traces import JSON_FIELDS

_M = TypeVar("_M", bound=Model)


class ReadOnlyAdmin(admin.ModelAdmin[_M]):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


def pretty(value) -> str:
    return format_html("<pre>{}</pre>", json_text(value))


def stored_text(obj: Model, field: str) -> str | None:
    """A JSON field as the database returned its text (the list and page annotate each of
    ``JSON_FIELDS`` as ``<field>_text``): read without Python's recursive parser."""
    return getattr(obj, f"{field}_text")


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
        totals: dict[date, int] = {}
        for day, calls in days.values_list("day", "calls"):
            totals[day] = totals.get(day, 0) + calls
        return [
            (day.isoformat(), f"{day.isoformat()} ({calls:,})")
            for day, calls in sorted(totals.items(), reverse=True)
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return queryset.none()
        start = datetime.combine(day, time.min, tzinfo=UTC)
        queryset = queryset.filter(occurred_at__gte=start)
        if day == date.max:  # the next day is past what a date holds: the day has no end
            return queryset
        return queryset.filter(occurred_at__lt=start + timedelta(days=1))


class CappedCountPaginator(Paginator[Model]):
    """Pages over a table too big to count: counts at most ``CAP`` rows of what the filters
    chose, so a page never costs a whole-table (or whole-filter) count, and the pages it offers
    stop where OFFSET would start to cost as much. Filters narrow what lies beyond."""

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        objects = self.object_list
        if not isinstance(objects, QuerySet):
            return min(len(objects), self.CAP)
        # Only ids, in the list's order and limited: one index read of at most CAP entries.
        return objects.values("pk")[: self.CAP].count()


@admin.register(Trace)
class TraceAdmin(ReadOnlyAdmin[Trace]):
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
    # Exact, as stored: "=field" would be iexact, an UPPER(...) no index serves.
    search_fields = ["trace_id__exact", "tool_name__exact"]
    raw_id_fields = ["tool", "application"]
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 50
    fields: ClassVar[tuple[str, ...]] = (
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
        "captured",
        "aggregated",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        # What a runtime sent is read as text: a value nested deeper than Python's JSON parser
        # goes must not take the run's page (or the list) down (registry.json_display).
        return (
            super()
            .get_queryset(request)
            .defer(*JSON_FIELDS, "dataflow")  # the fold's, until it has run: never shown
            .annotate(**{f"{name}_text": Cast(name, TextField()) for name in JSON_FIELDS})
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
        return pretty_stored(stored_text(obj, "args"))

    @admin.display(description="state before")
    def state_before_pretty(self, obj: Trace) -> str:
        return self._state(obj, stored_text(obj, "state_before"), 0)

    @admin.display(description="state after")
    def state_after_pretty(self, obj: Trace) -> str:
        return self._state(obj, stored_text(obj, "state_after"), 1)

    @staticmethod
    def _state(obj: Trace, text: str | None, which: int) -> str:
        """A step's whole state. An assembled OpenTelemetry trace stores a large state once and
        points to it from later steps (``$same_as``): those are rebuilt from the earlier steps
        (assembly bounds their depth); any other state is shown as stored, depth-bounded."""
        if text is not None and SHARED in text:
            return pretty(trace_states_whole(trace=obj)[which])
        return pretty_stored(text)

    @admin.display(description="output")
    def output_pretty(self, obj: Trace) -> str:
        return pretty_stored(stored_text(obj, "output"))


@admin.register(ToolStats)
class ToolStatsAdmin(ReadOnlyAdmin[ToolStats]):
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
        rate = getattr(obj, "rate", None)  # annotated by get_queryset
        return "—" if rate is None else f"{rate * 100:.1f} %"

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj: ToolStats) -> str:
        return _last_seen(getattr(obj, "last_seen_at", None))  # annotated by get_queryset


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
class InferredContractAdmin(ReadOnlyAdmin[InferredContract]):
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
    fields: ClassVar[tuple[str, ...]] = (
        "tool_name",
        "support",
        "inferred_at",
        "differences",
        "side_by_side",
    )
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
                field_text(obj.document.get(key)),
                field_text(approved.get(key)) if approved else "—",
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
class DriftReportAdmin(ReadOnlyAdmin[DriftReport]):
    list_display = ["tool", "base", "drifted_fields", "ticket_link", "auto_published", "updated_at"]
    list_filter = ["auto_published", "base__risk"]
    search_fields = ["tool__name"]
    list_select_related = ["tool", "base", "ticket"]
    fields: ClassVar[tuple[str, ...]] = (
        "tool",
        "base",
        "fingerprint",
        "ticket",
        "auto_published",
        "created_at",
        "updated_at",
        "items_pretty",
        "evidence_pretty",
    )
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
class CandidateVariableAdmin(ReadOnlyAdmin[CandidateVariable]):
    """Result fields the vocabulary does not know, and fields whose values fed a variable under
    another name (``alias_of``), per application and tool: a person decides whether one is a
    state variable, or an alias of the variable it fed."""

    list_display = [
        "name", "alias_of", "tool_name", "application", "count", "examples_shown", "last_seen",
    ]  # fmt: skip
    list_filter = ["application"]
    search_fields = ["name", "alias_of", "tool_name"]
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
class OtelTraceAdmin(ReadOnlyAdmin[OtelTrace]):
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
class SpanIntakeAdmin(ReadOnlyAdmin[SpanIntake]):
    list_display: tuple[str, ...] = (
        "application", "received", "buffered", "uncaptured", "ignored", "rejected",
        "last_received_at",
    )  # fmt: skip
    list_select_related = ["application"]
    readonly_fields = [*list_display, "ignored_why"]

    @admin.display(description="why spans were ignored")
    def ignored_why(self, obj: SpanIntake) -> str:
        """Each kind of span that is not a tool call, as its convention named it, with a count:
        what to change in the runtime when its tool calls are among them."""
        reasons: dict[str, int] = dict(obj.ignored_reasons)
        ordered = sorted(reasons.items(), key=lambda item: -item[1])
        return format_html_join("", "<div>{}: {}</div>", ordered) or "—"


admin.site.unregister(Tool)


class ToolChangeList(ChangeList):
    def url_for_result(self, result: Model) -> str:
        # A tool's row opens its health: a page to read. Editing is a link from there.
        return reverse("admin:registry_tool_health", args=[result.pk])


@admin.register(Tool)
class ToolHealthAdmin(ToolAdmin):
    """Tools open on their health page (``<id>/health/``): calls, error rate and latency per
    day with markers where a version was published or drift was found, and the inferred
    contract beside the approved one. The change form (``<id>/change/``) is the separate,
    deliberate step of editing the owner."""

    list_display = [*ToolAdmin.list_display, "last_seen"]

    def get_changelist(self, request, **kwargs):
        return ToolChangeList

    def get_queryset(self, request):
        last_seen = ToolDayStats.objects.filter(tool_name=OuterRef("name")).order_by("-day")
        return (
            super()
            .get_queryset(request)
            .annotate(last_seen_at=Subquery(last_seen.values("last_seen_at")[:1]))
        )

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj: Tool) -> str:
        return _last_seen(getattr(obj, "last_seen_at", None))  # annotated by get_queryset

    def get_urls(self):
        return [
            path(
                "<int:pk>/health/",
                self.admin_site.admin_view(self.health_view),
                name="registry_tool_health",
            ),
            *super().get_urls(),
        ]

    def health_view(self, request, pk: int) -> TemplateResponse:
        tool = get_object_or_404(Tool, pk=pk)
        if not self.has_view_permission(request, tool):
            raise PermissionDenied
        health = tool_health(tool=tool)
        window = {"start": health.start, "end": health.end}
        # The SVG is built by learning.charts, which escapes every text it writes.
        charts = [
            mark_safe(chart(health.points, health.markers, **window))  # noqa: S308
            for chart in (calls_chart, rate_chart, latency_chart)
        ]
        return TemplateResponse(
            request,
            "admin/learning/tool_health.html",
            {
                **self.admin_site.each_context(request),
                "title": f"Health of {tool.name}",
                "opts": self.model._meta,
                "original": tool,
                "health": health,
                "charts": charts,
                "refresh_debounce": settings.LEARNING_REFRESH_DEBOUNCE_SECONDS,
                "can_edit": self.has_change_permission(request, tool),
                "edit_url": reverse("admin:registry_tool_change", args=[tool.pk]),
                "versions_url": reverse("admin:registry_contractversion_changelist")
                + f"?tool__id__exact={tool.pk}",
            },
        )


def _last_seen(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return format_html(
        '<span class="nowrap" title="{}">{} ago</span>',
        moment.isoformat(timespec="seconds"),
        timesince(moment),
    )
