"""Writes to the registry: registry files, contract versions and the publish primitive.

The registry owns contracts but not the decision to change one: ``reviews`` decides (tickets,
approvals, drift) and calls the primitives here, each under the tool's row lock, which
serialises version numbering and publishing per tool. Locks are always taken tool first, then
tickets, so two reviewers never deadlock.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from .contract import ContractDocument, with_defaults
from .models import (
    Application,
    ContractVersion,
    Permission,
    PlanningPolicy,
    RiskLevel,
    StateVariable,
    Tool,
)
from .revision import revision_bump
from .selectors import approved_versions, registry_context
from .signals import contract_published
from .validation import (
    VARIABLE_NAME,
    ContractInvalid,
    RegistryContext,
    contract_check,
    export_clash,
    export_name,
    policy_errors,
)


class ImportInvalid(Exception):
    """Every problem of a registry file, one line each: where, which field, why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class PublishError(Exception):
    """The version cannot be published (no longer a proposal, or based on a superseded one)."""


@dataclass
class RegistryFile:
    """A registry file, checked: its sections and the context its contracts were checked in."""

    variables: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    documents: list[ContractDocument] = field(default_factory=list)
    applications: list[dict[str, Any]] = field(default_factory=list)
    context: RegistryContext = field(default_factory=RegistryContext)


def contract_validate(
    *, document: dict[str, Any], context: RegistryContext | None = None
) -> ContractDocument:
    """The normalised document, or ContractInvalid naming the tool, field and reason."""
    normalised, errors = contract_check(
        document, context=context or registry_context(document=document)
    )
    if errors:
        raise ContractInvalid(str(document.get("name", "?")), errors)
    return normalised  # type: ignore[return-value]  # contract_check checked every key


def registry_file_check(*, data: Any) -> RegistryFile:
    """Check a registry file (or a bare list of contracts) whole; ImportInvalid lists every
    problem by where, field and reason. Nothing is written."""
    if isinstance(data, list):
        data = {"tools": data}
    if not isinstance(data, dict):
        raise ImportInvalid(["file: must be a JSON object or a list of contract documents"])
    problems: list[str] = []
    unknown = sorted(set(data) - {"state_variables", "permissions", "tools", "applications"})
    problems += [f"file: unknown key {key!r}" for key in unknown]

    checked = RegistryFile(context=registry_context())
    context = checked.context
    checked.variables = _section(data, "state_variables", problems)
    for index, variable in enumerate(checked.variables):
        where = f"state_variables[{index}]"
        if not isinstance(variable, dict) or not isinstance(variable.get("name"), str):
            problems.append(f"{where}: name: required")
            continue
        name = variable["name"]
        if not VARIABLE_NAME.fullmatch(name):
            problems.append(f"{where} ({name}): name: not a valid variable name")
        aliases = variable.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
            problems.append(f"{where} ({name}): aliases: must be a list of names")
            continue
        for alias in aliases:
            owner = context.canonical(alias)
            if owner not in (None, name):
                problems.append(f"{where} ({name}): aliases: {alias!r} already names {owner!r}")
            context.aliases[alias] = name
        if name in context.aliases and context.aliases[name] != name:
            problems.append(
                f"{where} ({name}): name: already an alias of {context.aliases[name]!r}"
            )
        context.variables.add(name)

    checked.permissions = _section(data, "permissions", problems)
    for index, permission in enumerate(checked.permissions):
        if not isinstance(permission, dict) or not isinstance(permission.get("name"), str):
            problems.append(f"permissions[{index}]: name: required")
        else:
            context.permissions.add(permission["name"])

    tools = _section(data, "tools", problems)
    names = [tool.get("name") for tool in tools if isinstance(tool, dict)]
    context.tools.update(name for name in names if isinstance(name, str))
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            dependencies = tool.get("dependencies", [])
            if isinstance(dependencies, list):
                context.dependencies[tool["name"]] = [d for d in dependencies if isinstance(d, str)]
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        normalised, errors = contract_check(tool, context=context)
        label = tool.get("name") if isinstance(tool, dict) else None
        label = label if isinstance(label, str) else f"tools[{index}]"
        if label in seen:
            problems.append(f"{label}: name: appears twice in the file")
        seen.add(label)
        problems += [
            f"{label}: {name}: {reason}" for name, reasons in errors.items() for reason in reasons
        ]
        checked.documents.append(normalised)  # type: ignore[arg-type]

    checked.applications = _section(data, "applications", problems)
    for index, application in enumerate(checked.applications):
        problems += _application_problems(index, application, context)

    if problems:
        raise ImportInvalid(problems)
    return checked


@transaction.atomic
def vocabulary_save(*, checked: RegistryFile) -> None:
    """The file's state variables (aliases merged) and permissions."""
    for variable in checked.variables:
        obj, _ = StateVariable.objects.get_or_create(name=variable["name"])
        obj.description = variable.get("description", obj.description)
        obj.aliases = sorted(set(obj.aliases) | set(variable.get("aliases", [])))
        obj.save()
    for permission in checked.permissions:
        Permission.objects.update_or_create(
            name=permission["name"], defaults={"description": permission.get("description", "")}
        )


