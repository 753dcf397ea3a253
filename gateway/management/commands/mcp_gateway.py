import logging

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gateway.server import build_app

QUIET_LOGGERS = ("mcp", "httpx", "httpx2", "httpcore", "httpcore2")


class _Server(uvicorn.Server):
    """uvicorn's server, printing the address it listens on once it does (port 0 included)."""

    def __init__(self, config: uvicorn.Config, say) -> None:
        super().__init__(config)
        self.say = say

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        for listener in self.servers:
            for sock in listener.sockets:
                host, port = sock.getsockname()[:2]
                self.say(f"MCP gateway at http://{host}:{port}/mcp/ (Ctrl-C stops)")


class Command(BaseCommand):
    help = (
        "Serve the MCP gateway (streamable HTTP at /mcp/): the approved tools of MCP sources, "
        "each call checked against its contract and pin, recorded as a trace."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind",
            default=settings.MCP_GATEWAY_BIND,
            help="HOST:PORT to listen on (default MCP_GATEWAY_BIND, 127.0.0.1:8001); port 0 "
            "picks a free one, printed once listening.",
        )

    def handle(self, *args, bind, **options):
        host, _, port = bind.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        if not port.isdigit() or not 0 <= int(port) < 65536:
            raise CommandError(f"--bind {bind!r}: expected HOST:PORT, e.g. 127.0.0.1:8001")
        # The SDK and its HTTP client log each request and each upstream call at INFO: lines per
        # call that cost the event loop more than the call's checks.
        for name in QUIET_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
        config = uvicorn.Config(
            build_app(),
            host=host,
            port=int(port),
            log_level="warning",
            lifespan="on",
            # Behind nginx: the scheme and host it saw, for the resource metadata's address.
            proxy_headers=True,
            forwarded_allow_ips="127.0.0.1",
        )

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            _Server(config, say).run()
        except KeyboardInterrupt:
            # uvicorn shuts down gracefully on SIGINT, then raises the signal again: done.
            pass
