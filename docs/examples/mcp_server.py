"""The registry's tools as an MCP server over stdio, for any MCP client.

    pip install -r docs/examples/mcp_server-requirements.txt
    REGISTRY_URL=http://127.0.0.1:8000/api/v1 REGISTRY_TOKEN=<runtime token> \\
        python docs/examples/mcp_server.py

``tools/list`` answers with ``GET export/mcp/``: the approved contracts the token's application
may see, their descriptions (invariant rules and the application's mandate included) and
annotations, exactly as exported. The registry holds contracts, not implementations, so
``tools/call`` runs nothing: it checks the call against the tool's contract and the
application's planning policy (``POST plans/validate/``, a plan of one step from an empty
state: an MCP call carries none, so what the tool requires is reported with the tools that
produce it) and answers with that verdict as an
error result (``isError``), naming the tool, whether the call would be accepted and every
violation. A runtime that runs the tools keeps ``list_tools`` and puts its own ``call_tool``
after the check. The server polls ``GET revision/`` every ``REGISTRY_POLL_SECONDS`` (10) and,
when it moves, sends ``notifications/tools/list_changed`` so clients list the tools again.

Only ``mcp`` and ``httpx`` (``mcp_server-requirements.txt``) are needed, not the registry's
code; ``.ci/run`` builds a clean virtualenv from that file and ``api/tests/test_sdk_live.py`` runs
this server from it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged


class Registry:
    """The two reads this server makes, with the runtime's token."""

    def __init__(self, url: str, token: str):
        self.client = httpx.AsyncClient(
            base_url=url.rstrip("/") + "/",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    async def revision(self) -> int:
        response = await self.client.get("revision/")
        response.raise_for_status()
        return int(response.json()["revision"])

    async def tools(self) -> list[dict[str, Any]]:
        response = await self.client.get("export/mcp/")
        response.raise_for_status()
        return response.json()["tools"]

    async def check(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.post(
            "plans/validate/", json={"plan": [{"tool": name, "args": arguments}]}
        )
        response.raise_for_status()
        return response.json()


def verdict_text(name: str, checked: dict[str, Any]) -> str:
    if checked["valid"]:
        head = f"{name} was not run: the registry holds contracts, not implementations."
        head += " The call is valid under its approved contract and the application's policy."
    else:
        head = f"{name} was not run: the call breaks its contract or the application's policy."
    lines = [head]
    for violation in checked["violations"]:
        step = "plan" if violation["step"] is None else f"step {violation['step']}"
        lines.append(f"- {violation['action']} ({step}, {violation['invariant']}): "
                     f"{violation['rule']}")  # fmt: skip
    lines.append("Checked call: " + json.dumps(checked["plan"], sort_keys=True))
    return "\n".join(lines)


class ListChanged:
    """Tells clients when the registry revision moves: ``notifications/tools/list_changed`` to
    each handshake-era session seen, and a ``ToolsListChanged`` event on the bus that serves
    ``subscriptions/listen`` streams (the 2026-07-28 era)."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.sessions: list[Any] = []

    def seen(self, ctx: Any) -> None:
        session = getattr(ctx, "session", None)
        if session is not None and all(known is not session for known in self.sessions):
            self.sessions.append(session)

    async def announce(self) -> None:
        await self.bus.publish(ToolsListChanged())
        for session in list(self.sessions):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a closed session: forget it
                self.sessions.remove(session)

    async def watch(self, registry: Registry, every: float) -> None:
        """Poll ``GET revision/`` and announce each move (a registry that does not answer is
        asked again at the next tick)."""
        known = None
        while True:
            try:
                revision = await registry.revision()
            except httpx.HTTPError:
                revision = known
            if known is not None and revision != known:
                await self.announce()
            known = revision
            await anyio.sleep(every)


def build_server(registry: Registry, changes: ListChanged | None = None) -> Server:
    changes = changes or ListChanged()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        changes.seen(ctx)
        return types.ListToolsResult.model_validate({"tools": await registry.tools()})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        changes.seen(ctx)
        checked = await registry.check(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=verdict_text(params.name, checked))],
            structured_content={"executed": False, **checked},
            is_error=True,
        )

    return Server(
        "tool-contract-registry",
        instructions="Tools from the tool-contract registry: approved contracts only.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(changes.bus),
    )


async def main() -> None:
    url, token = os.environ.get("REGISTRY_URL"), os.environ.get("REGISTRY_TOKEN")
    if not url or not token:
        sys.exit("Set REGISTRY_URL (e.g. http://127.0.0.1:8000/api/v1) and REGISTRY_TOKEN.")
    registry, changes = Registry(url, token), ListChanged()
    server = build_server(registry, changes)
    options = server.create_initialization_options(
        notification_options=NotificationOptions(tools_changed=True)
    )
    every = float(os.environ.get("REGISTRY_POLL_SECONDS", "10"))
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(changes.watch, registry, every)
        await server.run(read_stream, write_stream, options)
        tasks.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