@transaction.atomic
def applications_save(*, checked: RegistryFile) -> list[Application]:
    return [_application_save(application) for application in checked.applications]


def _section(data: dict[str, Any], key: str, problems: list[str]) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        problems.append(f"file: {key}: must be a list")
        return []
    return value


def _application_problems(index: int, application: Any, context: RegistryContext) -> list[str]:
    if not isinstance(application, dict) or not isinstance(application.get("name"), str):
        return [f"applications[{index}]: name: required"]
    where = f"application {application['name']}"
    problems = []
    risk = application.get("max_risk")
    if risk is not None and risk not in context.risks:
        problems.append(f"{where}: max_risk: unknown risk level {risk!r}")
    for permission in application.get("allowed_permissions", []):
        if permission not in context.permissions:
            problems.append(f"{where}: allowed_permissions: unknown permission {permission!r}")
    enabled = application.get("enabled_tools")
    for tool in enabled or []:
        if tool not in context.tools:
            problems.append(f"{where}: enabled_tools: unknown tool {tool!r}")
    policy = application.get("policy")
    if policy is not None:
        if not isinstance(policy, dict):
            problems.append(f"{where}: policy: must be an object")
        else:
            for name, reasons in policy_errors(policy).items():
                problems += [f"{where}: policy.{name}: {reason}" for reason in reasons]
    return problems


def _application_save(data: dict[str, Any]) -> Application:
    application, _ = Application.objects.update_or_create(
        name=data["name"],
        defaults={
            "description": data.get("description", ""),
            "max_risk": RiskLevel.objects.filter(name=data.get("max_risk")).first(),
            "all_tools": "enabled_tools" not in data,
            "all_permissions": "allowed_permissions" not in data,
        },
    )
    application.allowed_permissions.set(
        Permission.objects.filter(name__in=data.get("allowed_permissions", []))
    )
    application.enabled_tools.set(Tool.objects.filter(name__in=data.get("enabled_tools", [])))
    policy = data.get("policy")
    if policy is not None:
        PlanningPolicy.objects.update_or_create(
            application=application,
            defaults={
                "mandate": policy.get("mandate", ""),
                "rules": policy.get("rules", []),
                "config_params": policy.get("config_params", []),
            },
        )
    return application


def tool_lock(*, tool_id: int) -> Tool:
    """The tool row, locked until the transaction ends (``FOR NO KEY UPDATE``)."""
    return Tool.objects.select_for_update(no_key=True).get(pk=tool_id)


def tool_lock_or_create(*, name: str) -> Tool:
    """The tool row of ``name`` (created without a version if missing), locked like
    ``tool_lock``: two workers proposing the same new tool queue here."""
    return tool_lock(tool_id=_tool_get_or_create(name).pk)


def _tool_get_or_create(name: str) -> Tool:
    """The tool named ``name``, created if missing. Validation refuses a name exporting as
    another tool's; a tool created meanwhile by another transaction is refused here, by the
    unique export name, in the same words."""
    try:
        tool, _ = Tool.objects.get_or_create(name=name)
    except IntegrityError:
        other = (
            Tool.objects.filter(export_name=export_name(name))
            .exclude(name=name)
            .values_list("name", flat=True)
            .first()
        )
        if other is None:
            raise
        raise ContractInvalid(name, {"name": [export_clash(name, other)]}) from None
    return tool


@transaction.atomic
def state_variables_add(*, names: Iterable[str], description: str) -> dict[str, str]:
    """Each name mapped to its canonical variable, created when the vocabulary lacks it.

    A name that is already a variable or an alias maps to that variable; a name that cannot be
    a variable (not a valid variable name, too long) is left out of the answer.
    """
    context = registry_context(document={})  # the vocabulary only: no tool is named
    added: dict[str, str] = {}
    for name in names:
        canonical = context.canonical(name)
        if canonical is None:
            if not VARIABLE_NAME.fullmatch(name) or len(name) > MAX_VARIABLE_NAME:
                continue
            variable = StateVariable(name=name, description=description)
            variable.full_clean()
            variable.save()
            context.variables.add(name)
            canonical = name
        added[name] = canonical
    return added


MAX_VARIABLE_NAME = 100  # StateVariable.name's max_length


def _next_number(tool: Tool) -> int:
    return int(tool.versions.aggregate(n=Max("number"))["n"] or 0) + 1


@transaction.atomic
def contract_version_create(
    *,
    document: ContractDocument,
    author: User | None,
    source: str = ContractVersion.Source.MANUAL,
    definition: dict[str, Any] | None = None,
) -> ContractVersion | None:
    """A new proposed version of a validated document, based on the tool's current version.

    ``definition`` is the MCP definition its server sent, when a server declared it; without
    one, the version keeps its base's (a person's edit changes no server's declaration). The
    tool is created if missing, and locked. None when the document and the definition equal
    the current version's (same content hash, same pin): nothing to propose.
    """
    tool = tool_lock(tool_id=_tool_get_or_create(document["name"]).pk)
    base = tool.current_version
    fields = with_defaults(document)
    version = ContractVersion(
        tool=tool,
        number=_next_number(tool),
        status=ContractVersion.Status.PROPOSED,
        source=source,
        based_on=base,
        author=author,
        risk=RiskLevel.objects.get(name=document["risk"]),
        lifecycle=fields["status"],
        **{name: fields[name] for name in ContractVersion.CONTRACT_FIELDS},
    )
    if definition is None and base is not None:
        definition = base.definition
    version.definition = definition
    version.content_hash = version.compute_hash()
    if (
        base is not None
        and base.content_hash == version.content_hash
        and base.definition_hash == version.definition_hash
    ):
        return None
    version.save()
    return version


