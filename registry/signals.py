"""What runtimes see depends on more than contracts: an application's settings, a risk level.

Any change to those moves the registry revision, so ETags and cached visibility follow. This is
bookkeeping on every write path (admin, shell, import), which is why it lives in signals. Apps
above the registry connect their own models to ``revision_bump_on_change`` (the API does, for
runtime tokens).
"""

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from .models import Application, Permission, PlanningPolicy, RiskLevel, StateVariable, Tool
from .revision import revision_bump


def revision_bump_on_change(**kwargs: Any) -> None:
    """A signal receiver: any save or delete that changes what runtimes see moves the revision."""
    if kwargs.get("raw"):
        return
    revision_bump()


for model in (Application, PlanningPolicy, RiskLevel, Permission, StateVariable):
    post_save.connect(
        revision_bump_on_change, sender=model, dispatch_uid=f"revision-save-{model.__name__}"
    )
    post_delete.connect(
        revision_bump_on_change, sender=model, dispatch_uid=f"revision-delete-{model.__name__}"
    )
for through in (Application.enabled_tools.through, Application.allowed_permissions.through):
    m2m_changed.connect(
        revision_bump_on_change, sender=through, dispatch_uid=f"revision-m2m-{through.__name__}"
    )


@receiver(post_save, sender=Tool, dispatch_uid="revision-tool")
def _tool_saved(sender: type[Tool], instance: Tool, created: bool, **kwargs: Any) -> None:
    # Publishing saves exactly these two fields and bumps the revision itself.
    if not created and kwargs.get("update_fields") != frozenset({"current_version", "lifecycle"}):
        revision_bump_on_change(**kwargs)
