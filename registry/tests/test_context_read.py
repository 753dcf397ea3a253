"""The shared part of the validation context (``registry.selectors._context_read``) reads the
JSON lists of the variables with aliases and the contracts with dependencies only: it must
validate as the whole read did, which decoded every row's list."""

import pytest

from registry.models import ContractVersion, Permission, RiskLevel, StateVariable, Tool
from registry.selectors import _alias_map_read, _context_read
from registry.validation import RegistryContext, dependency_cycle, export_name

pytestmark = pytest.mark.django_db


def context_read_whole() -> RegistryContext:
    """The read before: every variable's aliases and every approved contract's dependencies."""
    context = RegistryContext()
    for name, aliases in StateVariable.objects.values_list("name", "aliases"):
        context.variables.add(name)
        for alias in aliases or []:
            context.aliases[alias] = name
    context.risks = set(RiskLevel.objects.values_list("name", flat=True))
    context.permissions = set(Permission.objects.values_list("name", flat=True))
    for name, dependencies in ContractVersion.objects.filter(
        status=ContractVersion.Status.APPROVED
    ).values_list("tool__name", "dependencies"):
        context.dependencies[name] = list(dependencies or [])
    return context


def version(name: str, status: str, dependencies: list[str], number: int = 1) -> None:
    tool, _ = Tool.objects.get_or_create(name=name, defaults={"export_name": export_name(name)})
    made = ContractVersion(
        tool=tool, number=number, description=f"{name} {number}.", input_schema={},
        risk=RiskLevel.objects.get(name="low"), status=status, dependencies=dependencies,
    )  # fmt: skip
    made.content_hash = made.compute_hash()
    made.save()


def test_it_validates_as_the_whole_read_did():
    StateVariable.objects.create(name="event_id", aliases=["eventId", "evt_id"])
    StateVariable.objects.create(name="event_query", aliases=[])
    StateVariable.objects.create(name="user_id")
    StateVariable.objects.create(name="zone", aliases=["tz", "eventId"])  # a clash clean refuses
    Permission.objects.create(name="read")
    version("a.one", "approved", ["a.two"])
    version("a.two", "approved", [])
    version("a.three", "approved", ["a.one", "a.two"])
    version("a.four", "superseded", ["a.three"])
    version("a.four", "approved", [], number=2)
    version("a.five", "proposed", ["a.one"])

    read, whole = _context_read(), context_read_whole()

    assert (read.variables, read.aliases) == (whole.variables, whole.aliases)
    assert read.aliases["eventId"] == "zone"  # the later name's, as before
    assert (read.risks, read.permissions) == (whole.risks, whole.permissions)
    # Only the contracts with dependencies are listed; the others have none either way.
    assert read.dependencies == {"a.one": ["a.two"], "a.three": ["a.one", "a.two"]}
    for name in ["a.one", "a.two", "a.three", "a.four", "a.five", "a.six"]:
        assert read.dependencies.get(name, []) == whole.dependencies.get(name, [])
        for dependencies in (["a.three"], ["a.one"], ["a.four"], []):
            assert dependency_cycle(name, dependencies, read.dependencies) == dependency_cycle(
                name, dependencies, whole.dependencies
            )
    for name in ["event_id", "eventId", "evt_id", "tz", "user_id", "nothing", "event_query"]:
        assert read.canonical(name) == whole.canonical(name)


def alias_map_read_whole() -> dict[str, str]:
    """The alias map's read before: every variable's aliases decoded."""
    mapping = {}
    for name, aliases in StateVariable.objects.values_list("name", "aliases"):
        mapping[name] = name
        for alias in aliases or []:
            mapping[alias] = name
    return mapping


def test_the_alias_map_reads_as_the_whole_read_did():
    StateVariable.objects.create(name="event_id", aliases=["eventId", "evt_id", "zone"])
    StateVariable.objects.create(name="event_query", aliases=[])
    StateVariable.objects.create(name="user_id")
    # Clashes clean refuses: an alias claimed twice, a name that is an earlier alias.
    StateVariable.objects.create(name="zone", aliases=["tz", "eventId", "user_id"])

    read = _alias_map_read()

    assert read == alias_map_read_whole()
    assert list(read.items()) == list(alias_map_read_whole().items())
    assert (read["eventId"], read["zone"], read["user_id"]) == ("zone", "zone", "zone")
