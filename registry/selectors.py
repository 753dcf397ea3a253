"""Reads of the registry that other layers share."""

from django.db.models import QuerySet

from .models import ContractVersion, Permission, RiskLevel, StateVariable, Tool
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
