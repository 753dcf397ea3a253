from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_delete, post_save


class RegistryConfig(AppConfig):
    name = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Receivers connect once the app registry is ready: Django's documented place.
        from .handlers import revision_bump_on_change, revision_bump_on_tool_save
        from .models import Application, Permission, PlanningPolicy, RiskLevel, StateVariable, Tool

        for model in (Application, PlanningPolicy, RiskLevel, Permission, StateVariable):
            name = model.__name__
            post_save.connect(
                revision_bump_on_change, sender=model, dispatch_uid=f"revision-save-{name}"
            )
            post_delete.connect(
                revision_bump_on_change, sender=model, dispatch_uid=f"revision-delete-{name}"
            )
        for through in (Application.enabled_tools.through, Application.allowed_permissions.through):
            m2m_changed.connect(
                revision_bump_on_change,
                sender=through,
                dispatch_uid=f"revision-m2m-{through.__name__}",
            )
        post_save.connect(revision_bump_on_tool_save, sender=Tool, dispatch_uid="revision-tool")
        # A deleted tool leaves what runtimes see, and the names that validation reads.
        post_delete.connect(
            revision_bump_on_change, sender=Tool, dispatch_uid="revision-tool-delete"
        )
