from typing import Any, ClassVar

from django.contrib import admin
from django.db import models
from django.urls import reverse
from django.utils.html import format_html

from .forms import PrettyJSONField
from .models import (
    Application,
    ContractVersion,
    Permission,
    PlanningPolicy,
    RiskLevel,
    StateVariable,
    Tool,
)

JSON_OVERRIDES: "dict[type[models.Field[Any, Any]], dict[str, Any]]" = {
    models.JSONField: {"form_class": PrettyJSONField}
}


@admin.register(StateVariable)
class StateVariableAdmin(admin.ModelAdmin[StateVariable]):
    list_display = ["name", "alias_list", "description"]
    search_fields = ["name", "description"]
    formfield_overrides = JSON_OVERRIDES

    @admin.display(description="aliases")
    def alias_list(self, obj: StateVariable) -> str:
        return ", ".join(obj.aliases)


@admin.register(RiskLevel)
class RiskLevelAdmin(admin.ModelAdmin[RiskLevel]):
    list_display = [
        "name",
        "rank",
        "approvals_required",
        "ticket_on_drift",
        "ticket_on_latency",
        "auto_approve_inferred",
        "min_support",
        "confirm_calls",
    ]
    list_editable = [
        "approvals_required",
        "ticket_on_drift",
        "ticket_on_latency",
        "auto_approve_inferred",
        "min_support",
        "confirm_calls",
    ]
    filter_horizontal = ["reviewers"]


@admin.register(Permission)
class PermissionAdmin(admin.ModelAdmin[Permission]):
    list_display = ["name", "description"]
    search_fields = ["name", "description"]


class VersionInline(admin.TabularInline[ContractVersion, Tool]):
    model = ContractVersion
    fk_name = "tool"
    fields: ClassVar[tuple[str, ...]] = (
        "version_link", "status", "source", "risk", "author", "created_at", "approved_at",
    )  # fmt: skip
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ["-number"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("risk", "author")

    @admin.display(description="version")
    def version_link(self, obj: ContractVersion) -> str:
        url = reverse("admin:registry_contractversion_change", args=[obj.pk])
        return format_html('<a href="{}">v{}</a>', url, obj.number)


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin[Tool]):
    list_display = ["name", "domain", "lifecycle", "current", "current_risk", "created_at"]
    list_filter = ["lifecycle", "current_version__risk"]
    search_fields = ["name", "owner"]
    list_select_related = ["current_version__risk"]
    readonly_fields = ["current", "created_at"]
    fields = ["name", "owner", "lifecycle", "current", "created_at"]
    inlines = [VersionInline]

    def get_readonly_fields(self, request, obj=None):
        # The name and lifecycle follow the approved contract; only the owner is free text.
        return [*self.readonly_fields, "name", "lifecycle"] if obj else self.readonly_fields

    def has_add_permission(self, request) -> bool:
        # A tool comes into being with its first contract: propose one instead.
        return False

    @admin.display(description="current version")
    def current(self, obj: Tool) -> str:
        version = obj.current_version
        if version is None:
            return "—"
        url = reverse("admin:registry_contractversion_change", args=[version.pk])
        return format_html('<a href="{}">v{}</a>', url, version.number)

    @admin.display(description="risk", ordering="current_version__risk__rank")
    def current_risk(self, obj: Tool) -> str:
        return obj.current_version.risk.name if obj.current_version else "—"


class PlanningPolicyInline(admin.StackedInline[PlanningPolicy, Application]):
    model = PlanningPolicy
    formfield_overrides = JSON_OVERRIDES
    can_delete = True
    extra = 0


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin[Application]):
    list_display = ["name", "max_risk", "all_tools", "all_permissions", "created_at"]
    list_filter = ["max_risk", "all_tools"]
    search_fields = ["name", "description"]
    filter_horizontal = ["enabled_tools", "allowed_permissions"]
    inlines = [PlanningPolicyInline]
