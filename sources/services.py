"""Writes for MCP servers: adding one, its beat schedule, and syncing what it declares.

A sync lists the server's tools first (``sources.client``, outside any transaction: a slow
server holds no lock), then writes the listing's changes in one transaction through the review
services, so every proposal meets the same validation, poisoning checks and approvals as any
other: each tool is judged alone (a refused tool loses no other), then new tools and changes of
approved tools are written in bulk, in a number of queries that does not grow with them, and
the rarer cases tool by tool, each in a savepoint. A tool declared as the registry last saw it
costs no write at all; a server that cannot be listed changes nothing but its own record.
Reviewers get one e-mail a sync, once it has committed.
"""

import hashlib
import json
import os
import shlex
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from learning.risk import LabelIndex, arguments_of, suggest_risk
from learning.selectors import risk_label_index, risk_lexicon
from learning.shapes import SyncRecord
from registry.contract import ContractDocument, with_defaults
from registry.models import Application, ContractVersion, RiskLevel, Tool, contract_hash
from registry.selectors import registry_context
from registry.services import (
    contract_validate,
    contract_version_definition_record,
    tool_lock,
    tool_lock_or_create,
)
from registry.validation import ContractInvalid, RegistryContext, export_clash, export_name
from reviews.diff import contract_diff_flags, widened_hints
from reviews.models import AuditEntry, ReviewError, ReviewTicket
from reviews.poisoning import INFORMATION_CODES
from reviews.services import (
    BULK_BATCH,
    WIDENED_HINT_RISK,
    Proposal,
    contract_proposals_open,
    contract_proposals_publish,
    contract_propose,
    contract_publish,
    reviewers_notify,
    ticket_proposal_replace,
    ticket_withdraw,
)
from reviews.shapes import TicketEvidence

from . import client, mcp_registry
from .compat import compatibility
from .declared import (
    Declared,
    Refused,
    declared_document,
    declared_tool,
    legacy_annotations,
    shown,
)
from .models import DeclaredTool, McpServer

SYNC_TASK = "sources.tasks.mcp_server_sync"
MAX_REPORTED = 200  # names per list kept on the server's record; the counts are exact
MAX_TITLE_CHARS = 200  # a title is a display name: a line, not a page


class SyncBusy(Exception):
    """Another sync of the same server is under way."""


@dataclass
class SyncReport:
    server: str
    outcome: str = McpServer.Outcome.OK
    error: str = ""
    declared: int = 0
    proposed: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    # New tools past MCP_MAX_NEW_TOOLS_PER_SYNC: proposed by a later sync, not this one.
    deferred: list[str] = field(default_factory=list)
    repinned: list[str] = field(default_factory=list)
    server_info: dict[str, str] = field(default_factory=dict)  # serverInfo, as the server said
    unchanged: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    # New tools --approve left open for a reviewer, with their poisoning flags' codes.
    flagged: dict[str, str] = field(default_factory=dict)

    def as_record(self) -> SyncRecord:
        """``McpServer.last_sync_report``: every field, each list and mapping cut."""
        record = asdict(self)
        for key, value in record.items():
            if isinstance(value, list):
                record[key] = value[:MAX_REPORTED]
            elif isinstance(value, dict):
                record[key] = dict(list(value.items())[:MAX_REPORTED])
        return cast(SyncRecord, record)  # asdict() of this dataclass: SyncRecord's fields


@transaction.atomic
def mcp_server_add(
    *,
    name: str,
    command: list[str] | None = None,
    url: str = "",
    legacy_sse: bool = False,
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    applications: list[str] | None = None,
    registry_entry: dict[str, Any] | None = None,
) -> McpServer:
    """A new server (stdio with ``command``, or streamable HTTP at ``url``, or the legacy
    HTTP+SSE transport with ``legacy_sse``) and its schedule. Only operators call this with a
    command or an environment (``env``: {NAME: ENV_VAR}): the admin cannot set them.
    ``registry_entry`` records where a server read from an MCP registry came from."""
    transport = McpServer.Transport.SSE if legacy_sse else McpServer.Transport.HTTP
    server = McpServer(
        name=name,
        transport=McpServer.Transport.STDIO if command else transport,
        command=list(command or []),
        url=url,
        headers=dict(headers or {}),
        env=dict(env or {}),
        registry_entry=dict(registry_entry or {}),
    )
    server.full_clean()
    found = _applications(applications or [])
    server.save()
    server.applications.set(found)
    mcp_server_schedule(server=server)
    return server


