"""MCP servers in the admin: their record and last sync, a "sync now" action.

The stdio command is code the worker runs: it is shown, never edited here (operators set it
with ``manage.py mcp_servers add``). URLs are checked against MCP_URL_ALLOWLIST by the model.
"""

import shlex
from functools import partial

from django.contrib import admin, messages
from django.db import models
from django.utils.html import escape

from registry.queueing import task_send_on_commit

from .models import DeclaredTool, McpServer
from .tasks import mcp_server_sync

NAME_HELP = "The namespace of its tools: each is the contract <server>.<tool>."


class DeclaredToolInline(admin.TabularInline[DeclaredTool, McpServer]):
    model = DeclaredTool
    fields = ("name", "tool", "definition_hash", "gone", "ticket", "changed_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


# What the last sync left: read-only, shown together.
LAST_SYNC_FIELDS = (
    "schedule",
    "last_sync_at",
    "last_sync_duration_ms",
    "last_sync_outcome",
    "last_sync_error",
    "tool_count",
    "last_sync_report",
)


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin[McpServer]):
    list_display = (
        "name",
        "transport",
        "enabled",
        "last_sync_at",
        "last_sync_outcome",
        "tool_count",
        "last_sync_duration_ms",
    )
    list_filter = ("transport", "enabled", "last_sync_outcome")
    search_fields = ("name",)
    filter_horizontal = ("applications",)
    readonly_fields = ("transport", "command_line", "registry_origin", *LAST_SYNC_FIELDS)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "transport",
                    "command_line",
                    "url",
                    "headers",
                    "enabled",
                    "registry_origin",
                )
            },
        ),
        ("Who sees its tools", {"fields": ("applications",)}),
        ("Last sync", {"fields": LAST_SYNC_FIELDS}),
    )
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    inlines = (DeclaredToolInline,)
    actions = ("sync_now",)

    def has_add_permission(self, request) -> bool:
        return False  # a server is added by an operator: manage.py mcp_servers add

    def get_readonly_fields(self, request, obj=None) -> tuple[str, ...]:
        # The name is its tools' namespace: set once, when an operator adds the server.
        return ("name", *self.readonly_fields) if obj is not None else self.readonly_fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        # The admin renders help text as HTML: "<server>" would vanish as an unknown tag.
        kwargs["help_texts"] = {"name": escape(NAME_HELP), **kwargs.get("help_texts", {})}
        return super().get_form(request, obj, change, **kwargs)

    def delete_queryset(self, request, queryset) -> None:
        for server in queryset:
            server.delete()  # one by one: each takes its beat entry with it

    @admin.display(description="command")
    def command_line(self, obj: McpServer) -> str:
        return shlex.join(obj.command) if obj.command else "-"

    @admin.display(description="from an MCP registry")
    def registry_origin(self, obj: McpServer) -> str:
        entry = obj.registry_entry
        if not entry:
            return "-"
        return f"{entry['name']} {entry['version']} at {entry['registry']}: {entry['source']}"

    @admin.action(description="Sync now", permissions=["change"])
    def sync_now(self, request, queryset) -> None:
        ids = list(queryset.filter(enabled=True).values_list("pk", flat=True))
        for server_id in ids:
            task_send_on_commit(
                partial(mcp_server_sync.delay, server_id), what=f"sync of MCP server {server_id}"
            )
        self.message_user(
            request, f"Queued a sync of {len(ids)} enabled server(s).", messages.SUCCESS
        )
