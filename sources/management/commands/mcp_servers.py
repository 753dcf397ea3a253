"""mcp_servers add | list | sync: MCP servers as sources of declared tools."""

import shlex

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sources.models import McpServer
from sources.services import SyncBusy, mcp_server_add, mcp_server_sync


class Command(BaseCommand):
    help = "Add, list and sync MCP servers whose tools become contracts <server>.<tool>."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        add = commands.add_parser("add", help="Add a server (and its sync schedule).")
        add.add_argument("name", help="The namespace of its tools.")
        transport = add.add_mutually_exclusive_group(required=True)
        transport.add_argument("--stdio", metavar='"COMMAND ARGS..."', help="Run this command.")
        transport.add_argument("--url", help="A streamable HTTP endpoint (MCP_URL_ALLOWLIST).")
        add.add_argument(
            "--legacy-sse",
            action="store_true",
            help="With --url: the server speaks the older HTTP+SSE transport (an /sse endpoint).",
        )
        add.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="NAME=ENV_VAR",
            help="A request header whose value is read from an MCP_... environment variable.",
        )
        add.add_argument("--application", action="append", default=[], metavar="APP")
        commands.add_parser("list", help="Each server with its last sync.")
        sync = commands.add_parser("sync", help="List the servers' tools and propose changes.")
        sync.add_argument("names", nargs="*", metavar="NAME", help="Default: every enabled one.")
        sync.add_argument(
            "--approve",
            action="store_true",
            help="Trust on first use: publish tools seen for the first time (audited), except "
            "those with poisoning flags, which stay open for a reviewer.",
        )

    def handle(self, *args, **options) -> None:
        {"add": self.add, "list": self.list, "sync": self.sync}[options["action"]](options)

    def add(self, options: dict) -> None:
        headers = {}
        for item in options["header"]:
            header, sep, variable = item.partition("=")
            if not sep:
                raise CommandError(f"--header {item!r}: expected NAME=ENV_VAR")
            headers[header.strip()] = variable.strip()
        if options["legacy_sse"] and not options["url"]:
            raise CommandError("--legacy-sse goes with --url")
        try:
            command = shlex.split(options["stdio"]) if options["stdio"] else None
        except ValueError as exc:
            raise CommandError(f"--stdio: {exc}") from None
        try:
            server = mcp_server_add(
                name=options["name"],
                command=command,
                url=options["url"] or "",
                legacy_sse=options["legacy_sse"],
                headers=headers,
                applications=options["application"],
            )
        except ValidationError as exc:
            lines = [f"{field}: {'; '.join(errors)}" for field, errors in exc.message_dict.items()]
            raise CommandError("\n".join(lines)) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Added {server.name} ({server.get_transport_display()}); "
            f"synced every {server.schedule.interval} by beat."
            if server.schedule and server.schedule.interval
            else f"Added {server.name}."
        )

    def list(self, options: dict) -> None:
        for server in McpServer.objects.all():
            where = shlex.join(server.command) if server.command else server.url
            last = server.last_sync_at.isoformat(timespec="seconds") if server.last_sync_at else "-"
            line = (
                f"{server.name}\t{server.transport}\t{where}\t"
                f"{'enabled' if server.enabled else 'disabled'}\t{last}\t"
                f"{server.last_sync_outcome}\t"
                f"{server.tool_count if server.tool_count is not None else '-'} tools"
            )
            if server.last_sync_error:
                line += f"\t{server.last_sync_error}"
            self.stdout.write(line)

    def sync(self, options: dict) -> None:
        names = options["names"]
        servers = list(
            McpServer.objects.filter(name__in=names)
            if names
            else McpServer.objects.filter(enabled=True)
        )
        missing = sorted(set(names) - {server.name for server in servers})
        if missing:
            raise CommandError(f"unknown MCP server(s): {', '.join(missing)}")
        failed = False
        for server in servers:
            try:
                report = mcp_server_sync(server=server, approve=options["approve"])
            except SyncBusy as exc:
                self.stderr.write(str(exc))
                failed = True
                continue
            if report.outcome == McpServer.Outcome.FAILED:
                self.stderr.write(f"{server.name}: sync failed: {report.error}")
                failed = True
                continue
            self.stdout.write(
                f"{server.name}: {report.declared} declared, {len(report.proposed)} proposed, "
                f"{len(report.published)} published on first use, "
                f"{len(report.flagged)} flagged and left open for a reviewer, "
                f"{len(report.changed)} "
                f"changed, {len(report.updated)} open tickets updated, {len(report.retired)} "
                f"retirements proposed, {report.unchanged} unchanged, "
                f"{len(report.refused)} refused"
            )
            for name, codes in report.flagged.items():
                self.stdout.write(f"  flagged {name} ({codes}): open for a reviewer, not published")
            for name, reason in report.refused.items():
                self.stdout.write(f"  refused {name}: {reason}")
        if failed:
            raise CommandError("some servers could not be synced")
