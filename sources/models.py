"""MCP servers as sources of declared tools, and what each last declared."""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django_celery_beat.models import PeriodicTask

from registry.models import Application, Tool
from reviews.models import ReviewTicket

from .client import url_allowed
from .declared import SERVER_NAME

HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}\Z")
# Header values come from the worker's environment; only variables meant for MCP servers may
# be named, so a form cannot send SECRET_KEY or DATABASE_URL to a server, and each only where
# MCP_SECRET_DESTINATIONS says (``McpServer.secret_refusal``).
ENV_VAR_NAME = re.compile(r"^MCP_[A-Z0-9_]{1,100}\Z")
MAX_HEADERS = 20  # and variables of a stdio server's environment
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}\Z")


class McpServer(models.Model):
    """An MCP server whose tools are contracts named ``<name>.<tool>`` in the registry."""

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command the worker runs)"
        HTTP = "http", "Streamable HTTP"
        SSE = "sse", "HTTP+SSE (legacy)"

    class Outcome(models.TextChoices):
        NEVER = "never", "never synced"
        OK = "ok"
        PARTIAL = "partial", "ok, some tools refused"
        FAILED = "failed"

    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[RegexValidator(SERVER_NAME)],
        help_text="The namespace of its tools: a tool t is the contract <name>.t. Set when the "
        "server is added, never changed.",
    )
    transport = models.CharField(max_length=10, choices=Transport.choices)
    command = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="stdio: the program and its arguments; set only by operators "
        "(manage.py mcp_servers add --stdio).",
    )
    url = models.URLField(
        max_length=500, blank=True, help_text="Streamable HTTP (or legacy SSE) endpoint."
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text="Request headers as {header: ENV_VAR}: each value is read from the worker's "
        "environment variable of that name (MCP_...) when syncing, never stored; a variable "
        "goes only to the addresses an operator bound it to (MCP_SECRET_DESTINATIONS).",
    )
    env = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="stdio: environment variables of the server as {NAME: ENV_VAR}: each value is "
        "read from the worker's environment variable of that name (MCP_...) when syncing, "
        "never stored; set only by operators (manage.py mcp_servers add --env).",
    )
    registry_entry = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="Read from an MCP registry (manage.py mcp_servers add --from-registry): "
        "{registry, name, version, source, server}, server being its server.json as read; "
        "empty for a server added by hand, or once its command or URL is edited.",
    )
    applications = models.ManyToManyField(
        Application,
        blank=True,
        related_name="mcp_servers",
        help_text="Applications whose runtimes may see its tools once approved.",
    )
    enabled = models.BooleanField(default=True)
    schedule = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sync_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_duration_ms = models.PositiveIntegerField(null=True, blank=True, editable=False)
    last_sync_outcome = models.CharField(
        max_length=10, choices=Outcome.choices, default=Outcome.NEVER, editable=False
    )
    last_sync_error = models.TextField(blank=True, editable=False)
    tool_count = models.PositiveIntegerField(null=True, blank=True, editable=False)
    last_sync_report = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(transport="stdio", url="")
                | models.Q(transport__in=["http", "sse"], command=[]),
                name="mcp_server_one_transport",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def delete(self, *args, **kwargs):
        # Its beat entry goes with it: a schedule for a server that is no more is noise.
        schedule_id = self.schedule_id
        deleted = super().delete(*args, **kwargs)
        PeriodicTask.objects.filter(pk=schedule_id).delete()
        return deleted

    def clean(self) -> None:
        errors: dict[str, str] = {}
        name_error = self._namespace_error()
        if name_error:
            errors["name"] = name_error
        if self.transport == self.Transport.STDIO:
            if not self.command or not all(isinstance(a, str) and a for a in self.command):
                errors["command"] = "A stdio server needs a command (set by an operator)."
            if self.url:
                errors["url"] = "A stdio server has no URL."
        elif self.transport in (self.Transport.HTTP, self.Transport.SSE):
            if self.command:
                errors["command"] = "An HTTP server has no command."
            if not self.url:
                errors["url"] = "An HTTP server needs a URL."
            elif not url_allowed(self.url, settings.MCP_URL_ALLOWLIST):
                errors["url"] = (
                    "Not under any address of the MCP_URL_ALLOWLIST setting; an operator adds "
                    "the server's origin there first."
                )
        if not isinstance(self.headers, dict) or len(self.headers) > MAX_HEADERS:
            errors["headers"] = f"Must be an object of at most {MAX_HEADERS} headers."
        else:
            for header, variable in self.headers.items():
                if not HEADER_NAME.fullmatch(header):
                    errors["headers"] = f"{header[:100]!r} is not a header name."
                elif not isinstance(variable, str) or not ENV_VAR_NAME.fullmatch(variable):
                    errors["headers"] = (
                        f"{header}: the value names an environment variable starting with MCP_ "
                        "(capitals, digits, '_'), never the value itself."
                    )
            if "headers" not in errors and (refusal := self.secret_refusal()):
                errors["headers"] = refusal
        env_error = _env_error(self.env, stdio=self.transport == self.Transport.STDIO)
        if env_error:
            errors["env"] = env_error
        if errors:
            raise ValidationError(errors)

    def secret_refusal(self) -> str:
        """Why one of its headers' secrets may not go to this server, or "". Each secret goes
        only to the addresses an operator bound it to (MCP_SECRET_DESTINATIONS): a user who
        may edit servers can name a variable, never choose where its value is sent."""
        destinations = settings.MCP_SECRET_DESTINATIONS
        for header, variable in self.headers.items():
            allowed = destinations.get(variable)
            if not allowed:
                return (
                    f"{header}: {variable} is bound to no address; an operator lists the "
                    "addresses it may be sent to in MCP_SECRET_DESTINATIONS."
                )
            if self.transport == self.Transport.STDIO or not url_allowed(self.url, allowed):
                return (
                    f"{header}: {variable} may be sent only to {', '.join(allowed)} "
                    "(MCP_SECRET_DESTINATIONS), not to this server."
                )
        return ""

    def _namespace_error(self) -> str:
        """Why ``name`` cannot be this server's namespace, or "".

        A server proposes only for the tools its declarations own (``DeclaredTool.tool``), never
        by name; this keeps the names telling the same story. A rename is refused rather than
        carried along: the tools' names would change under the applications using them.
        """
        if not isinstance(self.name, str) or not SERVER_NAME.fullmatch(self.name):
            # The field's validator reads "$", which also matches before a final newline.
            return "Letters, digits, '_' and '-', starting with a letter, 40 at most."
        if self.pk is not None:
            stored = McpServer.objects.filter(pk=self.pk).values_list("name", flat=True).first()
            if stored is not None and stored != self.name:
                return (
                    f"A server's name is the namespace of its tools and never changes (this one "
                    f"is {stored!r}); to use another, add a server under the new name with "
                    "manage.py mcp_servers add."
                )
        foreign = Tool.objects.filter(name__startswith=f"{self.name}.")
        if self.pk is not None:
            foreign = foreign.exclude(declared__server_id=self.pk)
        taken = foreign.order_by("name").values_list("name", flat=True).first()
        if taken is not None:
            return (
                f"The namespace {self.name!r} already holds tools of another source or of none "
                f"({taken}); a server takes a namespace of its own."
            )
        return ""