def mcp_server_add_from_registry(
    *,
    name: str,
    server_name: str,
    registry: str,
    version: str = "latest",
    remote: bool = False,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    applications: list[str] | None = None,
) -> tuple[McpServer, mcp_registry.Setup]:
    """A new server as an MCP registry describes it (``sources/mcp_registry.py``): its
    ``server.json`` is read first, outside any transaction (a slow registry holds no lock), and
    turned into a command or a URL; the variables and headers it needs are read from the
    worker's ``MCP_<NAME>_<VARIABLE>`` variables unless ``env``/``headers`` name others.
    Raises ``RegistryError`` when the registry or its answer cannot be used."""
    server_json = mcp_registry.server_read(
        registry,
        server_name,
        version,
        limits=mcp_registry.Limits(
            timeout=settings.MCP_REGISTRY_TIMEOUT_SECONDS,
            max_bytes=settings.MCP_REGISTRY_MAX_BYTES,
        ),
    )
    setup = mcp_registry.server_setup(server_json, local_name=name, remote=remote)
    server = mcp_server_add(
        name=name,
        command=setup.command or None,
        url=setup.url,
        legacy_sse=setup.legacy_sse,
        env={variable.name: variable.variable for variable in setup.env} | dict(env or {}),
        headers={variable.name: variable.variable for variable in setup.headers}
        | dict(headers or {}),
        applications=applications,
        registry_entry={
            "registry": registry.rstrip("/"),
            "name": server_json["name"],
            "version": server_json["version"],
            "source": setup.source,
            "server": server_json,
        },
    )
    return server, setup


def _applications(wanted: list[str]) -> list[Application]:
    found = list(Application.objects.filter(name__in=wanted))
    missing = sorted(set(wanted) - {application.name for application in found})
    if missing:
        raise ValueError(f"unknown application(s): {', '.join(missing)}")
    return found


@transaction.atomic
def mcp_server_edit(
    *,
    server: McpServer,
    command: list[str] | None = None,
    url: str | None = None,
    legacy_sse: bool = False,
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    applications: list[str] | None = None,
    enabled: bool | None = None,
) -> McpServer:
    """Change what an operator set: each argument given replaces that setting (a new command
    or URL switches the transport; a URL leaves no command or environment behind). Its tools
    are judged again at the next sync, as any change of what the server declares."""
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    if command is not None:
        server.transport, server.command, server.url = McpServer.Transport.STDIO, command, ""
    elif url is not None:
        server.transport = McpServer.Transport.SSE if legacy_sse else McpServer.Transport.HTTP
        server.command, server.url, server.env = [], url, {}
    if command is not None or url is not None:
        # Its registry's server.json no longer says how it runs.
        server.registry_entry = {}
    if headers is not None:
        server.headers = headers
    if env is not None:
        server.env = env
    if enabled is not None:
        server.enabled = enabled
    server.full_clean()
    found = _applications(applications) if applications is not None else None
    server.save()
    if found is not None:
        server.applications.set(found)
    if server.schedule_id is not None:
        PeriodicTask.objects.filter(pk=server.schedule_id).update(enabled=server.enabled)
    return server


@transaction.atomic
def mcp_server_remove(*, server: McpServer) -> list[str]:
    """Remove a server: each tool it declares gets a retirement proposal (reviewers decide,
    as when a server stops declaring a tool), then the server, its record and its schedule
    go. The tools, their versions and tickets stay. Returns the tools proposed for retirement."""
    report = SyncReport(server=server.name)
    for row in server.declared_tools.select_related("tool", "server").filter(gone=False):
        _declared_gone(row, report)
    server.delete()
    return report.retired


@transaction.atomic
def mcp_server_schedule(*, server: McpServer) -> PeriodicTask:
    """The server's beat entry (created once, then edited in the admin like any other)."""
    if server.schedule_id is not None:
        return PeriodicTask.objects.get(pk=server.schedule_id)
    every, _ = IntervalSchedule.objects.get_or_create(
        every=settings.MCP_SYNC_EVERY_MINUTES, period=IntervalSchedule.MINUTES
    )
    task = PeriodicTask.objects.create(
        name=f"Sync MCP server {server.name}",
        task=SYNC_TASK,
        interval=every,
        args=json.dumps([server.pk]),
        enabled=server.enabled,
    )
    McpServer.objects.filter(pk=server.pk).update(schedule=task)
    server.schedule = task
    return task


