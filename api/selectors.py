"""What a runtime may see, for every read endpoint.

The visibility rule itself lives in ``registry.selectors`` (learning applies it to the traces an
application may report, too); the API's reads use it from here.
"""

from django.db.models import QuerySet

from registry.models import Application, ContractVersion
from registry.selectors import visible_versions, within_application
from sources.models import McpServer

from .subregistry import ApprovedTool, ServedServer

__all__ = ["mcp_servers_visible", "version_history", "visible_versions"]


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


def mcp_servers_visible(
    application: Application | None, *, name: str | None = None
) -> list[ServedServer]:
    """The enabled MCP servers (or the one so ``name``d) with at least one approved tool the
    application may see, each with those tools (by name): what the MCP Registry API's endpoints
    serve it."""
    versions = (
        visible_versions(application)
        .filter(tool__declared__server__enabled=True)
        .select_related("tool__declared__server")
        .order_by("tool__name")
    )
    if name is not None:
        versions = versions.filter(tool__declared__server__name=name)
    grouped: dict[int, tuple[McpServer, list[ApprovedTool]]] = {}
    for version in versions:
        declared = version.tool.declared
        _, tools = grouped.setdefault(declared.server_id, (declared.server, []))
        tools.append(
            ApprovedTool(
                name=version.tool.name,
                server_tool=declared.name,
                version=version.number,
                pin=version.definition_hash,
                risk=version.risk.name,
                approved_at=version.approved_at,
            )
        )
    return [
        ServedServer(
            local_name=server.name,
            transport=server.transport,
            url=server.url,
            headers=tuple(server.headers),
            registry_entry=server.registry_entry,
            created_at=server.created_at,
            tools=tuple(tools),
        )
        for server, tools in grouped.values()
    ]
