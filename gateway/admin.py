from django.contrib import admin

from .models import ApplicationSetting, Refusal


@admin.register(Refusal)
class RefusalAdmin(admin.ModelAdmin[Refusal]):
    list_display = ["occurred_at", "application", "tool", "rule", "field", "trace_id", "step"]
    list_filter = ["rule", "application"]
    list_select_related = ["application"]
    search_fields = ["tool", "trace_id"]
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ApplicationSetting)
class ApplicationSettingAdmin(admin.ModelAdmin[ApplicationSetting]):
    list_display = ["application", "requires", "calls_per_minute"]
    list_select_related = ["application"]
