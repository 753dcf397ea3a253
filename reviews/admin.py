from datetime import timedelta
from typing import Any, ClassVar
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from registry.admin import JSON_OVERRIDES
from registry.contract import FIELDS
from registry.forms import FORM_NAMES, ContractForm
from registry.json_display import json_text
from registry.models import Application, ContractVersion

from .evidence import evidence_summary
from .models import AuditEntry, Comment, ProposalChanged, ReviewError, ReviewTicket
from .selectors import (
    ticket_source_servers,
    tickets_awaiting_approval_by,
    tickets_awaiting_second_reviewer,
    tickets_from_source,
    tickets_needing_rebase,
)
from .services import (
    ProposalSeen,
    contract_propose,
    is_reviewer,
    review_approve,
    review_comment,
    review_rebase,
    review_reject,
    ticket_diff,
)


class AgeFilter(admin.SimpleListFilter):
    title = "age"
    parameter_name = "age"
    BUCKETS = {"1d": ("under a day", 1), "7d": ("under a week", 7), "30d": ("under a month", 30)}

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.BUCKETS.items()] + [
            ("old", "a month or more")
        ]

    def queryset(self, request, queryset):
        if self.value() == "old":
            return queryset.filter(created_at__lt=timezone.now() - timedelta(days=30))
        bucket = self.BUCKETS.get(self.value() or "")
        if bucket is not None:
            days = bucket[1]
            return queryset.filter(created_at__gte=timezone.now() - timedelta(days=days))
        return queryset


def approvals_text(*, status: str, given: int, required: int, source: str) -> str:
    """Approvals as a reviewer counts them: given of required while it waits or once decided;
    a ticket published without them (an operator's import with ``--approve``, an automatic
    publication of a clean inferred change) says how it was published instead of "0/1"."""
    if status == ReviewTicket.Status.APPROVED and given < required:
        if source == ContractVersion.Source.IMPORT:
            return "approved on import"
        if source == ContractVersion.Source.INFERRED:
            return "published automatically"
        return "published without review"
    return f"{given}/{required}"


SEEN_FIELD = "seen"
NAMES_NO_PROPOSAL = (
    "this page did not name the proposal you decided on: nothing was decided. "
    "Open the ticket and decide on what it shows."
)


def seen_value(ticket: ReviewTicket) -> str:
    """What a page that shows ``ticket`` posts back with a decision: ticket, version, hash."""
    return f"{ticket.pk}:{ticket.proposed_id}:{ticket.proposed.content_hash}"


def seen_proposals(values: list[str]) -> dict[int, ProposalSeen]:
    """The proposals a decision names, by ticket id; malformed values name nothing."""
    seen = {}
    for value in values:
        parts = value.split(":")
        if len(parts) != 3 or not (parts[0].isdecimal() and parts[1].isdecimal()):
            continue
        digest = parts[2]
        if len(digest) != 64 or digest.strip("0123456789abcdef"):
            continue
        seen[int(parts[0])] = ProposalSeen(version_id=int(parts[1]), content_hash=digest)
    return seen


def _named(seen: ProposalSeen | None) -> ProposalSeen:
    if seen is None:
        raise ReviewError(NAMES_NO_PROPOSAL[0].upper() + NAMES_NO_PROPOSAL[1:])
    return seen


def proposal_changed_text(exc: ProposalChanged) -> str:
    url = reverse("admin:reviews_reviewticket_change", args=[exc.ticket_id])
    return format_html('{} <a href="{}">Open ticket #{}</a>.', str(exc), url, exc.ticket_id)


class RejectForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 80}), required=True)


