"""A streamable-HTTP MCP server for the tests of calls posted to an upstream.

Run as ``python http_server.py PORT LOG json|sse``: the SDK's low-level server in a stateful
session, answering each request as one JSON document (``json``) or on an event stream
(``sse``). Its tools: ``work`` takes ``steps`` steps of ``step_ms`` milliseconds (reporting
progress when asked) and appends to ``LOG`` ``{"steps", "started"}`` when a call starts, then
``{"steps", "done"}`` or ``{"steps", "cancelled", "at"}``; ``echo`` answers its arguments as
structured content; ``big`` answers ``size`` characters; ``broken`` answers a tool error;
``failing`` a JSON-RPC error; ``whoami`` the request's ``Authorization`` header.
"""

import contextlib
import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.routing import Mount

PORT, LOG, MODE = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
OPEN = {"type": "object"}
TOOLS = [
    types.Tool(name=name, description=f"The {name} tool.", input_schema=OPEN)
    for name in ("work", "echo", "big", "broken", "failing", "whoami")
]


def log(entry: dict) -> None:
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "echo":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(arguments))],
            structured_content={"echo": arguments},
        )
    if params.name == "whoami":
        authorization = ctx.request.headers.get("authorization", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=authorization)])
    if params.name == "big":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="x" * arguments["size"])]
        )
    if params.name == "broken":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="no such record")], is_error=True
        )
    if params.name == "failing":
        raise MCPError(code=-32050, message="the backend is down", data={"retry": True})
    if params.name != "work":
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    steps, step_ms = arguments["steps"], arguments.get("step_ms", 100)
    taken = 0
    log({"steps": steps, "started": True})
    try:
        for taken in range(1, steps + 1):
            await anyio.sleep(step_ms / 1000)
            await ctx.session.report_progress(taken, steps, f"step {taken} of {steps}")
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            log({"steps": steps, "cancelled": True, "at": taken})
        raise
    log({"steps": steps, "done": True})
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{steps} steps done")],
        structured_content={"steps": steps},
    )


server = Server("http-worker", on_list_tools=list_tools, on_call_tool=call_tool)
manager = StreamableHTTPSessionManager(app=server, json_response=MODE == "json")


@contextlib.asynccontextmanager
async def lifespan(app):
    async with manager.run():
        yield


app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
