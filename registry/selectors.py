"""Reads of the registry that other layers share."""

from django.core.cache import cache
from django.db.models import QuerySet

from .models import Application, ContractVersion, Permission, RiskLevel, StateVariable, Tool
from .revision import revision_current
from .validation import RegistryContext


def registry_context() -> RegistryContext:
    """Everything contract validation needs, read in a handful of queries."""
    context = RegistryContext()
    for name, aliases in StateVariable.objects.values_list("name", "aliases"):
        context.variables.add(name)
        for alias in aliases or []:
            context.aliases[alias] = name
    context.risks = set(RiskLevel.objects.values_list("name", flat=True))
    context.permissions = set(Permission.objects.values_list("name", flat=True))
    context.tools = set(Tool.objects.values_list("name", flat=True))
    for name, dependencies in ContractVersion.objects.filter(
        status=ContractVersion.Status.APPROVED
    ).values_list("tool__name", "dependencies"):
        context.dependencies[name] = list(dependencies or [])
    return context


def alias_map() -> dict[str, str]:
    """Every surface form (canonical names included) mapped to its canonical name."""
    mapping = {}
    for name, aliases in StateVariable.objects.values_list("name", "aliases"):
        mapping[name] = name
        for alias in aliases or []:
            mapping[alias] = name
    return mapping


def risk_ranks() -> dict[str, int]:
    return dict(RiskLevel.objects.values_list("name", "rank"))


def approved_versions() -> QuerySet[ContractVersion]:
    return (
        ContractVersion.objects.filter(status=ContractVersion.Status.APPROVED)
        .select_related("tool", "risk")
        .order_by("tool__name")
    )


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

    The one place these rules live: current contracts, their history and the traces an
    application may report all obey them.
    """
    if application is None:
        return versions
    if not application.all_tools:
        versions = versions.filter(tool__applications=application)
    ceiling = application.max_risk
    if ceiling is not None:
        versions = versions.filter(risk__rank__lte=ceiling.rank)
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


def tool_names_visible(application: Application) -> set[str]:
    """Names of the tools the application may see."""
    return set(visible_versions(application).values_list("tool__name", flat=True))