class CommentInline(admin.TabularInline[Comment, ReviewTicket]):
    model = Comment
    fields: ClassVar[tuple[str, ...]] = ("author", "body", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class AwaitingFilter(admin.SimpleListFilter):
    """What an open ticket waits for; the reviewer's home links here."""

    title = "waiting for"
    parameter_name = "awaiting"

    def lookups(self, request, model_admin):
        return [
            ("mine", "my approval"),
            ("second", "a second reviewer"),
            ("rebase", "a rebase"),
        ]

    def queryset(self, request, queryset):
        if self.value() == "mine":
            return tickets_awaiting_approval_by(user=request.user, tickets=queryset)
        if self.value() == "second":
            return tickets_awaiting_second_reviewer(queryset)
        if self.value() == "rebase":
            return tickets_needing_rebase(queryset)
        return queryset


class SourceServerFilter(admin.SimpleListFilter):
    """Tickets opened by one MCP server's declarations."""

    title = "source server"
    parameter_name = "server"

    def lookups(self, request, model_admin):
        return [(name, name) for name in ticket_source_servers()]

    def queryset(self, request, queryset):
        server = self.value()
        return tickets_from_source(queryset, server) if server else queryset


@admin.register(ReviewTicket)
class ReviewTicketAdmin(admin.ModelAdmin[ReviewTicket]):
    list_display = [
        "ticket",
        "kind",
        "status",
        "risk",
        "proposal",
        "approval_count",
        "rebase_state",
        "proposer",
        "created_at",
    ]
    list_display_links = ["ticket"]
    list_filter = [
        "status",
        "kind",
        "proposed__risk",
        AwaitingFilter,
        AgeFilter,
        SourceServerFilter,
    ]
    search_fields = ["tool__name", "proposer__username", "reason"]
    list_select_related = ["tool", "proposed__risk", "proposer"]
    actions = ["approve", "reject"]
    inlines = [CommentInline]
    change_form_template = "admin/reviews/reviewticket/change_form.html"
    readonly_fields: ClassVar[tuple[str, ...]] = (
        "tool",
        "kind",
        "status",
        "base",
        "proposed",
        "needs_rebase",
        "approvals_required",
        "proposer",
        "created_at",
        "decided_by",
        "decided_at",
        "reason",
    )
    fields = readonly_fields

    def get_fields(self, request, obj=None):
        # The rebase flag matters only while a ticket is open and actually needs one; a
        # decision's fields only once it is decided.
        fields = list(self.fields)
        if obj is None or obj.status != ReviewTicket.Status.OPEN or not obj.needs_rebase:
            fields.remove("needs_rebase")
        if obj is not None and obj.status == ReviewTicket.Status.OPEN:
            fields = [name for name in fields if name not in ("decided_by", "decided_at")]
        if obj is not None and not obj.reason:
            fields.remove("reason")
        return fields

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(approval_total=Count("approvals"))

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_review_permission(self, request) -> bool:
        """Every decision on a ticket, comments included, is for the Reviewers group alone."""
        return is_reviewer(request.user)

    @admin.display(description="ticket", ordering="tool__name")
    def ticket(self, obj: ReviewTicket) -> str:
        return format_html('<span class="nowrap">#{}</span> {}', obj.pk, obj.tool.name)

    @admin.display(description="risk", ordering="proposed__risk__rank")
    def risk(self, obj: ReviewTicket) -> str:
        return obj.proposed.risk.name

    @admin.display(description="proposal")
    def proposal(self, obj: ReviewTicket) -> str:
        """The version and hash a bulk decision on this row is about, shown and posted back
        with the list's actions, so the decision never reaches a proposal replaced since."""
        return format_html(
            '<span class="nowrap" title="{}">v{} · {}</span>'
            '<input type="hidden" name="{}" value="{}">',
            obj.proposed.content_hash,
            obj.proposed.number,
            obj.proposed.content_hash[:8],
            SEEN_FIELD,
            seen_value(obj),
        )

    @admin.display(description="approvals", ordering="approval_total")
    def approval_count(self, obj: ReviewTicket) -> str:
        return approvals_text(
            status=obj.status,
            given=getattr(obj, "approval_total", 0),  # annotated by get_queryset
            required=obj.approvals_required,
            source=obj.proposed.source,
        )

    @admin.display(description="rebase", ordering="needs_rebase")
    def rebase_state(self, obj: ReviewTicket) -> str:
        if obj.status == ReviewTicket.Status.OPEN and obj.needs_rebase:
            return mark_safe('<span class="badge badge-warn">needs rebase</span>')
        return ""

    @admin.action(description="Approve selected tickets", permissions=["review"])
    def approve(self, request, queryset):
        """Each ticket is approved only as the list showed it: a row's proposal (version and
        hash) is posted with the action, and a ticket whose proposal was replaced since, or
        that the page did not show (selected across pages), is refused, not approved."""
        seen = seen_proposals(request.POST.getlist(SEEN_FIELD))
        published = recorded = 0
        for ticket in queryset.select_related("proposed"):
            try:
                if ticket.pk not in seen:
                    raise ReviewError(f"Ticket #{ticket.pk}: {NAMES_NO_PROPOSAL}")
                version = review_approve(ticket=ticket, reviewer=request.user, seen=seen[ticket.pk])
            except ProposalChanged as exc:
                self.message_user(request, proposal_changed_text(exc), messages.ERROR)
                continue
            except ReviewError as exc:
                self.message_user(request, f"#{ticket.pk}: {exc}", messages.ERROR)
                continue
            if version is None:
                recorded += 1
            else:
                published += 1
        if published:
            self.message_user(request, f"Published {published} contract(s).", messages.SUCCESS)
        if recorded:
            self.message_user(
                request, f"Recorded {recorded} approval(s); more are needed.", messages.SUCCESS
            )

    @admin.action(description="Reject selected tickets (asks for a reason)", permissions=["review"])
    def reject(self, request, queryset):
        form = RejectForm(request.POST if "reason" in request.POST else None)
        seen_values = request.POST.getlist(SEEN_FIELD)
        seen = seen_proposals(seen_values)
        if form.is_bound and form.is_valid():
            rejected = 0
            for ticket in queryset.select_related("proposed"):
                try:
                    if ticket.pk not in seen:
                        raise ReviewError(f"Ticket #{ticket.pk}: {NAMES_NO_PROPOSAL}")
                    review_reject(
                        ticket=ticket,
                        reviewer=request.user,
                        reason=form.cleaned_data["reason"],
                        seen=seen[ticket.pk],
                    )
                    rejected += 1
                except ProposalChanged as exc:
                    self.message_user(request, proposal_changed_text(exc), messages.ERROR)
                except ReviewError as exc:
                    self.message_user(request, f"#{ticket.pk}: {exc}", messages.ERROR)
            if rejected:
                self.message_user(request, f"Rejected {rejected} ticket(s).", messages.SUCCESS)
            return None
        return TemplateResponse(
            request,
            "admin/reviews/reviewticket/reject.html",
            {
                **self.admin_site.each_context(request),
                "title": "Reject tickets",
                "tickets": queryset,
                "seen_values": seen_values,
                "seen_field": SEEN_FIELD,
                "form": form,
                "opts": self.model._meta,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            },
        )

    def get_urls(self):
        def wrap(view):
            return self.admin_site.admin_view(view)

        return [
            path("<int:pk>/decide/", wrap(self.decide_view), name="reviews_reviewticket_decide"),
            *super().get_urls(),
        ]

    def decide_view(self, request, pk: int):
        """The buttons of the ticket page: approve, reject, rebase, comment."""
        if request.method != "POST" or not self.has_review_permission(request):
            raise PermissionDenied
        ticket = get_object_or_404(ReviewTicket, pk=pk)
        decision = request.POST.get("decision")
        seen = seen_proposals(request.POST.getlist(SEEN_FIELD)).get(ticket.pk)
        try:
            if decision == "approve":
                version = review_approve(ticket=ticket, reviewer=request.user, seen=_named(seen))
                text = (
                    f"Published {ticket.tool.name} v{version.number}."
                    if version
                    else "Approval recorded; more approvals are needed."
                )
            elif decision == "reject":
                review_reject(
                    ticket=ticket,
                    reviewer=request.user,
                    reason=request.POST.get("reason", ""),
                    seen=_named(seen),
                )
                text = "Rejected."
            elif decision == "rebase":
                ticket = review_rebase(ticket=ticket, actor=request.user)
                text = f"Rebased onto the current version as v{ticket.proposed.number}."
            elif decision == "comment":
                review_comment(
                    ticket=ticket, author=request.user, body=request.POST.get("body", "")
                )
                text = "Comment added."
            else:
                raise ReviewError("Unknown decision.")
        except ProposalChanged as exc:
            # The redirect below shows the ticket as it is now: the new diff.
            self.message_user(request, str(exc), messages.ERROR)
        except ReviewError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:reviews_reviewticket_change", args=[pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        ticket = get_object_or_404(
            ReviewTicket.objects.select_related("tool", "base__risk", "proposed__risk"),
            pk=object_id,
        )
        summary = evidence_summary(
            ticket.evidence if isinstance(ticket.evidence, dict) else {},
            base_cost=ticket.base.cost if ticket.base else None,
        )
        _link_examples(summary)
        approvals = list(ticket.approvals.select_related("reviewer"))
        extra_context = {
            **(extra_context or {}),
            "diff": ticket_diff(ticket),
            "evidence_json": json_text(ticket.evidence),
            "summary": summary,
            "ticket": ticket,
            "approvals": approvals,
            "approvals_text": approvals_text(
                status=ticket.status,
                given=len(approvals),
                required=ticket.approvals_required,
                source=ticket.proposed.source,
            ),
            "can_decide": self.has_review_permission(request),
            "seen_field": SEEN_FIELD,
            "seen_value": seen_value(ticket),
            "decide_url": reverse("admin:reviews_reviewticket_decide", args=[ticket.pk]),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
        }
        return super().change_view(request, object_id, form_url, extra_context)


