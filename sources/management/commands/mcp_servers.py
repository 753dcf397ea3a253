"""mcp_servers add | edit | remove | list | sync: MCP servers as sources of declared tools."""

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sources.mcp_registry import RegistryError, Setup
from sources.models import McpServer
from sources.services import (
    SyncBusy,
    mcp_server_add,
    mcp_server_add_from_registry,
    mcp_server_edit,
    mcp_server_remove,
    mcp_server_sync,
)


class Command(BaseCommand):
    help = "Add, list and sync MCP servers whose tools become contracts <server>.<tool>."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        add = commands.add_parser("add", help="Add a server (and its sync schedule).")
        add.add_argument("name", help="The namespace of its tools.")
        transport = add.add_mutually_exclusive_group(required=True)
        transport.add_argument("--stdio", metavar='"COMMAND ARGS..."', help="Run this command.")
        transport.add_argument("--url", help="A streamable HTTP endpoint (MCP_URL_ALLOWLIST).")
        transport.add_argument(
            "--from-registry",
            metavar="SERVER_NAME",
            help="As an MCP registry describes it (e.g. io.github.user/weather): its server.json "
            "gives the command (npm, pypi, oci packages) or the URL (remotes), and the "
            "variables the operator sets.",
        )
        add.add_argument(
            "--registry",
            metavar="URL",
            help="With --from-registry: the registry, or a sub-registry speaking its API "
            "(default: MCP_REGISTRY_URL, the official registry).",
        )
        add.add_argument(
            "--version", dest="server_version", help="With --from-registry (default: latest)."
        )
        add.add_argument(
            "--remote",
            action="store_true",
            help="With --from-registry: use the server's first remote, not its packages.",
        )
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
        add.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="NAME=ENV_VAR",
            help="With --stdio: the server's variable NAME, its value read from an MCP_... "
            "environment variable of the worker at each sync (never stored).",
        )
        add.add_argument("--application", action="append", default=[], metavar="APP")
        edit = commands.add_parser(
            "edit", help="Change a server: each option given replaces that setting."
        )
        edit.add_argument("name")
        where = edit.add_mutually_exclusive_group()
        where.add_argument("--stdio", metavar='"COMMAND ARGS..."')
        where.add_argument("--url")
        edit.add_argument("--legacy-sse", action="store_true")
        edit.add_argument("--header", action="append", metavar="NAME=ENV_VAR")
        edit.add_argument("--no-headers", action="store_true", help="Send no headers.")
        edit.add_argument("--env", action="append", metavar="NAME=ENV_VAR")
        edit.add_argument("--no-env", action="store_true", help="Pass no variables.")
        edit.add_argument("--application", action="append", metavar="APP")
        enabled = edit.add_mutually_exclusive_group()
        enabled.add_argument("--enable", action="store_true")
        enabled.add_argument("--disable", action="store_true")
        remove = commands.add_parser(
            "remove", help="Remove a server; its tools are proposed for retirement."
        )
        remove.add_argument("name")
        commands.add_parser("list", help="Each server with its last sync.")
        sync = commands.add_parser("sync", help="List the servers' tools and propose changes.")
        sync.add_argument("names", nargs="*", metavar="NAME", help="Default: every enabled one.")
        sync.add_argument(
            "--approve",
            action="store_true",
            help="Trust on first use: publish tools seen for the first time (audited), except "
            "those with a poisoning alarm, which stay open for a reviewer.",
        )

    def handle(self, *args, **options) -> None:
        actions = {
            "add": self.add,
            "edit": self.edit,
            "remove": self.remove,
            "list": self.list,
            "sync": self.sync,
        }
        actions[options["action"]](options)

    def add(self, options: dict[str, Any]) -> None:
        if options["legacy_sse"] and not options["url"]:
            raise CommandError("--legacy-sse goes with --url")
        if options["from_registry"]:
            self.add_from_registry(options)
            return
        for option in ("registry", "server_version", "remote"):
            if options[option]:
                raise CommandError(f"--{option.replace('server_', '')} goes with --from-registry")
        with _refusals():
            server = mcp_server_add(
                name=options["name"],
                command=_command(options["stdio"]),
                url=options["url"] or "",
                legacy_sse=options["legacy_sse"],
                headers=_pairs("--header", options["header"]),
                env=_pairs("--env", options["env"]),
                applications=options["application"],
            )
        self.stdout.write(f"Added {server.name} ({server.get_transport_display()}){_every(server)}")

    def add_from_registry(self, options: dict[str, Any]) -> None:
        registry = options["registry"] or settings.MCP_REGISTRY_URL
        with _refusals():
            server, setup = mcp_server_add_from_registry(
                name=options["name"],
                server_name=options["from_registry"],
                registry=registry,
                version=options["server_version"] or "latest",
                remote=options["remote"],
                env=_pairs("--env", options["env"]),
                headers=_pairs("--header", options["header"]),
                applications=options["application"],
            )
        entry = server.registry_entry
        self.stdout.write(
            f"Added {server.name} ({server.get_transport_display()}) from {entry['name']} "
            f"{_shown(entry['version'])} at {registry}: {_shown(setup.source)}{_every(server)}"
        )
        for line in _setup_lines(server, setup):
            self.stdout.write(line)

    def edit(self, options: dict[str, Any]) -> None:
        server = _server(options["name"])
        if options["legacy_sse"] and not options["url"]:
            raise CommandError("--legacy-sse goes with --url")
        headers: dict[str, str] | None = {} if options["no_headers"] else None
        env: dict[str, str] | None = {} if options["no_env"] else None
        with _refusals():
            server = mcp_server_edit(
                server=server,
                command=_command(options["stdio"]),
                url=options["url"],
                legacy_sse=options["legacy_sse"],
                headers=_pairs("--header", options["header"]) if options["header"] else headers,
                env=_pairs("--env", options["env"]) if options["env"] else env,
                applications=options["application"],
                enabled=True if options["enable"] else False if options["disable"] else None,
            )
        self.stdout.write(f"Changed {server.name}; its tools are judged again at the next sync.")

    def remove(self, options: dict[str, Any]) -> None:
        server = _server(options["name"])
        retired = mcp_server_remove(server=server)
        self.stdout.write(
            f"Removed {server.name}; {len(retired)} tool(s) proposed for retirement"
            + (f": {', '.join(retired)}" if retired else ".")
        )

    def list(self, options: dict[str, Any]) -> None:
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

    def sync(self, options: dict[str, Any]) -> None:
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


