from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "MCP gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The models need the app registry ready: Django's documented place for these imports.
        from registry.handlers import revision_bump_on_change

        from .models import ApplicationSetting

        # Gateway processes keep each application's catalog, its settings included, until the
        # registry revision moves: a setting changed in the admin moves it.
        post_save.connect(
            revision_bump_on_change,
            sender=ApplicationSetting,
            dispatch_uid="gateway-setting-save",
        )
        post_delete.connect(
            revision_bump_on_change,
            sender=ApplicationSetting,
            dispatch_uid="gateway-setting-delete",
        )