def mcp_server_sync(
    *, server: McpServer, approve: bool = False, actor: User | None = None
) -> SyncReport:
    """List the server's tools and route every change into review (see the module doc).

    ``approve`` is the operator's trust on first use: tools seen for the first time are
    published at once, audited as ``trusted_on_first_use``; changes still wait for reviewers.
    Raises SyncBusy when another sync of this server is under way.
    """
    _claim(server)
    started = time.monotonic()
    report = SyncReport(server=server.name)
    try:
        try:
            listing = client.server_listing(
                transport=server.transport,
                command=server.command,
                url=server.url,
                headers=server_headers(server),
                env=server_env(server),
                limits=client.Limits(
                    timeout=settings.MCP_SYNC_TIMEOUT_SECONDS,
                    max_tools=settings.MCP_MAX_TOOLS,
                    max_bytes=settings.MCP_MAX_BYTES,
                ),
                allowlist=settings.MCP_URL_ALLOWLIST,
            )
        except client.SyncFailed as exc:
            report.outcome = McpServer.Outcome.FAILED
            report.error = str(exc)
        else:
            report.server_info = listing.server_info
            _apply(server, listing.tools, report, approve=approve, actor=actor)
    except Exception as exc:
        # The record must not say "ok" for a sync that stopped halfway (the task retries it).
        report.outcome = McpServer.Outcome.FAILED
        report.error = f"the sync stopped: {type(exc).__name__}: {str(exc)[:300]}"
        raise
    finally:
        _record(server, report, started)
    return report


def _claim(server: McpServer) -> None:
    # Two workers (beat and "sync now") must not write the same declarations at once; a claim
    # older than any sync can last is a dead worker's and may be taken over.
    stale = timezone.now() - timedelta(seconds=settings.MCP_SYNC_TIMEOUT_SECONDS * 4)
    claimed = (
        McpServer.objects.filter(pk=server.pk)
        .filter(Q(sync_started_at__isnull=True) | Q(sync_started_at__lt=stale))
        .update(sync_started_at=timezone.now())
    )
    if claimed != 1:
        raise SyncBusy(f"{server.name} is being synced already.")


def server_headers(server: McpServer) -> dict[str, str]:
    """The header values to send, after the checks the record met when it was saved, made
    again: the operator's settings may have changed since, or the row been written by SQL."""
    if server.transport != McpServer.Transport.STDIO and not client.url_allowed(
        server.url, settings.MCP_URL_ALLOWLIST
    ):
        raise client.SyncFailed(
            "the server's URL is not under any address of MCP_URL_ALLOWLIST; nothing was sent"
        )
    if not isinstance(server.headers, dict):
        raise client.SyncFailed("headers: not an object of {header: ENV_VAR}; nothing was sent")
    if refusal := server.secret_refusal():
        raise client.SyncFailed(f"header {refusal.rstrip('.')}; nothing was sent")
    values = {}
    for header, variable in server.headers.items():
        value = os.environ.get(variable)
        if value is None:
            raise client.SyncFailed(
                f"header {header}: the environment variable {variable} is unset"
            )
        values[header] = value
    return values


def server_env(server: McpServer) -> dict[str, str]:
    """A stdio server's environment variables, read from those its record names."""
    values = {}
    for name, variable in server.env.items():
        value = os.environ.get(variable)
        if value is None:
            raise client.SyncFailed(f"env {name}: the environment variable {variable} is unset")
        values[name] = value
    return values


def _record(server: McpServer, report: SyncReport, started: float) -> None:
    if report.outcome == McpServer.Outcome.OK and report.refused:
        report.outcome = McpServer.Outcome.PARTIAL
    fields: dict[str, Any] = {
        "sync_started_at": None,
        "last_sync_at": timezone.now(),
        "last_sync_duration_ms": round((time.monotonic() - started) * 1000),
        "last_sync_outcome": report.outcome,
        "last_sync_error": report.error,
        "last_sync_report": report.as_record(),
    }
    if report.outcome != McpServer.Outcome.FAILED:
        fields["tool_count"] = report.declared
    McpServer.objects.filter(pk=server.pk).update(**fields)
    for name, value in fields.items():
        setattr(server, name, value)


def _apply(
    server: McpServer,
    definitions: list[dict[str, Any]],
    report: SyncReport,
    *,
    approve: bool,
    actor: User | None,
) -> None:
    with transaction.atomic():
        tickets = _changes_write(server, definitions, report, approve=approve, actor=actor)
    if tickets:
        # Once the listing's changes are committed: one e-mail per reviewer for all of them.
        reviewers_notify(ticket_ids=tickets, about=f"MCP server {server.name}")


@dataclass
class _Judged:
    """What the sync read and judged once for a whole listing."""

    risks: set[str]
    # The labelled tools indexed once per registry revision and shared with refreshes: every
    # suggestion of the sync reads the tools of its namespace and action word, not every label.
    labelled: LabelIndex | None = None
    context: RegistryContext | None = None  # read once: declared tools name no dependencies

    def prepared(self) -> tuple[LabelIndex, RegistryContext]:
        if self.labelled is None:
            self.labelled = risk_label_index()
        self.context = self.context or registry_context()
        return self.labelled, self.context


