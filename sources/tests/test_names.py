"""A server's name, its headers and the names it declares are checked whole: ``$`` would
take a final newline."""

import pytest
from django.core.exceptions import ValidationError

from sources.declared import Refused, declared_tool
from sources.models import McpServer
from sources.services import mcp_server_add


@pytest.fixture
def allowed(db, settings):
    settings.MCP_URL_ALLOWLIST = ["https://mcp.example.com/"]


@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("name", {"name": "calendar\n"}),
        ("headers", {"headers": {"Authorization\n": "MCP_TOKEN"}}),
        ("headers", {"headers": {"Authorization": "MCP_TOKEN\n"}}),
    ],
    ids=["server-name", "header-name", "secret-name"],
)
def test_it_refuses_a_name_with_a_trailing_newline(allowed, field, changes):
    arguments = {"name": "remote", "url": "https://mcp.example.com/mcp", **changes}
    with pytest.raises(ValidationError) as refused:
        mcp_server_add(**arguments)
    assert field in refused.value.message_dict
    assert not McpServer.objects.exists()


def test_it_refuses_a_declared_tool_name_with_a_trailing_newline():
    with pytest.raises(Refused, match="name 'find_events\\\\n'"):
        declared_tool("calendar", {"name": "find_events\n", "description": "Find events."})
    good = {"name": "find_events", "description": "Find.", "inputSchema": {"type": "object"}}
    assert declared_tool("calendar", good).name == "calendar.find_events"
