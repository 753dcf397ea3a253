"""What runtimes see depends on more than contracts: an application's settings, a risk level.

Any change to those moves the registry revision, so ETags and cached visibility follow. This is
bookkeeping on every write path (admin, shell, import), which is why it hangs on model signals,
connected in ``RegistryConfig.ready()``. Apps above the registry connect their own models to
``revision_bump_on_change`` (the API does, for runtime tokens).
"""

from typing import Any

from .models import Tool
from .revision import revision_bump


def revision_bump_on_change(**kwargs: Any) -> None:
    """A signal receiver: any save or delete that changes what runtimes see moves the revision."""
    if kwargs.get("raw"):
        return
    revision_bump()


def revision_bump_on_tool_save(
    sender: type[Tool], instance: Tool, created: bool, **kwargs: Any
) -> None:
    """A tool saved outside publishing moves the revision."""
    # Publishing saves exactly these two fields and bumps the revision itself.
    if not created and kwargs.get("update_fields") != frozenset({"current_version", "lifecycle"}):
        revision_bump_on_change(**kwargs)