def _changes_write(
    server: McpServer,
    definitions: list[dict[str, Any]],
    report: SyncReport,
    *,
    approve: bool,
    actor: User | None,
) -> list[int]:
    """Every change of one listing, in the caller's transaction: changes of tools already
    declared (``_changes_of_declared_write``), then new tools (``_new_tools_write``), then
    retirements. The ids of the tickets opened, for the digest."""
    report.declared = len(definitions)
    rows = {row.name: row for row in server.declared_tools.select_related("ticket")}
    seen: set[str] = set()
    judged = _Judged(risks=set(RiskLevel.objects.values_list("name", flat=True)))
    new: list[Declared] = []
    changed: list[tuple[Declared, DeclaredTool]] = []
    tickets: list[int] = []  # reviewers hear of them in one digest, after the commit
    for definition in definitions:
        name = definition.get("name")
        if isinstance(name, str) and name in seen:
            report.refused[shown(name)] = "declared twice in one listing"
            continue
        if isinstance(name, str):
            # Still declared, even if refused below: a tool is retired only when it is gone.
            seen.add(name)
        try:
            _texts_check(definition)
            declared = declared_tool(server.name, definition)
        except Refused as exc:
            report.refused[shown(name)] = str(exc)
            continue
        row = rows.get(declared.local_name)
        if (
            row is not None
            and row.definition_hash == declared.pin
            and row.declared_hash == _declared_hash(declared)
            and not row.gone
        ):
            report.unchanged += 1  # what the registry last saw: nothing to write
            continue
        if row is None:
            if len(new) >= settings.MCP_MAX_NEW_TOOLS_PER_SYNC:
                report.deferred.append(declared.name)
            else:
                new.append(declared)
            continue
        changed.append((declared, row))
    tickets += _changes_of_declared_write(server, changed, report, judged, approve, actor)
    tickets += _new_tools_write(server, new, report, judged, approve=approve, actor=actor)
    for name, row in rows.items():
        if name not in seen and not row.gone:
            with transaction.atomic():
                opened = _declared_gone(row, report)
            tickets += [opened] if opened is not None else []
    return tickets


def _changes_of_declared_write(
    server: McpServer,
    changed: list[tuple[Declared, DeclaredTool]],
    report: SyncReport,
    judged: _Judged,
    approve: bool,
    actor: User | None,
) -> list[int]:
    """Declarations that changed since the last sync. The common case, a change of a tool with
    an approved version that keeps its server's definition and has no open ticket, is judged
    one by one as ``_declared_apply`` judges it (before its tool is locked), then proposed in
    bulk (``contract_proposals_open``), its declarations updated by one query. The rest (an
    open ticket's proposal replaced, a tool never approved, a version stored before definitions
    were kept) goes ``_declared_apply``'s way, each in a savepoint. The ids of the tickets
    opened."""
    if not changed:
        return []
    labelled, context = judged.prepared()
    # Read without a lock: the judging takes milliseconds a tool, and other writers (reviewers,
    # ingest) must not wait on a whole listing's tools meanwhile. Locked once judged, below.
    tools = {
        tool.pk: tool
        for tool in Tool.objects.select_related("current_version__risk").filter(
            pk__in=[row.tool_id for _declared, row in changed]
        )
    }
    ranks = dict(RiskLevel.objects.values_list("name", "rank"))
    opened: list[int] = []
    bulk: list[tuple[Declared, DeclaredTool, Proposal]] = []
    for declared, row in changed:
        tool = tools[row.tool_id]
        approved = tool.current_version
        ticket = row.ticket
        open_ticket = (
            ticket is not None
            and ticket.tool_id == tool.pk
            and ticket.status == ReviewTicket.Status.OPEN
        )
        if approved is None or approved.definition is None or open_ticket:
            opened += _declared_apply_one(server, declared, row, report, judged, approve, actor)
            continue
        approved.tool = tool  # its document names it
        declared = replace(declared, name=tool.name)
        base = approved.document()
        risk_evidence: dict[str, Any] = {}
        risk = _changed_risk(approved, declared, labelled, judged.risks, risk_evidence, ranks)
        document = declared_document(declared, approved=base, risk=risk)
        evidence = _evidence(server, report.server_info, declared, base, document, risk_evidence)
        try:
            normalised = contract_validate(document=document, context=context)
        except ContractInvalid as exc:
            report.refused[declared.local_name] = _refusal(exc)
            continue
        proposal = Proposal(
            tool=tool,
            document=normalised,
            evidence=evidence,
            kind=ReviewTicket.Kind.CHANGE,
            definition=declared.definition,
        )
        bulk.append((declared, row, proposal))
    # A tool published meanwhile was judged against a version no longer current: it is judged
    # again, alone, under its lock.
    current = dict(
        Tool.objects.select_for_update(no_key=True)
        .filter(pk__in=[proposal.tool.pk for _declared, _row, proposal in bulk])
        .values_list("pk", "current_version_id")
    )
    kept = []
    for declared, row, proposal in bulk:
        if current[proposal.tool.pk] == proposal.tool.current_version_id:
            kept.append((declared, row, proposal))
        else:
            opened += _declared_apply_one(server, declared, row, report, judged, approve, actor)
    bulk = kept
    tickets = contract_proposals_open(
        proposals=[proposal for _declared, _row, proposal in bulk],
        author=None,
        source=ContractVersion.Source.IMPORT,
    )
    now = timezone.now()
    for (declared, row, _proposal), ticket in zip(bulk, tickets, strict=True):
        if ticket is None:
            report.unchanged += 1  # the approved contract and definition, declared again
        else:
            report.changed.append(declared.name)
            opened.append(ticket.pk)
        row.definition_hash = declared.pin
        row.declared_hash = _declared_hash(declared)
        row.gone = False
        row.ticket = ticket
        row.changed_at = now  # auto_now, which a bulk update does not set
    DeclaredTool.objects.bulk_update(
        [row for _declared, row, _proposal in bulk],
        ["definition_hash", "declared_hash", "gone", "ticket", "changed_at"],
        batch_size=BULK_BATCH,
    )
    return opened


