"""What a runtime may see, for every read endpoint.

The visibility rule itself lives in ``registry.selectors`` (learning applies it to the traces an
application may report, too); the API's reads use it from here.
"""

from django.db.models import QuerySet

from registry.models import ContractVersion
from registry.selectors import forbidden_permissions, visible_versions

__all__ = ["forbidden_permissions", "version_history", "visible_versions"]


def version_history(version: ContractVersion) -> QuerySet[ContractVersion]:
    return (
        ContractVersion.objects.filter(tool_id=version.tool_id, approved_at__isnull=False)
        .select_related("tool", "risk")
        .order_by("-number")
    )
