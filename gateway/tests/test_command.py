"""``manage.py mcp_gateway``'s server settings."""

import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.management.commands.mcp_gateway import server_config


async def _app(scope, receive, send) -> None:
    return None


def test_the_gateway_is_served_by_the_compiled_http_parser_and_event_loop():
    """A process without them must fail at start, not serve with h11 and asyncio's loop at a
    fraction of the speed."""
    config = server_config(_app, host="127.0.0.1", port=0)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
    loop_factory = config.get_loop_factory()
    assert loop_factory is not None
    loop = loop_factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
