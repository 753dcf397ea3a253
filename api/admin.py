from django.contrib import admin, messages
from django.utils import timezone

from reviews.services import revision_bump

from .models import RuntimeToken


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

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        revision_bump()  # cached authentications end with the revision they were cached under
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