def _link_examples(summary: dict[str, Any]) -> None:
    """Give each example run its link: the trace list showing that whole run (same trace id,
    same application) step by step. One query for the applications' names."""
    examples = [
        example
        for item in [*summary["items"], *summary["dataflow"]]
        for example in item["examples"]
    ]
    for example in examples:
        owner = example["application_id"]
        if owner is not None and (not isinstance(owner, int) or isinstance(owner, bool)):
            # Not an id this page can trust: link the trace id in any application.
            example["application_id"], example["resolved"] = None, False
    ids = {example["application_id"] for example in examples if example["application_id"]}
    names = dict(Application.objects.filter(pk__in=ids).values_list("pk", "name")) if ids else {}
    changelist = reverse("admin:learning_trace_changelist")
    for example in examples:
        query = {"trace_id": example["trace_id"]}
        application_id = example["application_id"]
        if example["resolved"]:
            if application_id:
                query["application__id__exact"] = str(application_id)
                example["application"] = names.get(application_id, f"#{application_id}")
            else:
                query["application__isnull"] = "True"
                example["application"] = "operator import"
        example["url"] = f"{changelist}?{urlencode(query)}"


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin[AuditEntry]):
    list_display = ["created_at", "action", "tool", "ticket_link", "actor", "before", "after"]
    list_filter = ["action", "created_at"]
    search_fields = ["tool__name", "actor__username"]
    list_select_related = ["tool", "actor", "ticket"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="ticket")
    def ticket_link(self, obj: AuditEntry) -> str:
        if obj.ticket_id is None:
            return "—"
        url = reverse("admin:reviews_reviewticket_change", args=[obj.ticket_id])
        return format_html('<a href="{}">#{}</a>', url, obj.ticket_id)

    @admin.display(description="before")
    def before(self, obj: AuditEntry) -> str:
        return obj.before_hash[:12]

    @admin.display(description="after")
    def after(self, obj: AuditEntry) -> str:
        return obj.after_hash[:12]