def _declared_apply_one(
    server: McpServer,
    declared: Declared,
    row: DeclaredTool | None,
    report: SyncReport,
    judged: _Judged,
    approve: bool,
    actor: User | None,
) -> list[int]:
    """One declared tool through ``_declared_apply``, in a savepoint: a refusal undoes its own
    writes only. The id of the ticket it opened, if any."""
    labelled, context = judged.prepared()
    try:
        with transaction.atomic():
            opened = _declared_apply(
                server,
                declared,
                row,
                report,
                labelled,
                judged.risks,
                context,
                approve=approve,
                actor=actor,
            )
    except (ContractInvalid, Refused, ReviewError) as exc:
        report.refused[declared.local_name] = _refusal(exc)
        return []
    return [opened] if opened is not None else []


@dataclass
class _NewTool:
    declared: Declared
    tool: Tool | None  # None: created by the sync
    document: ContractDocument
    evidence: TicketEvidence


def _new_tools_write(
    server: McpServer,
    new: list[Declared],
    report: SyncReport,
    judged: _Judged,
    *,
    approve: bool,
    actor: User | None,
) -> list[int]:
    """Tools the server declares for the first time, judged one by one as ``_declared_apply``
    judges them (names, risk, poisoning, validation), then written together: their tools,
    versions, tickets, audit entries, applications and declarations, each by one bulk query, so
    a first sync of a thousand tools costs the queries of one. A tool another transaction
    creates meanwhile makes the bulk insert fail: then each tool goes the per-tool way, which
    waits on the other's lock and refuses or proposes it as ever. The ids of the tickets
    opened."""
    if not new:
        return []
    labelled, context = judged.prepared()
    existing = {
        tool.name: tool
        for tool in Tool.objects.select_for_update(no_key=True)
        .filter(name__in=[declared.name for declared in new])
        .annotate(
            owned=Exists(DeclaredTool.objects.filter(tool=OuterRef("pk")))
            | Exists(ContractVersion.objects.filter(tool=OuterRef("pk")))
        )
    }
    planned: list[_NewTool] = []
    exports: dict[str, str] = {}
    for declared in new:
        tool = existing.get(declared.name)
        if tool is not None and tool.owned:
            report.refused[declared.local_name] = (
                f"the registry already has {declared.name} from another source"
            )
            continue
        risk_evidence: dict[str, Any] = {}
        risk = _suggested(declared, labelled, judged.risks, risk_evidence)
        document = declared_document(declared, approved=None, risk=risk)
        evidence = _evidence(server, report.server_info, declared, None, document, risk_evidence)
        try:
            normalised = contract_validate(document=document, context=context)
            # Two new names exporting as one: the later is refused, as the tool's unique
            # export name would refuse it, in the same words.
            if other := exports.get(export_name(declared.name)):
                raise ContractInvalid(declared.name, {"name": [export_clash(declared.name, other)]})
        except ContractInvalid as exc:
            report.refused[declared.local_name] = _refusal(exc)
            continue
        exports[export_name(declared.name)] = declared.name
        planned.append(_NewTool(declared, tool, normalised, evidence))
    alarms = {
        item.declared.name: sorted(
            {str(flag["code"]) for flag in item.evidence["poisoning"]} - set(INFORMATION_CODES)
        )
        for item in planned
    }
    try:
        with transaction.atomic():
            tickets = _new_tools_insert(server, planned)
            # Trust on first use covers what nobody flagged; a flagged tool waits for a person.
            trusted = [
                ticket
                for item, ticket in zip(planned, tickets, strict=True)
                if approve and ticket is not None and not alarms[item.declared.name]
            ]
            contract_proposals_publish(
                tickets=trusted, actor=actor, action=AuditEntry.Action.TRUSTED
            )
    except IntegrityError:
        retried: list[int] = []
        for item in planned:
            retried += _declared_apply_one(
                server, item.declared, None, report, judged, approve, actor
            )
        return retried
    opened: list[int] = []
    for item, ticket in zip(planned, tickets, strict=True):
        name = item.declared.name
        if ticket is None:  # cannot happen: a new tool has no approved version to equal
            report.refused[item.declared.local_name] = "nothing to propose"
        elif ticket.status == ReviewTicket.Status.APPROVED:
            report.published.append(name)
        elif approve:
            report.flagged[name] = ", ".join(alarms[name])
        else:
            report.proposed.append(name)
        if ticket is not None and ticket.status == ReviewTicket.Status.OPEN:
            opened.append(ticket.pk)
    return opened


