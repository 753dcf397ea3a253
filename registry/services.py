"""Writes to the registry: the import of a registry file, all or nothing."""

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .models import Application, Permission, PlanningPolicy, RiskLevel, StateVariable, Tool
from .selectors import registry_context
from .validation import VARIABLE_NAME, contract_check, policy_errors


class ImportInvalid(Exception):
    """Every problem of a registry file, one line each: where, which field, why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class ImportResult:
    variables: int = 0
    permissions: int = 0
    proposed: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    applications: list[str] = field(default_factory=list)


@transaction.atomic
def registry_import(
    *, data: Any, approve: bool = False, actor: AbstractBaseUser | None = None
) -> ImportResult:
    """Import a registry file (or a bare list of contracts); nothing is written if anything fails.

    Without ``approve`` each new or changed contract becomes a proposal with a review ticket;
    with it, each is published at once (an operator's bootstrap), audited as such.
    """
    from reviews.services import contract_propose, contract_publish

    if isinstance(data, list):
        data = {"tools": data}
    if not isinstance(data, dict):
        raise ImportInvalid(["file: must be a JSON object or a list of contract documents"])
    problems: list[str] = []
    unknown = sorted(set(data) - {"state_variables", "permissions", "tools", "applications"})
    problems += [f"file: unknown key {key!r}" for key in unknown]

    context = registry_context()
    variables = _section(data, "state_variables", problems)
    for index, variable in enumerate(variables):
        where = f"state_variables[{index}]"
        if not isinstance(variable, dict) or not isinstance(variable.get("name"), str):
            problems.append(f"{where}: name: required")
            continue
        name = variable["name"]
        if not VARIABLE_NAME.match(name):
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

    permissions = _section(data, "permissions", problems)
    for index, permission in enumerate(permissions):
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
    documents = []
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
        documents.append(normalised)

    applications = _section(data, "applications", problems)
    for index, application in enumerate(applications):
        problems += _application_problems(index, application, context)

    if problems:
        raise ImportInvalid(problems)

    result = ImportResult()
    for variable in variables:
        obj, _ = StateVariable.objects.get_or_create(name=variable["name"])
        obj.description = variable.get("description", obj.description)
        obj.aliases = sorted(set(obj.aliases) | set(variable.get("aliases", [])))
        obj.save()
        result.variables += 1
    for permission in permissions:
        Permission.objects.update_or_create(
            name=permission["name"], defaults={"description": permission.get("description", "")}
        )
        result.permissions += 1
    for document in documents:
        ticket = contract_propose(document=document, author=actor, source="import", context=context)
        if ticket is None:
            result.unchanged.append(document["name"])
        elif approve:
            contract_publish(ticket=ticket, actor=actor)
            result.published.append(document["name"])
        else:
            result.proposed.append(document["name"])
    for application in applications:
        _application_save(application)
        result.applications.append(application["name"])
    return result


def _section(data: dict, key: str, problems: list[str]) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        problems.append(f"file: {key}: must be a list")
        return []
    return value


def _application_problems(index: int, application: Any, context) -> list[str]:
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


def _application_save(data: dict) -> Application:
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


def contracts_export() -> list[dict]:
    """The approved contracts as contract documents, with their version numbers."""
    from .selectors import approved_versions

    return [{**version.document(), "version": version.number} for version in approved_versions()]
