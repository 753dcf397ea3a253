"""What runtimes see depends on more than contracts: an application's settings, a risk level.

Any change to those moves the registry revision, so ETags and cached visibility follow. This is
bookkeeping on every write path (admin, shell, import), which is why it lives in signals.
"""

from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from .models import Application, Permission, PlanningPolicy, RiskLevel, StateVariable, Tool


def _bump(**kwargs) -> None:
    """Any save or delete that changes what runtimes see moves the revision."""
    from reviews.services import revision_bump

    if kwargs.get("raw"):
        return
    revision_bump()


for model in (Application, PlanningPolicy, RiskLevel, Permission, StateVariable):
    post_save.connect(_bump, sender=model, dispatch_uid=f"revision-save-{model.__name__}")
    post_delete.connect(_bump, sender=model, dispatch_uid=f"revision-delete-{model.__name__}")
for through in (Application.enabled_tools.through, Application.allowed_permissions.through):
    m2m_changed.connect(_bump, sender=through, dispatch_uid=f"revision-m2m-{through.__name__}")


@receiver(post_save, sender=Tool, dispatch_uid="revision-tool")
def _tool_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if not created and update_fields != frozenset({"current_version", "lifecycle"}):
        _bump(**kwargs)