def _new_tools_insert(server: McpServer, planned: list[_NewTool]) -> list[ReviewTicket | None]:
    """The rows of ``_new_tools_write``; one ticket per planned tool, in order."""
    created = [
        Tool(name=item.declared.name, export_name=export_name(item.declared.name))
        for item in planned
        if item.tool is None
    ]
    Tool.objects.bulk_create(created, batch_size=BULK_BATCH)
    made = iter(created)
    tools = [item.tool or next(made) for item in planned]
    proposals = [
        Proposal(
            tool=tool,
            document=item.document,
            evidence=item.evidence,
            kind=ReviewTicket.Kind.NEW_TOOL,
            definition=item.declared.definition,
        )
        for item, tool in zip(planned, tools, strict=True)
    ]
    tickets = contract_proposals_open(
        proposals=proposals, author=None, source=ContractVersion.Source.IMPORT
    )
    for application in server.applications.filter(all_tools=False):
        application.enabled_tools.add(*tools)
    DeclaredTool.objects.bulk_create(
        [
            DeclaredTool(
                server=server,
                name=item.declared.local_name,
                tool=tool,
                definition_hash=item.declared.pin,
                declared_hash=_declared_hash(item.declared),
                ticket=ticket,
            )
            for item, tool, ticket in zip(planned, tools, tickets, strict=True)
        ],
        batch_size=BULK_BATCH,
    )
    return tickets


