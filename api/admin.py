from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import RuntimeToken, Webhook, WebhookDelivery
from .services import runtime_tokens_revoke
from .webhooks import webhook_deliveries_queue, webhook_deliveries_retry, webhook_test_send


@admin.register(RuntimeToken)
class RuntimeTokenAdmin(admin.ModelAdmin[RuntimeToken]):
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


class WebhookDeliveryInline(admin.TabularInline[WebhookDelivery, Webhook]):
    model = WebhookDelivery
    fields = ("created_at", "event", "status", "attempts", "response_code", "error", "finished_at")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created_at"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin[Webhook]):
    list_display = ["application", "url", "events", "enabled", "created_at"]
    list_filter = ["enabled", "application"]
    list_select_related = ["application"]
    fields = ["application", "url", "events", "enabled", "secret", "created_at"]
    readonly_fields = ["created_at"]
    inlines = [WebhookDeliveryInline]
    actions = ["send_test"]

    def get_fields(self, request, obj=None):
        # The secret signs what the application trusts: only who may change the webhook sees it.
        if self.has_change_permission(request, obj) or obj is None:
            return list(self.fields)
        return [field for field in self.fields if field != "secret"]

    @admin.action(description="Send a test delivery", permissions=["change"])
    def send_test(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        ids = [webhook_test_send(webhook=webhook).pk for webhook in queryset]
        webhook_deliveries_queue(ids)
        self.message_user(request, f"Queued {len(ids)} test delivery(ies).", messages.SUCCESS)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin[WebhookDelivery]):
    """The delivery log: read-only."""

    list_display = ["created_at", "webhook", "event", "status", "attempts", "response_code"]
    list_filter = ["status", "event"]
    list_select_related = ["webhook__application"]
    show_full_result_count = False
    readonly_fields = [
        "webhook", "event", "payload", "status", "attempts", "response_code", "error",
        "created_at", "finished_at",
    ]  # fmt: skip
    actions = ["send_again"]

    @admin.action(description="Send again (failed or never queued)", permissions=["send"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        ids = webhook_deliveries_retry(delivery_ids=list(queryset.values_list("pk", flat=True)))
        webhook_deliveries_queue(ids)
        self.message_user(request, f"Queued {len(ids)} delivery(ies) again.", messages.SUCCESS)

    def has_send_permission(self, request: HttpRequest) -> bool:
        """Sending again is a change of the webhook's traffic, not a reading of the log."""
        return request.user.has_perm("api.change_webhook")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
