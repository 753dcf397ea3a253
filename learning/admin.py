import json

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html

from .models import (
    CandidateVariable,
    DriftReport,
    InferredContract,
    OtelTrace,
    SpanIntake,
    ToolStats,
    Trace,
)
from .otel_ingest import candidate_variable_adopt


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


def pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


@admin.register(Trace)
class TraceAdmin(ReadOnlyAdmin):
    list_display = [
        "trace_id",
        "step",
        "tool_name",
        "status",
        "unknown_tool",
        "duration_ms",
        "occurred_at",
    ]
    list_filter = ["status", "unknown_tool", "aggregated"]
    search_fields = ["=trace_id", "=tool_name"]
    raw_id_fields = ["tool", "application"]
    show_full_result_count = False
    list_per_page = 50


@admin.register(ToolStats)
class ToolStatsAdmin(ReadOnlyAdmin):
    list_display = ["tool_name", "traces_total", "traces_since_version", "dirty", "inferred_at"]
    search_fields = ["tool_name"]
    list_filter = ["dirty"]
    exclude = ["aggregate", "aggregate_since_version"]
    readonly_fields = [
        "tool_name",
        "tool",
        "since_version",
        "traces_total",
        "traces_since_version",
        "inferred_at",
    ]


@admin.register(InferredContract)
class InferredContractAdmin(ReadOnlyAdmin):
    list_display = ["tool_name", "support", "inferred_risk", "approved", "inferred_at"]
    search_fields = ["tool_name"]
    list_select_related = ["tool__current_version__risk"]
    fields = ["tool_name", "support", "inferred_at", "side_by_side"]
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

    @admin.display(description="inferred | approved")
    def side_by_side(self, obj: InferredContract) -> str:
        version = obj.tool.current_version if obj.tool else None
        approved = version.document() if version else {}
        keys = ("requires", "produces", "risk", "input_schema", "cost")
        return format_html(
            "<table><tr><th>inferred</th><th>approved</th></tr><tr><td>{}</td><td>{}</td></tr></table>",
            pretty({key: obj.document.get(key) for key in keys} | {"confidence": obj.confidence}),
            pretty({key: approved.get(key) for key in keys}),
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
