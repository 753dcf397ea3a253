"""Thin tasks: a server's id in, one service call."""

from typing import Any

from registry.queueing import durable_task

from . import services
from .models import McpServer


@durable_task(soft_time_limit=240, time_limit=300)
def mcp_server_sync(self, server_id: int) -> dict[str, Any]:
    server = McpServer.objects.filter(pk=server_id, enabled=True).first()
    if server is None:
        return {"server": server_id, "outcome": "skipped"}
    try:
        report = services.mcp_server_sync(server=server)
    except services.SyncBusy:
        return {"server": server.name, "outcome": "busy"}
    return {"server": server.name, "outcome": report.outcome, "declared": report.declared}