@admin.register(ContractVersion)
class ContractVersionAdmin(admin.ModelAdmin[ContractVersion]):
    """Versions are records to read; a change, or a new tool, is proposed on its own page
    (``propose_view``), as a ticket is decided on its own (``ReviewTicketAdmin.decide_view``)."""

    form = ContractForm
    change_form_template = "admin/registry/contractversion/change_form.html"
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
        # The contract's fields, grouped as the one table of contract fields says; the form
        # names the document's ``name`` and ``status`` ``tool_name`` and ``lifecycle``. A
        # version's page shows its JSON fields indented (``<field>_json``).
        groups: dict[str, list[str]] = {}
        for field in FIELDS:
            name = FORM_NAMES.get(field.name, field.name)
            if obj is not None and name in JSON_FIELDS:
                name = f"{name}_json"
            groups.setdefault(field.group, []).append(name)
        fieldsets: list[Any] = [(group, {"fields": names}) for group, names in groups.items()]
        if obj is not None:
            fieldsets.append(("Record", {"fields": self.readonly_fields}))
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return self.readonly_fields
        fields = [
            f"{name}_json" if name in JSON_FIELDS else name for name in ContractForm.Meta.fields
        ]
        return [*fields, "tool_name", *self.readonly_fields]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is not None:
            kwargs["fields"] = []
        return super().get_form(request, obj, change, **kwargs)

    def has_change_permission(self, request, obj=None) -> bool:
        # Every version is a record to read: a change is proposed (``propose_view``), never
        # saved over a version.
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_propose_permission(self, request, base: ContractVersion | None) -> bool:
        """Proposing a change to an approved version, or a new tool."""
        if base is None:
            return super().has_add_permission(request)
        return base.status == ContractVersion.Status.APPROVED and super().has_change_permission(
            request, base
        )

    @admin.display(description="tool name")
    def tool_name(self, obj: ContractVersion) -> str:
        return obj.tool.name

    def get_urls(self):
        def wrap(view):
            return self.admin_site.admin_view(view)

        return [
            path("propose/", wrap(self.propose_view), name="registry_contractversion_propose_new"),
            path(
                "<int:pk>/propose/",
                wrap(self.propose_view),
                name="registry_contractversion_propose",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request, form_url="", extra_context=None):
        # "Add contract version" is a proposal of a new tool.
        if not self.has_propose_permission(request, None):
            raise PermissionDenied
        return HttpResponseRedirect(reverse("admin:registry_contractversion_propose_new"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        version = self.get_object(request, object_id)
        propose_url = None
        if version is not None and self.has_propose_permission(request, version):
            propose_url = reverse("admin:registry_contractversion_propose", args=[version.pk])
        extra_context = {**(extra_context or {}), "propose_url": propose_url}
        return super().change_view(request, object_id, form_url, extra_context)

    def propose_view(self, request, pk: int | None = None):
        """A proposal: the approved version's fields (or empty ones for a new tool) to edit;
        submitting opens a review ticket (``contract_propose``), never changes a version."""
        base = None
        if pk is not None:
            base = get_object_or_404(ContractVersion.objects.select_related("tool"), pk=pk)
        if not self.has_propose_permission(request, base):
            raise PermissionDenied
        form_class = self.get_form(request, None)
        form = form_class(request.POST or None, instance=base)
        if request.method == "POST" and form.is_valid():
            ticket = contract_propose(document=form.document(), author=request.user)
            if ticket is None:
                self.message_user(request, "Nothing changed: no proposal was made.", messages.INFO)
                return HttpResponseRedirect(
                    reverse("admin:registry_contractversion_change", args=[base.pk])
                    if base
                    else reverse("admin:registry_contractversion_changelist")
                )
            self.message_user(
                request,
                f"Proposed {ticket.tool.name} v{ticket.proposed.number} for review "
                f"(ticket #{ticket.pk}).",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(
                reverse("admin:reviews_reviewticket_change", args=[ticket.pk])
            )
        fieldsets = self.get_fieldsets(request)
        admin_form = helpers.AdminForm(form, fieldsets, {}, model_admin=self)
        title = f"Propose a change to {base.tool.name} v{base.number}" if base else "Propose a tool"
        return TemplateResponse(
            request,
            "admin/registry/contractversion/propose.html",
            {
                **self.admin_site.each_context(request),
                "title": title,
                "opts": self.model._meta,
                "base": base,
                "adminform": admin_form,
                "form": form,
                "errors": helpers.AdminErrorList(form, []),
                "media": self.media + admin_form.media,
            },
        )


JSON_FIELDS = frozenset(
    field.name
    for field in ContractVersion._meta.get_fields()
    if isinstance(field, models.JSONField) and field.name in ContractForm.Meta.fields
)


def _json_display(name: str):
    @admin.display(description=name.replace("_", " "))
    def show(self, obj: ContractVersion) -> str:
        return format_html(
            '<pre class="json-field">{}</pre>',
            json_text(getattr(obj, name)),
        )

    return show


for _name in JSON_FIELDS:
    setattr(ContractVersionAdmin, f"{_name}_json", _json_display(_name))
