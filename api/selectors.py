"""What a runtime may see, for every read endpoint.

The visibility rule itself lives in ``registry.selectors`` (learning applies it to the traces an
application may report, too); the API's reads use it from here.
"""

from django.db.models import QuerySet

from registry.models import Application, ContractVersion
from registry.selectors import visible_versions, within_application

__all__ = ["version_history", "visible_versions"]


def version_history(
    version: ContractVersion, application: Application | None
) -> QuerySet[ContractVersion]:
    """The approved history of the version's tool, newest first, as the application may see it:
    each version is judged on its own risk and permissions."""
    history = (
        ContractVersion.objects.filter(tool_id=version.tool_id, approved_at__isnull=False)
        .select_related("tool", "risk")
        .order_by("-number")
    )
    return within_application(history, application)
