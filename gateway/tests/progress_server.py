"""A stdio MCP server whose one tool takes its time, for the gateway's cancellation and progress
tests.

Run as ``python progress_server.py LOG``: ``work`` takes ``steps`` steps of ``step_ms``
milliseconds, reporting progress after each one when the caller asked for it, and appends lines
to ``LOG``: ``{"steps", "started"}`` when a call starts, then ``{"steps", "done"}`` when it
finished or ``{"steps", "cancelled", "at"}`` when its caller cancelled it (``at``: the steps it
had taken). Written with the SDK's
low-level server, which cancels a handler on ``notifications/cancelled``.
"""

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

LOG = Path(sys.argv[1])
WORK = types.Tool(
    name="work",
    description="Work through a number of steps, reporting progress.",
    input_schema={
        "type": "object",
        "properties": {
            "steps": {"type": "integer", "minimum": 1, "maximum": 1000},
            "step_ms": {"type": "integer", "minimum": 0, "maximum": 10000},
        },
        "required": ["steps"],
    },
)


def log(entry: dict) -> None:
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[WORK])


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
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


async def main() -> None:
    server = Server("slow-worker", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
