from django.apps import AppConfig


class LearningConfig(AppConfig):
    name = "learning"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .signals import tool_stats_changed
        from .tasks import tool_refresh_soon

        tool_stats_changed.connect(tool_refresh_soon, dispatch_uid="learning-refresh-soon")
