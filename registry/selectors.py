"""Reads of the registry that other layers share."""

import copy
from collections.abc import Collection, Mapping
from typing import Any

from django.core.cache import cache
from django.db.models import Q, QuerySet

from .models import Application, ContractVersion, Permission, RiskLevel, StateVariable, Tool
from .revision import revision_current, revision_memo
from .validation import RegistryContext, export_name


def registry_context(*, document: Mapping[str, Any] | None = None) -> RegistryContext:
    """Everything contract validation needs.

    The vocabulary, risk levels, permissions and approved contracts' dependencies move the
    registry revision when they change: they are read once per revision in this process
    (``revision_memo``) and copied for each caller, who may add to them (a registry file's
    check adds the file's tools and variables). Tools are created without moving it (a
    proposal of a new tool changes nothing a runtime sees), so they are read for each call:
    for one ``document``, only the tools it names (itself and its dependencies) and any whose
    export name its name would take, by name; without one, every tool (a registry file's
    check, which reads them once for the whole file)."""
    context = _context_copy(revision_memo("registry:context", _context_read))
    tools = Tool.objects.order_by()
    if document is not None:
        name = document.get("name")
        named = {name} if isinstance(name, str) else set()
        dependencies = document.get("dependencies")
        if isinstance(dependencies, list):
            named.update(dependency for dependency in dependencies if isinstance(dependency, str))
        taken = Q(export_name=export_name(name)) if isinstance(name, str) else Q(pk__in=[])
        tools = tools.filter(Q(name__in=named) | taken)
    context.tools = set(tools.values_list("name", flat=True))
    return context


def _context_copy(context: RegistryContext) -> RegistryContext:
    # Containers copied one level down: callers add names and dependencies, never change a
    # dependency list in place.
    fresh = copy.copy(context)
    fresh.variables = set(context.variables)
    fresh.aliases = dict(context.aliases)
    fresh.risks = set(context.risks)
    fresh.permissions = set(context.permissions)
    fresh.dependencies = dict(context.dependencies)
    return fresh


def _context_read() -> RegistryContext:
    """The shared part, read after each publication. A registry may hold a hundred thousand
    variables and approved contracts, most without aliases or dependencies: every name is read
    as text, the JSON lists only where they are not empty (decoding two hundred thousand empty
    lists took seconds). A tool without dependencies is left out of ``dependencies``, which
    the cycle check reads as none (``dependency_cycle``)."""
    context = RegistryContext()
    context.variables = set(StateVariable.objects.order_by().values_list("name", flat=True))
    # In name order, as the vocabulary is listed: of two variables claiming one alias (which
    # ``StateVariable.clean`` refuses), the later name's.
    for name, aliases in StateVariable.objects.exclude(aliases=[]).values_list("name", "aliases"):
        for alias in aliases or []:
            context.aliases[alias] = name
    context.risks = set(RiskLevel.objects.values_list("name", flat=True))
    context.permissions = set(Permission.objects.values_list("name", flat=True))
    for name, dependencies in (
        ContractVersion.objects.filter(status=ContractVersion.Status.APPROVED)
        .exclude(dependencies=[])
        .order_by()
        .values_list("tool__name", "dependencies")
    ):
        if dependencies:
            context.dependencies[name] = list(dependencies)
    return context


def alias_map() -> dict[str, str]:
    """Every surface form (canonical names included) mapped to its canonical name: read once
    per registry revision in a process and shared, so callers must not change it."""
    return revision_memo("registry:aliases", _alias_map_read)


def _alias_map_read() -> dict[str, str]:
    """As ``_context_read`` reads the vocabulary: every name as text, the JSON lists of the
    variables with aliases only; in the vocabulary's order, so of an alias that is also a
    name, or claimed twice, the later variable's reading wins, as when every row was decoded."""
    aliases_of = dict(StateVariable.objects.exclude(aliases=[]).values_list("name", "aliases"))
    mapping = {}
    for name in StateVariable.objects.values_list("name", flat=True):
        mapping[name] = name
        for alias in aliases_of.get(name) or []:
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


def tool_names_visible(
    application: Application, *, among: Collection[str] | None = None
) -> set[str]:
    """Names of the tools the application may see; only of those ``among`` when given (one
    query by name, whatever the registry's size)."""
    return set(tool_ids_visible(application, among=among))


def tool_ids_visible(
    application: Application, *, among: Collection[str] | None = None
) -> dict[str, int]:
    """The tools the application may see, name -> id; only those ``among`` when given (one
    query by name, whatever the registry's size)."""
    versions = visible_versions(application)
    if among is not None:
        versions = versions.filter(tool__name__in=among)
    return dict(versions.order_by().values_list("tool__name", "tool_id"))


def tools_by_name(names: Collection[str]) -> dict[str, tuple[int, int | None]]:
    """The registered tools among ``names``: name -> (id, current version id or None)."""
    return {
        name: (pk, current)
        for name, pk, current in Tool.objects.filter(name__in=names)
        .order_by()
        .values_list("name", "pk", "current_version_id")
    }
