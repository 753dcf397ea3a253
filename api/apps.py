from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registering signal receivers and the OpenAPI auth extension needs the app registry
        # ready: Django's documented place for these imports.
        from . import schema, signals  # noqa: F401