def _env_error(env: object, *, stdio: bool) -> str:
    if not isinstance(env, dict) or len(env) > MAX_HEADERS:
        return f"Must be an object of at most {MAX_HEADERS} variables."
    if env and not stdio:
        return "Only a stdio server has an environment."
    for name, variable in env.items():
        if not ENV_NAME.fullmatch(name):
            return f"{name[:100]!r} is not an environment variable name."
        if not isinstance(variable, str) or not ENV_VAR_NAME.fullmatch(variable):
            return (
                f"{name}: the value names an environment variable starting with MCP_ "
                "(capitals, digits, '_'), never the value itself."
            )
    return ""


class DeclaredTool(models.Model):
    """One tool a server declares: its pin as last seen, and the open ticket that carries it."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="declared_tools")
    name = models.CharField(max_length=200, help_text="The tool's name on its server.")
    tool = models.OneToOneField(Tool, on_delete=models.PROTECT, related_name="declared")
    definition_hash = models.CharField(max_length=64)
    declared_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="SHA-256 of all the sync took from the definition, titles included: a sync "
        "passes over a tool only while this is unchanged.",
    )
    gone = models.BooleanField(
        default=False, help_text="No longer declared by its server (a retirement is proposed)."
    )
    ticket = models.ForeignKey(
        ReviewTicket,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The latest ticket this declaration opened.",
    )
    first_seen_at = models.DateTimeField(auto_now_add=True)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["server__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="one_declaration_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.server.name}.{self.name}"