def _texts_check(definition: dict[str, Any]) -> None:
    """Refuse a definition with a text longer than a person can review: a description (the
    tool's, or any in its schemas) past MCP_MAX_TEXT_CHARS, a title past MAX_TITLE_CHARS, or
    all its strings together past MCP_MAX_TOOL_TEXT_CHARS. Done first, so a huge text costs
    no poisoning check, diff or risk suggestion."""
    each, total = settings.MCP_MAX_TEXT_CHARS, settings.MCP_MAX_TOOL_TEXT_CHARS
    counted = 0
    stack: list[tuple[str, Any]] = [("", definition)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            counted += len(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                path = f"{where}.{key}" if where else str(key)
                counted += len(str(key))
                limit = {"description": each, "title": MAX_TITLE_CHARS}.get(key)
                if limit is not None and isinstance(item, str) and len(item) > limit:
                    cap = "MCP_MAX_TEXT_CHARS" if key == "description" else "the cap on titles"
                    raise Refused(
                        f"{path[:200]}: {len(item):,} characters, more than the {limit:,} a "
                        f"reviewer reads ({cap})"
                    )
                stack.append((path, item))
        elif isinstance(value, list):
            stack += [(f"{where}[{index}]", item) for index, item in enumerate(value)]
        if counted > total:
            raise Refused(
                f"its texts together pass {total:,} characters, more than a reviewer reads "
                "(MCP_MAX_TOOL_TEXT_CHARS)"
            )


def _declared_hash(declared: Declared) -> str:
    """What the sync compares to pass over a tool: everything it takes from the definition,
    titles included (people and models read them), whether or not the pin covers them."""
    encoded = json.dumps(declared.declared, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def _refusal(exc: Exception) -> str:
    if isinstance(exc, ContractInvalid):
        return "; ".join(f"{name}: {reason}" for name, reason in _lines(exc))[:1000]
    return str(exc)[:1000]


def _lines(exc: ContractInvalid) -> list[tuple[str, str]]:
    return [(name, reason) for name, reasons in exc.errors.items() for reason in reasons]


def _declared_apply(
    server: McpServer,
    declared: Declared,
    row: DeclaredTool | None,
    report: SyncReport,
    labelled: LabelIndex,
    risks: set[str],
    context: RegistryContext,
    *,
    approve: bool,
    actor: User | None,
) -> int | None:
    """Route one declared tool into review; the id of a ticket it opened (reviewers are told
    of it in the sync's digest), None when it opened none."""
    if row is not None:
        # The tool this declaration owns, by its record: never a tool found by name.
        tool = tool_lock(tool_id=row.tool_id)
        declared = replace(declared, name=tool.name)
    else:
        # Under the tool's lock, so a tool another source creates meanwhile is seen here.
        tool = tool_lock_or_create(name=declared.name)
        if DeclaredTool.objects.filter(tool=tool).exists() or tool.versions.exists():
            raise Refused(f"the registry already has {declared.name} from another source")
    approved = tool.current_version
    base = approved.document() if approved is not None else None
    risk_evidence: dict[str, Any] = {}
    risk = (
        _changed_risk(approved, declared, labelled, risks, risk_evidence)
        if approved is not None
        else _suggested(declared, labelled, risks, risk_evidence)
    )
    document = declared_document(declared, approved=base, risk=risk)
    open_ticket = row.ticket if row is not None and row.ticket is not None else None
    if open_ticket is not None and open_ticket.tool_id != tool.pk:
        open_ticket = None  # a ticket of another tool is never this declaration's to change
    if open_ticket is not None and open_ticket.status != ReviewTicket.Status.OPEN:
        open_ticket = None
    if (
        approved is not None
        and approved.definition is None
        and _unchanged(approved, document, declared)
    ):
        # Approved before versions kept their server's definition, and declared unchanged
        # since: its pin is now taken over what the server sends, without a ticket.
        contract_version_definition_record(version=approved, definition=declared.definition)
        report.repinned.append(declared.name)
        if open_ticket is None:
            _declared_record(server, declared, row, tool, row.ticket if row else None)
            return None
    opened: int | None = None
    evidence = _evidence(server, report.server_info, declared, base, document, risk_evidence)
    ticket: ReviewTicket | None
    if open_ticket is not None:
        ticket = ticket_proposal_replace(
            ticket=open_ticket,
            document=document,
            evidence=evidence,
            definition=declared.definition,
        )
        if ticket.status == ReviewTicket.Status.SUPERSEDED:
            report.withdrawn.append(declared.name)
        else:
            report.updated.append(declared.name)
    else:
        ticket = contract_propose(
            document=document,
            author=None,
            source=ContractVersion.Source.IMPORT,
            context=context,
            evidence=evidence,
            kind=ReviewTicket.Kind.NEW_TOOL if approved is None else ReviewTicket.Kind.CHANGE,
            notify=False,
            definition=declared.definition,
        )
        opened = ticket.pk if ticket is not None else None
        if approved is not None:
            if ticket is not None:
                report.changed.append(declared.name)
            else:
                report.unchanged += 1
        elif ticket is None:  # cannot happen without an approved version
            raise Refused("nothing to propose")
        else:
            alarms = [
                flag for flag in evidence["poisoning"] if flag["code"] not in INFORMATION_CODES
            ]
            if approve and not alarms:
                contract_publish(ticket=ticket, actor=actor, action=AuditEntry.Action.TRUSTED)
                report.published.append(declared.name)
            elif approve:
                # Trust on first use covers what nobody flagged; a flagged tool waits for a person.
                report.flagged[declared.name] = ", ".join(
                    sorted({str(flag["code"]) for flag in alarms})
                )
            else:
                report.proposed.append(declared.name)
            if row is None:
                for application in server.applications.filter(all_tools=False):
                    application.enabled_tools.add(tool)
    _declared_record(server, declared, row, tool, ticket)
    return opened if ticket is not None and ticket.status == ReviewTicket.Status.OPEN else None


def _unchanged(approved: ContractVersion, document: dict[str, Any], declared: Declared) -> bool:
    """Whether ``document`` says what ``approved`` says, the way versions stored before
    definitions were kept wrote a declaration's annotations counting as the same."""
    stored = contract_hash(approved.document())
    legacy = {**document, "annotations": legacy_annotations(declared)}
    return stored in (contract_hash(with_defaults(document)), contract_hash(with_defaults(legacy)))


def _declared_record(
    server: McpServer,
    declared: Declared,
    row: DeclaredTool | None,
    tool: Tool,
    ticket: ReviewTicket | None,
) -> None:
    if row is None:
        row = DeclaredTool(server=server, name=declared.local_name, tool=tool)
    row.definition_hash = declared.pin
    row.declared_hash = _declared_hash(declared)
    row.gone = False
    row.ticket = ticket
    row.save()


def _declared_gone(row: DeclaredTool, report: SyncReport) -> int | None:
    """A tool its server no longer declares: the ticket it had open is withdrawn (nothing is
    left to decide on it), and its retirement proposed, never done silently. The id of the
    retirement ticket, if one was opened."""
    tool = tool_lock(tool_id=row.tool_id)
    approved = tool.current_version
    ticket = None
    if (
        row.ticket is not None
        and row.ticket.tool_id == tool.pk
        and ticket_withdraw(ticket=row.ticket, reason="its server no longer declares the tool")
    ):
        report.withdrawn.append(tool.name)
    if approved is not None and approved.lifecycle == Tool.Lifecycle.ACTIVE:
        document = {**approved.document(), "status": Tool.Lifecycle.DEPRECATED}
        ticket = contract_propose(
            document=document,
            author=None,
            source=ContractVersion.Source.IMPORT,
            evidence={
                "source": "mcp",
                "server": row.server.name,
                "declared_name": row.name,
                "gone": "its server no longer declares it",
            },
            kind=ReviewTicket.Kind.RETIREMENT,
            notify=False,
        )
        report.retired.append(tool.name)
    DeclaredTool.objects.filter(pk=row.pk).update(gone=True, ticket=ticket or row.ticket)
    return ticket.pk if ticket is not None else None


def _suggested(
    declared: Declared, labelled: LabelIndex, risks: set[str], out: dict[str, Any]
) -> str:
    """The suggested risk of a new tool, with its evidence for the reviewer. The declared
    annotations travel in the document beside it: hints are claims, never approvals."""
    suggestion = suggest_risk(
        name=declared.name,
        description=declared.declared["description"],
        produces=[],
        permissions=[],
        labelled=labelled,
        annotations=declared.declared.get("annotations"),
        arguments=arguments_of(declared.declared),
        lex=risk_lexicon(),
    )
    out.update(
        suggested=suggestion.risk,
        confidence=round(suggestion.confidence, 3),
        evidence=suggestion.evidence,
    )
    return suggestion.risk if suggestion.risk in risks else "high"


def _changed_risk(
    approved: ContractVersion,
    declared: Declared,
    labelled: LabelIndex,
    risks: set[str],
    out: dict[str, Any],
    ranks: dict[str, int] | None = None,
) -> str:
    """The risk a declared change is proposed at: the approved one, raised to what the words
    and hints of the new definition suggest when that is more than the approved definition's
    suggest (the change itself moved toward danger), and to at least WIDENED_HINT_RISK when a
    hint widens what the tool may do. Never lower: a reviewer lowers a risk, a server does not."""
    if ranks is None:
        ranks = dict(RiskLevel.objects.values_list("name", "rank"))
    chosen = approved.risk.name
    widened = widened_hints(approved.annotations, declared.declared["annotations"])
    if widened and WIDENED_HINT_RISK in risks and ranks[WIDENED_HINT_RISK] > ranks[chosen]:
        chosen = WIDENED_HINT_RISK
    document = approved.document()
    before = suggest_risk(
        name=declared.name,
        description=document["description"],
        produces=[],
        permissions=[],
        labelled=labelled,
        annotations=document.get("annotations"),
        arguments=arguments_of(document),
        lex=risk_lexicon(),
    )
    suggested: dict[str, Any] = {}
    after = _suggested(declared, labelled, risks, suggested)
    if ranks.get(after, 0) > max(ranks.get(before.risk, 0), ranks[chosen]):
        chosen = after
        out.update(suggested)
    return chosen


def _evidence(
    server: McpServer,
    server_info: dict[str, str],
    declared: Declared,
    base: dict[str, Any] | None,
    document: dict[str, Any],
    risk: dict[str, Any],
) -> TicketEvidence:
    """What the reviewer reads beside the diff: where it came from, its pin, the poisoning
    flags, and whether a change breaks callers or only widens."""
    flags = contract_diff_flags(base, with_defaults(document))
    evidence: TicketEvidence = {
        "source": "mcp",
        "server": server.name,
        "server_info": dict(server_info),
        # What the worker runs or reaches: a reviewer judges the package, not only the name.
        "runs": shlex.join(server.command) if server.command else server.url,
        "declared_name": declared.local_name,
        "definition_hash": declared.pin,
        "poisoning": [
            {"code": flag.get("code"), "where": flag.get("where"), "message": flag.get("message")}
            for flag in flags
        ],
    }
    if risk:
        # The ticket page explains a suggestion from "risk_evidence", as for inferred tools.
        evidence["risk"] = {"suggested": risk["suggested"], "confidence": risk["confidence"]}
        evidence["risk_evidence"] = risk["evidence"]
    if base is not None:
        evidence["compatibility"] = compatibility(
            base.get("input_schema"),
            document.get("input_schema"),
            base.get("output_schema"),
            document.get("output_schema"),
        )
    return evidence
