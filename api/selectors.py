"""What a runtime may see: decided here, in one query, for every read endpoint."""

from django.core.cache import cache
from django.db.models import QuerySet

from registry.models import Application, ContractVersion, Permission, Tool
from registry.revision import revision_current


def visible_versions(application: Application | None) -> QuerySet[ContractVersion]:
    """Approved, current contracts of active tools the application enables, allows and may risk.

    ``None`` is a staff session: every approved contract of an active tool.
    """
    versions = ContractVersion.objects.filter(
        status=ContractVersion.Status.APPROVED, tool__lifecycle=Tool.Lifecycle.ACTIVE
    ).select_related("tool", "risk")
    return within_application(versions, application)


def within_application(
    versions: QuerySet[ContractVersion], application: Application | None
) -> QuerySet[ContractVersion]:
    """The versions the application may see, each judged on its own risk and permissions.

    The one place these rules live: current contracts and their history obey the same ones.
    """
    if application is None:
        return versions
    if not application.all_tools:
        versions = versions.filter(tool__applications=application)
    if application.max_risk_id is not None:
        versions = versions.filter(risk__rank__lte=application.max_risk.rank)
    if not application.all_permissions:
        for name in forbidden_permissions(application):
            # JSON text match on the quoted name: one SQL condition per forbidden permission,
            # the same on SQLite and PostgreSQL.
            versions = versions.exclude(permissions__icontains=f'"{name}"')
    return versions


def forbidden_permissions(application: Application) -> list[str]:
    """Permission names the application may not use, cached per registry revision."""
    key = f"registry:forbidden:{application.pk}:{revision_current()}"
    names = cache.get(key)
    if names is None:
        names = sorted(
            Permission.objects.exclude(
                pk__in=application.allowed_permissions.values("pk")
            ).values_list("name", flat=True)
        )
        cache.set(key, names, 300)
    return names


def version_history(
    version: ContractVersion, application: Application | None
) -> QuerySet[ContractVersion]:
    """The approved history of the version's tool, newest first, as the application may see it."""
    history = (
        ContractVersion.objects.filter(tool_id=version.tool_id, approved_at__isnull=False)
        .select_related("tool", "risk")
        .order_by("-number")
    )
    return within_application(history, application)
