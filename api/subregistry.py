"""The MCP Registry API's read endpoints as this registry serves them: one entry per MCP server
an application may use, with its approved tools and their pins.

Pure: no Django. A server is served as ``tool-contract-registry/<server>``, in one version (the
server as configured now): the version its MCP registry published when it was added with
``mcp_servers add --from-registry`` (and that ``server.json``'s description, packages, remotes,
title, repository, website and icons), else ``0.0.0``, with its URL as a remote when it speaks
HTTP (header names only, never values); a stdio server added by hand shows no command, which is
an operator's setting. ``_meta`` carries the official registry's status keys and, under
``tool-contract-registry/contracts``, each approved tool: its name here and on its server, its
contract version and its pin (``registry/pins.py``), with the registry the server came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "tool-contract-registry"
META_KEY = f"{NAMESPACE}/contracts"
OFFICIAL_META_KEY = "io.modelcontextprotocol.registry/official"
UNPUBLISHED_VERSION = "0.0.0"
LATEST = "latest"
# What a registry's server.json says about running the server, served as it was read.
COPIED_KEYS = ("title", "repository", "websiteUrl", "icons", "packages", "remotes")
MAX_DESCRIPTION_CHARS = 100  # ServerDetail.description's maxLength
REMOTE_TYPES = {"http": "streamable-http", "sse": "sse"}


@dataclass(frozen=True)
class ApprovedTool:
    name: str  # in the registry: <server>.<tool>
    server_tool: str  # its name on its server
    version: int
    pin: str
    risk: str
    approved_at: datetime | None


@dataclass(frozen=True)
class ServedServer:
    local_name: str
    transport: str  # stdio | http | sse
    url: str
    headers: Sequence[str]  # header names; their values stay in the worker's environment
    registry_entry: Mapping[str, Any]
    created_at: datetime
    tools: Sequence[ApprovedTool]

    @property
    def name(self) -> str:
        return f"{NAMESPACE}/{self.local_name}"

    @property
    def version(self) -> str:
        return str(self.registry_entry.get("version") or UNPUBLISHED_VERSION)

    @property
    def updated_at(self) -> datetime:
        approved = [tool.approved_at for tool in self.tools if tool.approved_at is not None]
        return max([self.created_at, *approved])


def server_response(server: ServedServer) -> dict[str, Any]:
    """One ``ServerResponse`` of the API: the server's ``server.json`` and its ``_meta``."""
    published: Mapping[str, Any] = server.registry_entry.get("server") or {}
    detail: dict[str, Any] = {
        "name": server.name,
        "description": _description(server, published),
        "version": server.version,
    }
    if published:
        detail |= {key: published[key] for key in COPIED_KEYS if key in published}
    elif server.transport in REMOTE_TYPES and server.url:
        remote: dict[str, Any] = {"type": REMOTE_TYPES[server.transport], "url": server.url}
        if server.headers:
            remote["headers"] = [
                {"name": header, "isRequired": True, "isSecret": True} for header in server.headers
            ]
        detail["remotes"] = [remote]
    contracts: dict[str, Any] = {
        "server": server.local_name,
        "tools": [
            {
                "name": tool.name,
                "serverTool": tool.server_tool,
                "version": tool.version,
                "pin": tool.pin,
                "risk": tool.risk,
            }
            for tool in server.tools
        ],
    }
    if server.registry_entry:
        contracts["origin"] = {
            key: server.registry_entry[key]
            for key in ("registry", "name", "version")
            if key in server.registry_entry
        }
    return {
        "server": detail,
        "_meta": {
            OFFICIAL_META_KEY: {
                "status": "active",
                "publishedAt": _timestamp(server.created_at),
                "updatedAt": _timestamp(server.updated_at),
                "isLatest": True,
            },
            META_KEY: contracts,
        },
    }


def _description(server: ServedServer, published: Mapping[str, Any]) -> str:
    text = published.get("description")
    if isinstance(text, str) and text:
        return text[:MAX_DESCRIPTION_CHARS]
    count = len(server.tools)
    return f"MCP server {server.local_name}: {count} approved tool{'s' * (count != 1)}"[
        :MAX_DESCRIPTION_CHARS
    ]


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Page:
    servers: list[ServedServer]
    next_cursor: str


def servers_page(
    servers: Sequence[ServedServer],
    *,
    cursor: str = "",
    limit: int,
    search: str = "",
    version: str = "",
    updated_since: datetime | None = None,
) -> Page:
    """A page of ``servers`` (sorted by name) as ``GET /v0/servers`` filters and pages them: the
    cursor is the name of the last server of the previous page."""
    chosen = [
        server
        for server in sorted(servers, key=lambda s: s.name)
        if server.name > cursor
        and (not search or search.lower() in f"{server.name}\n{_description_of(server)}".lower())
        and (not version or version == LATEST or version == server.version)
        and (updated_since is None or server.updated_at >= updated_since)
    ]
    page = chosen[:limit]
    more = len(chosen) > limit
    return Page(servers=page, next_cursor=page[-1].name if more and page else "")


def _description_of(server: ServedServer) -> str:
    return _description(server, server.registry_entry.get("server") or {})
