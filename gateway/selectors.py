"""What the gateway reads: who holds a token, and the tools its application may call.

A catalog is built once per application and registry revision (every publication, retirement
or change of an application moves the revision), so ``tools/list`` and each call read a dict,
not the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from rest_framework.exceptions import Throttled

from api.auth import bearer_failure_record, bearer_failures_check
from api.exports import mcp_tool
from api.models import RuntimeToken
from registry.invariants import PLAN_INVARIANT_KINDS
from registry.models import Application, RiskLevel
from registry.revision import revision_current
from registry.selectors import visible_versions
from sources.client import SyncFailed
from sources.models import McpServer
from sources.services import server_env, server_headers

from .checks import REQUIRES_WARN
from .models import ApplicationSetting
from .upstreams import HTTP, STDIO, UpstreamSpec

TOKEN_CACHE_SECONDS = 10.0
CATALOGS_KEPT = 256


@dataclass(frozen=True)
class GatewayTool:
    """One approved tool the application may call, and where its server is."""

    name: str  # the registry's name, <server>.<tool>
    local_name: str  # its name on its server
    document: dict[str, Any]
    pin: str
    listed: dict[str, Any]  # its entry in tools/list
    server_id: int
    upstream: UpstreamSpec
    problem: str  # why the upstream cannot be reached as configured, or ""
    timeout_ms: int
    max_output_bytes: int
    risk: str
    confirm: bool  # its risk level asks the user to confirm each call
    counted: bool  # a plan invariant counts its earlier calls in the session


@dataclass(frozen=True)
class Catalog:
    application_id: int
    application_name: str
    revision: int
    requires_mode: str
    calls_per_minute: int  # 0: no limit
    tools: dict[str, GatewayTool] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenCheck:
    application_id: int | None
    problem: str = ""  # "invalid_token", "insufficient_scope" or "throttled" when no application
    retry_after: int = 0


_tokens: dict[str, tuple[float, int, TokenCheck]] = {}
_catalogs: dict[tuple[int, int], Catalog] = {}


def token_cached(raw: str, *, revision: int) -> TokenCheck | None:
    """What this process read of a token at ``revision`` less than ``TOKEN_CACHE_SECONDS`` ago,
    if it selected an application; None otherwise (``token_check`` decides). No I/O: the
    gateway calls it on its event loop, for every request."""
    cached = _tokens.get(RuntimeToken.hash(raw))
    if cached is None or cached[0] <= time.monotonic() or cached[1] != revision:
        return None
    return cached[2] if cached[2].application_id is not None else None


def token_check(raw: str, *, address: str) -> TokenCheck:
    """The application a ``tools:call`` token selects, or why it selects none. An address that
    keeps sending bad tokens is throttled as on the API (``api.auth``), before any lookup."""
    digest = RuntimeToken.hash(raw)
    revision = revision_current()
    cached = _tokens.get(digest)
    now = time.monotonic()
    if cached is not None and cached[0] > now and cached[1] == revision:
        if cached[2].problem == "invalid_token":
            bearer_failure_record(address)
        return cached[2]
    try:
        bearer_failures_check(address)
    except Throttled as exc:
        return TokenCheck(None, "throttled", int(getattr(exc, "wait", None) or 1))
    token = RuntimeToken.objects.filter(token_hash=digest).first()
    if token is None or not token.is_usable:
        check = TokenCheck(None, "invalid_token")
        bearer_failure_record(address)
    elif RuntimeToken.Scope.TOOLS_CALL not in token.scopes:
        check = TokenCheck(None, "insufficient_scope")
    else:
        check = TokenCheck(token.application_id)
    if len(_tokens) > 10_000:
        _tokens.clear()
    _tokens[digest] = (now + TOKEN_CACHE_SECONDS, revision, check)
    return check


def catalog_cached(application_id: int, revision: int) -> Catalog | None:
    """The catalog this process built for the application at ``revision``, if any (no I/O)."""
    return _catalogs.get((application_id, revision))


def catalog_for(application_id: int, revision: int | None = None) -> Catalog:
    """The tools the application may call through the gateway, at ``revision`` (default: the
    current one)."""
    if revision is None:
        revision = revision_current()
    key = (application_id, revision)
    catalog = _catalogs.get(key)
    if catalog is None:
        catalog = _catalog_build(application_id, revision)
        if len(_catalogs) >= CATALOGS_KEPT:
            _catalogs.clear()
        _catalogs[key] = catalog
    return catalog


def _catalog_build(application_id: int, revision: int) -> Catalog:
    application = Application.objects.select_related("max_risk", "policy").get(pk=application_id)
    setting = ApplicationSetting.objects.filter(application=application).first()
    policy = getattr(application, "policy", None)
    mandate = policy.mandate if policy is not None else ""
    versions = (
        visible_versions(application)
        .filter(
            tool__declared__gone=False,
            tool__declared__server__enabled=True,
            tool__declared__server__transport__in=[STDIO, HTTP],
        )
        .select_related("tool__declared__server")
        .order_by("tool__name")
    )
    confirmed = set(RiskLevel.objects.filter(confirm_calls=True).values_list("name", flat=True))
    tools: dict[str, GatewayTool] = {}
    for version in versions:
        document = version.document()
        declared = version.tool.declared
        server = declared.server
        upstream, problem = _upstream(server)
        limits = document.get("resource_limits") or {}
        tools[document["name"]] = GatewayTool(
            name=document["name"],
            local_name=declared.name,
            document=document,
            # The hash of the definition its server sent when it was approved (sources' syncs).
            pin=version.definition_hash,
            listed=mcp_tool(
                document,
                mandate=mandate,
                definition=version.definition,
                pin=version.definition_hash,
            ),
            server_id=server.pk,
            upstream=upstream,
            problem=problem,
            timeout_ms=_capped(limits.get("timeout_ms"), settings.MCP_GATEWAY_TIMEOUT_MS),
            max_output_bytes=_capped(
                limits.get("max_output_bytes"), settings.MCP_GATEWAY_MAX_OUTPUT_BYTES
            ),
            risk=document["risk"],
            confirm=document["risk"] in confirmed,
            counted=any(
                isinstance(entry, dict) and entry.get("kind") in PLAN_INVARIANT_KINDS
                for entry in document.get("invariants") or []
            ),
        )
    return Catalog(
        application_id=application.pk,
        application_name=application.name,
        revision=revision,
        requires_mode=setting.requires if setting is not None else REQUIRES_WARN,
        calls_per_minute=(
            setting.calls_per_minute
            if setting is not None and setting.calls_per_minute is not None
            else settings.MCP_GATEWAY_CALLS_PER_MINUTE
        ),
        tools=tools,
    )


def _capped(value: Any, cap: int) -> int:
    """The contract's own limit, never above the gateway's cap."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return min(value, cap)
    return cap


def _upstream(server: McpServer) -> tuple[UpstreamSpec, str]:
    """How to reach the server, credentials read from the variables its record names: the
    gateway's own environment, never anything the caller sent."""
    headers: dict[str, str] = {}
    env: dict[str, str] = {}
    problem = ""
    try:
        # The checks a sync makes, made again: the allowlist, and each secret only where an
        # operator bound it (MCP_SECRET_DESTINATIONS).
        headers = server_headers(server)
        env = server_env(server) if server.transport == McpServer.Transport.STDIO else {}
    except SyncFailed as exc:
        problem = str(exc)
    spec = UpstreamSpec(
        name=server.name,
        transport=server.transport,
        command=tuple(server.command),
        url=server.url,
        headers=tuple(sorted(headers.items())),
        env=tuple(sorted(env.items())),
    )
    return spec, problem


def forget_cached() -> None:
    """Drop this process's tokens and catalogs (tests change the registry under a server)."""
    _tokens.clear()
    _catalogs.clear()