@transaction.atomic
def contract_version_rebase(*, version: ContractVersion) -> ContractVersion:
    """The same content proposed again on the tool's current version; the old one superseded."""
    tool = tool_lock(tool_id=version.tool_id)
    rebased = ContractVersion.objects.get(pk=version.pk)
    rebased.pk = None
    rebased.number = _next_number(tool)
    rebased.based_on = tool.current_version
    rebased.status = ContractVersion.Status.PROPOSED
    rebased.save()
    ContractVersion.objects.filter(pk=version.pk).update(status=ContractVersion.Status.SUPERSEDED)
    return rebased


@transaction.atomic
def contract_version_replace(
    *,
    version: ContractVersion,
    document: ContractDocument,
    definition: dict[str, Any] | None = None,
) -> ContractVersion:
    """A proposal's content replaced: a new proposed version of ``document`` (same author,
    source and, unless ``definition`` is given, declared definition) on the tool's current
    version, and the old proposal superseded."""
    tool = tool_lock(tool_id=version.tool_id)
    if document["name"] != tool.name:
        raise PublishError(f"the new content names {document['name']}, not {tool.name}")
    claimed = ContractVersion.objects.filter(
        pk=version.pk, status=ContractVersion.Status.PROPOSED
    ).update(status=ContractVersion.Status.SUPERSEDED)
    if claimed != 1:
        raise PublishError("its version is no longer a proposal")
    replacement = contract_version_create(
        document=document,
        author=version.author,
        source=version.source,
        definition=definition if definition is not None else version.definition,
    )
    if replacement is None:
        raise PublishError("the new content equals the approved version")
    return replacement


@transaction.atomic
def contract_version_definition_record(
    *, version: ContractVersion, definition: dict[str, Any]
) -> bool:
    """Record the MCP definition of a version stored before versions kept one, once: the
    version's contract is unchanged, only its pin is now computed over what its server sends
    (docs/operations.md, "Pins"). False when the version has a definition already."""
    recorded = ContractVersion.objects.filter(pk=version.pk, definition__isnull=True).update(
        definition=definition
    )
    if recorded:
        version.definition = definition
        revision_bump()  # the pin runtimes read has changed
    return recorded == 1


@transaction.atomic
def contract_version_publish(*, version_id: int, base_id: int | None) -> ContractVersion:
    """Make a proposed version the tool's approved, current one, all or nothing.

    ``base_id`` is the version the proposal was written against: it must still be current.
    The partial unique index "one approved version per tool" backs this under concurrency.
    """
    version = ContractVersion.objects.select_related("tool", "risk").get(pk=version_id)
    tool = tool_lock(tool_id=version.tool_id)
    previous = tool.current_version
    if base_id != (previous.pk if previous else None):
        raise PublishError("it is based on a superseded version: rebase it first")
    now = timezone.now()
    ContractVersion.objects.filter(tool=tool, status=ContractVersion.Status.APPROVED).update(
        status=ContractVersion.Status.SUPERSEDED
    )
    published = ContractVersion.objects.filter(
        pk=version_id, status=ContractVersion.Status.PROPOSED
    ).update(status=ContractVersion.Status.APPROVED, approved_at=now)
    if published != 1:
        raise PublishError("its version is no longer a proposal")
    version.refresh_from_db()
    tool.current_version = version
    tool.lifecycle = version.lifecycle
    tool.save(update_fields=["current_version", "lifecycle"])
    revision_bump()
    transaction.on_commit(
        lambda: contract_published.send(sender=ContractVersion, version_id=version.pk)
    )
    return version


def contracts_export() -> list[dict[str, Any]]:
    """The approved contracts as contract documents, with their version numbers."""
    return [{**version.document(), "version": version.number} for version in approved_versions()]


@transaction.atomic
def state_variable_alias_add(*, variable: StateVariable, alias: str) -> StateVariable:
    """Add one surface form to a variable; a name another variable already uses is refused."""
    locked = StateVariable.objects.select_for_update().get(pk=variable.pk)
    if alias not in locked.aliases:
        locked.aliases = [*locked.aliases, alias]
        locked.full_clean()
        locked.save(update_fields=["aliases"])
    return locked


@transaction.atomic
def state_variable_create(*, name: str, description: str = "") -> StateVariable:
    """Add one word to the vocabulary; a name already used (as a name or an alias) is refused."""
    variable = StateVariable(name=name, description=description)
    variable.full_clean()
    variable.save()
    return variable
