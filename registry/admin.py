from django import forms
from django.contrib import admin, messages
from django.db import models
from django.http import HttpResponseRedirect
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
from .validation import ContractInvalid

JSON_OVERRIDES = {models.JSONField: {"form_class": PrettyJSONField}}


@admin.register(StateVariable)
class StateVariableAdmin(admin.ModelAdmin):
    list_display = ["name", "alias_list", "description"]
    search_fields = ["name", "description"]
    formfield_overrides = JSON_OVERRIDES

    @admin.display(description="aliases")
    def alias_list(self, obj: StateVariable) -> str:
        return ", ".join(obj.aliases)


@admin.register(RiskLevel)
class RiskLevelAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "rank",
        "approvals_required",
        "ticket_on_drift",
        "auto_approve_inferred",
        "min_support",
    ]
    list_editable = [
        "approvals_required",
        "ticket_on_drift",
        "auto_approve_inferred",
        "min_support",
    ]
    filter_horizontal = ["reviewers"]


@admin.register(Permission)
class PermissionAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name", "description"]


class VersionInline(admin.TabularInline):
    model = ContractVersion
    fk_name = "tool"
    fields = ["version_link", "status", "source", "risk", "author", "created_at", "approved_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ["-number"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="version")
    def version_link(self, obj: ContractVersion) -> str:
        url = reverse("admin:registry_contractversion_change", args=[obj.pk])
        return format_html('<a href="{}">v{}</a>', url, obj.number)


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
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


class ContractForm(forms.ModelForm):
    """Edits build a contract document; the review service decides what becomes of it."""

    tool_name = forms.CharField(
        max_length=200, help_text="Dotted name, e.g. calendar.find_events.", required=False
    )

    class Meta:
        model = ContractVersion
        fields = [*ContractVersion.CONTRACT_FIELDS, "risk", "lifecycle"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "tool_name" not in self.fields:  # a read-only version's page
            return
        if self.instance.pk:
            self.fields["tool_name"].initial = self.instance.tool.name
            self.fields["tool_name"].disabled = True
        else:
            self.fields["tool_name"].required = True

    def document(self) -> dict:
        data = self.cleaned_data
        document = {"name": data["tool_name"]}
        for field in ContractVersion.CONTRACT_FIELDS:
            document[field] = data.get(field)
        document["risk"] = data["risk"].name if data.get("risk") else None
        document["status"] = data.get("lifecycle") or Tool.Lifecycle.ACTIVE
        return {key: value for key, value in document.items() if value is not None}

    def clean(self):
        from reviews.services import contract_validate

        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            contract_validate(document=self.document())
        except ContractInvalid as exc:
            for field, reasons in exc.errors.items():
                target = {"name": "tool_name", "status": "lifecycle"}.get(field, field)
                self.add_error(target if target in self.fields else None, reasons)
        return cleaned


@admin.register(ContractVersion)
class ContractVersionAdmin(admin.ModelAdmin):
    form = ContractForm
    list_display = ["tool", "number", "status", "source", "risk", "author", "created_at"]
    list_filter = ["status", "source", "risk", "lifecycle"]
    search_fields = ["tool__name", "description"]
    list_select_related = ["tool", "risk", "author"]
    formfield_overrides = JSON_OVERRIDES
    readonly_fields = [
        "status",
        "source",
        "based_on",
        "author",
        "content_hash",
        "created_at",
        "approved_at",
    ]

    def get_fieldsets(self, request, obj=None):
        contract = ["tool_name", "description", "risk", "lifecycle", "input_schema",
                    "output_schema", "requires", "produces", "effects", "permissions", "cost",
                    "invariants", "config_params", "dependencies", "resource_limits"]  # fmt: skip
        fieldsets = [(None, {"fields": contract})]
        if obj is not None:
            fieldsets.append(("Record", {"fields": self.readonly_fields}))
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        # Only the approved version's page is a form: saving it proposes a new version.
        if obj is not None and obj.status != ContractVersion.Status.APPROVED:
            return [*ContractForm.Meta.fields, "tool_name", *self.readonly_fields]
        return self.readonly_fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is not None and obj.status != ContractVersion.Status.APPROVED:
            kwargs["fields"] = []
        return super().get_form(request, obj, change, **kwargs)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="tool name")
    def tool_name(self, obj: ContractVersion) -> str:
        return obj.tool.name

    def save_model(self, request, obj, form, change) -> None:
        from reviews.services import contract_propose

        # Never save ``obj``: an approved version does not change; a proposal is a new version.
        request._proposal_ticket = contract_propose(document=form.document(), author=request.user)

    def save_related(self, request, form, formsets, change) -> None:
        pass

    def log_addition(self, request, obj, message):
        pass

    def log_change(self, request, obj, message):
        pass

    def _to_ticket(self, request) -> HttpResponseRedirect:
        ticket = request._proposal_ticket
        if ticket is None:
            self.message_user(request, "Nothing changed: no proposal was made.", messages.INFO)
            return HttpResponseRedirect(reverse("admin:registry_contractversion_changelist"))
        self.message_user(
            request,
            f"Proposed {ticket.tool.name} v{ticket.proposed.number} for review "
            f"(ticket #{ticket.pk}).",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:reviews_reviewticket_change", args=[ticket.pk]))

    def response_add(self, request, obj, post_url_continue=None):
        return self._to_ticket(request)

    def response_change(self, request, obj):
        return self._to_ticket(request)


class PlanningPolicyInline(admin.StackedInline):
    model = PlanningPolicy
    formfield_overrides = JSON_OVERRIDES
    can_delete = True
    extra = 0


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin):
    list_display = ["name", "max_risk", "all_tools", "all_permissions", "created_at"]
    list_filter = ["max_risk", "all_tools"]
    search_fields = ["name", "description"]
    filter_horizontal = ["enabled_tools", "allowed_permissions"]
    inlines = [PlanningPolicyInline]
