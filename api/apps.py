from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from registry.signals import _bump

        from . import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from .models import RuntimeToken

        # A changed or deleted token must stop authenticating at once, cached or not.
        post_save.connect(_bump, sender=RuntimeToken, dispatch_uid="revision-token-save")
        post_delete.connect(_bump, sender=RuntimeToken, dispatch_uid="revision-token-delete")
