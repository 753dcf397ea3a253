from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401
