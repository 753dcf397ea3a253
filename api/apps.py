from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save

from registry.signals import contract_published, revision_changed


class ApiConfig(AppConfig):
    name = "api"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Receivers and the OpenAPI auth extension need the app registry ready: Django's
        # documented place for these imports.
        from registry.handlers import revision_bump_on_change

        from . import schema  # noqa: F401
        from .handlers import bundles_render_on_change, webhooks_on_publication
        from .models import RuntimeToken

        post_save.connect(
            revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-save"
        )
        post_delete.connect(
            revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-delete"
        )
        revision_changed.connect(bundles_render_on_change, dispatch_uid="api-bundles-render")
        contract_published.connect(webhooks_on_publication, dispatch_uid="api-webhooks")
