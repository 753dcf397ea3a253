from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import RuntimeToken
from .services import runtime_tokens_revoke


@admin.register(RuntimeToken)
class RuntimeTokenAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "application",
        "name",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = ["application", "revoked_at"]
    search_fields = ["prefix", "name", "application__name"]
    readonly_fields = ["application", "prefix", "created_at", "last_used_at", "revoked_at"]
    fields = [
        "application",
        "name",
        "prefix",
        "scopes",
        "expires_at",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        # A token is shown once at creation: `manage.py create_runtime_token` prints it.
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[RuntimeToken]) -> None:
        count = runtime_tokens_revoke(tokens=queryset)
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
