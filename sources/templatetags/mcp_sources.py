"""``{% declared_drift tool %}``: what a tool's MCP server now declares, for the tool's page
(beside the drift its calls show). A template tag, so learning's page needs no import of
sources: the page names the tag, and a registry without the app shows nothing."""

from typing import Any

from django import template

from registry.models import Tool
from reviews.models import ReviewTicket

from ..models import DeclaredTool, McpServer

register = template.Library()


@register.inclusion_tag("sources/declared_drift.html")
def declared_drift(tool: Tool) -> dict[str, Any]:
    declared = (
        DeclaredTool.objects.select_related("server", "ticket", "tool__current_version")
        .filter(tool=tool)
        .first()
    )
    if declared is None:
        return {"declared": None}
    approved = declared.tool.current_version
    return {
        "declared": declared,
        "server": declared.server,
        "matches": approved is not None and approved.definition_hash == declared.definition_hash,
        "approved": approved,
        "ticket": declared.ticket,
    }


@register.inclusion_tag("sources/desk_failures.html")
def mcp_server_failures() -> dict[str, Any]:
    """The desk's card of MCP servers whose last sync failed (nothing when none did)."""
    failed = McpServer.objects.filter(enabled=True, last_sync_outcome=McpServer.Outcome.FAILED)
    return {"failed": list(failed[:DESK_FAILURES]), "count": failed.count()}


DESK_FAILURES = 10


@register.inclusion_tag("sources/ticket_source.html")
def declared_source(ticket: ReviewTicket) -> dict[str, Any]:
    """On a ticket's page: the MCP server that declared the proposal, its pin, and whether the
    change breaks callers or only widens (from the ticket's evidence; nothing for others)."""
    evidence = ticket.evidence if isinstance(ticket.evidence, dict) else {}
    if evidence.get("source") != "mcp":
        return {"source": None}
    compatibility = evidence.get("compatibility")
    compatibility = compatibility if isinstance(compatibility, dict) else {}
    return {
        "source": evidence,
        "server": McpServer.objects.filter(name=evidence.get("server")).first(),
        "breaking": [str(item) for item in compatibility.get("breaking") or []],
        "widening": [str(item) for item in compatibility.get("widening") or []],
        "compared": bool(compatibility),
    }
