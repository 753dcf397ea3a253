"""Capture the declared tools of public MCP servers into ``benchmarks/data/catalogs/``.

Each server is started over stdio with the official ``mcp`` SDK client, initialised, and its
``tools/list`` paged through; the tools (name, title, description, input schema, annotations)
are written with the package's name, version and licence, so the risk benchmark
(``benchmarks/risk_catalogs.py``) and its tests run without the servers. The labels are not
captured: they are derived from the annotations by the documented rule and reviewed by hand
(``label`` and ``label_note`` in each file, kept when a catalog is captured again).

Run (the servers must be installed first; see docs/benchmarks.md):
``python -m benchmarks.capture_catalogs [--into FOLDER] NAME=COMMAND...`` with one
``NAME=COMMAND`` per server, e.g. ``everything=/tmp/mcp/node_modules/.bin/mcp-server-everything``;
``--into FOLDER`` writes under ``benchmarks/data/FOLDER/`` instead of ``catalogs/``
(``catalogs/vendors``: vendors' own servers, which carry no risk labels; ``poisoning``: a
deliberately poisoned server). Needs the network only to install the servers, never to run.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from pydantic import BaseModel, Field

DATA_DIR = Path(__file__).resolve().parent / "data"
CATALOG_DIR = DATA_DIR / "catalogs"
TIMEOUT = 30


class RawTools(BaseModel):
    """A ``tools/list`` page whose tools stay the JSON objects the server sent (the SDK's
    ``Tool`` drops keys it does not know, such as a vendor's own annotations)."""

    tools: list[dict[str, Any]]
    next_cursor: str | None = Field(default=None, alias="nextCursor")


async def list_tools(command: list[str]) -> list[dict]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await asyncio.wait_for(session.initialize(), TIMEOUT)
        tools: list[dict] = []
        cursor = None
        while True:
            page = await asyncio.wait_for(
                session.send_request(
                    types.ListToolsRequest(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    ),
                    RawTools,
                ),
                TIMEOUT,
            )
            for tool in page.tools:
                tools.append(
                    {
                        "name": tool.get("name"),
                        "title": tool.get("title"),
                        "description": tool.get("description") or "",
                        "inputSchema": tool.get("inputSchema"),
                        # As declared, every key kept; None when the tool declares none.
                        "annotations": tool.get("annotations"),
                    }
                )
            cursor = page.next_cursor
            if not cursor:
                return tools


def capture(name: str, command: list[str], folder: Path = CATALOG_DIR) -> Path:
    path = folder / f"{name}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    kept = {tool["name"]: tool for tool in previous.get("tools", [])}
    tools = asyncio.run(list_tools(command))
    for tool in tools:
        old = kept.get(tool["name"], {})
        tool["label"] = old.get("label")
        tool["label_note"] = old.get("label_note", "")
    document = {key: previous.get(key) for key in ("package", "version", "licence", "source")}
    document["tools"] = tools
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return path


def main(arguments: list[str]) -> None:
    folder = CATALOG_DIR
    if arguments[:1] == ["--into"] and len(arguments) > 1:
        folder = DATA_DIR / arguments[1]
        arguments = arguments[2:]
    for argument in arguments:
        name, _, command = argument.partition("=")
        path = capture(name, shlex.split(command), folder)
        print(f"{name}: {len(json.loads(path.read_text())['tools'])} tools -> {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