def _every(server: McpServer) -> str:
    # An IntervalSchedule reads "every 60 minutes".
    if server.schedule and server.schedule.interval:
        return f"; synced {server.schedule.interval} by beat."
    return "."


def _setup_lines(server: McpServer, setup: Setup) -> list[str]:
    """What the operator needs to know: how it runs, the variables to set, what was left."""
    lines = [
        f"  command: {shlex.join(server.command)}" if server.command else f"  url: {server.url}"
    ]
    stored = {**server.env, **server.headers}
    needed = [(v, "env") for v in setup.env] + [(v, "header") for v in setup.headers]
    if stored:
        lines.append("  set in the worker's environment before its first sync (never stored):")
        described = {variable.name: variable for variable, _ in needed}
        for name, variable in stored.items():
            declared = described.get(name)
            traits = ", ".join(
                word
                for word, present in (
                    ("required", declared is not None and declared.required),
                    ("secret", declared is not None and declared.secret),
                )
                if present
            )
            about = f": {_shown(declared.description)}" if declared and declared.description else ""
            lines.append(
                f"    {variable} -> {_shown(name)}{f' ({traits})' if traits else ''}{about}"
            )
    for variable in setup.optional:
        if variable.name not in stored:
            about = f": {_shown(variable.description)}" if variable.description else ""
            lines.append(f"  optional, not passed: {_shown(variable.name)}{about}")
    for reason in setup.passed_over:
        lines.append(f"  passed over: {_shown(reason)}")
    return lines


def _shown(text: str, limit: int = 300) -> str:
    """Text from a registry, safe for a terminal: no control characters (escape sequences)."""
    return "".join(char if char.isprintable() else " " for char in str(text))[:limit]


def _server(name: str) -> McpServer:
    try:
        return McpServer.objects.get(name=name)
    except McpServer.DoesNotExist:
        raise CommandError(f"unknown MCP server: {name}") from None


def _command(text: str | None) -> list[str] | None:
    try:
        return shlex.split(text) if text else None
    except ValueError as exc:
        raise CommandError(f"--stdio: {exc}") from None


def _pairs(option: str, items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, variable = item.partition("=")
        if not sep:
            raise CommandError(f"{option} {item!r}: expected NAME=ENV_VAR")
        pairs[name.strip()] = variable.strip()
    return pairs


@contextmanager
def _refusals() -> Iterator[None]:
    try:
        yield
    except ValidationError as exc:
        lines = [f"{field}: {'; '.join(errors)}" for field, errors in exc.message_dict.items()]
        raise CommandError("\n".join(lines)) from None
    except (ValueError, RegistryError) as exc:
        raise CommandError(
            _shown(str(exc)) if isinstance(exc, RegistryError) else str(exc)
        ) from None
