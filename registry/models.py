import hashlib
import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import F, Q

from .contract import HASHED_ONLY_WHEN_SET, STORED_FIELDS
from .pins import contract_pin, definition_hash
from .validation import TOOL_NAME, VARIABLE_NAME, export_name, policy_errors


class StateVariable(models.Model):
    """One word of the task-state vocabulary; inference and filtering speak canonical names."""

    name = models.CharField(
        max_length=100, unique=True, validators=[RegexValidator(VARIABLE_NAME.pattern)]
    )
    description = models.TextField(blank=True)
    aliases = models.JSONField(
        default=list, blank=True, help_text="Surface forms other runtimes use, e.g. eventId."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not isinstance(self.aliases, list) or not all(
            isinstance(alias, str) and alias for alias in self.aliases
        ):
            raise ValidationError({"aliases": "Must be a list of non-empty names."})
        taken = set()
        for other in StateVariable.objects.exclude(pk=self.pk):
            taken.add(other.name)
            taken.update(other.aliases)
        clashes = sorted({self.name, *self.aliases} & taken)
        if clashes:
            raise ValidationError(
                {"aliases": f"Already used by another variable: {', '.join(clashes)}."}
            )


class RiskLevel(models.Model):
    name = models.SlugField(max_length=40, unique=True)
    rank = models.PositiveSmallIntegerField(unique=True, help_text="Higher means riskier.")
    description = models.TextField(blank=True)
    approvals_required = models.PositiveSmallIntegerField(default=1)
    ticket_on_drift = models.BooleanField(
        default=False, help_text="Open a review ticket when a tool's behaviour drifts."
    )
    ticket_on_latency = models.BooleanField(
        default=False,
        help_text="p95 latency growth past the documented factor is drift at this level (ticketed "
        "where drift is); otherwise it is only reported.",
    )
    auto_approve_inferred = models.BooleanField(
        default=False, help_text="A clean inferred change to a tool at this level publishes alone."
    )
    min_support = models.PositiveIntegerField(
        default=30, help_text="Traces since the approved version needed before drift is judged."
    )
    confirm_calls = models.BooleanField(
        default=False,
        help_text="The MCP gateway asks the user to confirm each call of a tool at this level "
        "(MCP elicitation) and refuses it where the client cannot ask.",
    )
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="reviewed_risk_levels",
        help_text="Emailed when a ticket opens at this level; empty: every member of Reviewers.",
    )

    class Meta:
        ordering = ["rank"]
        constraints = [
            models.CheckConstraint(
                condition=Q(approvals_required__gte=1), name="risk_needs_one_approval"
            )
        ]

    def __str__(self) -> str:
        return self.name


class Permission(models.Model):
    name = models.SlugField(max_length=60, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tool(models.Model):
    class Lifecycle(models.TextChoices):
        ACTIVE = "active"
        DEPRECATED = "deprecated"

    name = models.CharField(
        max_length=200, unique=True, validators=[RegexValidator(TOOL_NAME.pattern)]
    )
    # The function name the exports give the tool (``export_name``), unique so that two names
    # a model would receive as one (``aa_.y`` and ``aa._y``) can never both exist, however
    # they arrive. Set from ``name`` on every save.
    export_name = models.CharField(max_length=200, unique=True, editable=False)
    owner = models.CharField(max_length=200, blank=True)
    lifecycle = models.CharField(max_length=20, choices=Lifecycle.choices, default=Lifecycle.ACTIVE)
    current_version = models.OneToOneField(
        "ContractVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.export_name = export_name(self.name)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "name" in update_fields:
            kwargs["update_fields"] = {*update_fields, "export_name"}
        super().save(*args, **kwargs)

    @property
    def domain(self) -> str:
        return self.name.split(".", 1)[0] if "." in self.name else ""


class ContractVersion(models.Model):
    """One version of a tool's contract. An approved version never changes: a change is new."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        PROPOSED = "proposed"
        APPROVED = "approved"
        SUPERSEDED = "superseded"
        REJECTED = "rejected"

    class Source(models.TextChoices):
        MANUAL = "manual"
        IMPORT = "import"
        INFERRED = "inferred"

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    description = models.TextField()
    input_schema = models.JSONField(default=dict)
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text="MCP tool annotations (readOnlyHint, destructiveHint, idempotentHint, "
        "openWorldHint, title), as the tool's author declared them.",
    )
    requires = models.JSONField(default=list, blank=True)
    produces = models.JSONField(default=list, blank=True)
    effects = models.JSONField(default=dict, blank=True)
    risk = models.ForeignKey(RiskLevel, on_delete=models.PROTECT, related_name="versions")
    cost = models.JSONField(default=dict, blank=True)
    permissions = models.JSONField(default=list, blank=True)
    invariants = models.JSONField(default=list, blank=True)
    config_params = models.JSONField(default=list, blank=True)
    dependencies = models.JSONField(default=list, blank=True)
    resource_limits = models.JSONField(default=dict, blank=True)
    lifecycle = models.CharField(
        max_length=20,
        choices=Tool.Lifecycle.choices,
        default=Tool.Lifecycle.ACTIVE,
        help_text="The tool's lifecycle once this version is approved (the document's status).",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PROPOSED)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.MANUAL)
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="derived"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    content_hash = models.CharField(max_length=64, editable=False)
    definition = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The MCP tool definition this version was proposed from, exactly as its "
        "server sent it in tools/list (every key kept); its hash is the pin.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["tool__name", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["tool", "number"], name="unique_version_number"),
            # The database, not hope, keeps a tool at one approved version under concurrency.
            models.UniqueConstraint(
                fields=["tool"], condition=Q(status="approved"), name="one_approved_version"
            ),
            models.CheckConstraint(condition=Q(number__gte=1), name="version_number_positive"),
            models.CheckConstraint(
                condition=~Q(based_on=F("pk")), name="version_not_based_on_itself"
            ),
        ]
        indexes = [models.Index(fields=["tool", "status"])]

    def __str__(self) -> str:
        return f"{self.tool.name} v{self.number} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        self.content_hash = self.compute_hash()
        super().save(*args, **kwargs)

    CONTRACT_FIELDS = STORED_FIELDS

    def document(self) -> dict[str, Any]:
        """The contract document of docs/formats.md (import, export and API speak it)."""
        document = {"name": self.tool.name}
        for field in self.CONTRACT_FIELDS:
            document[field] = getattr(self, field)
        document["risk"] = self.risk.name
        document["status"] = self.lifecycle
        return document

    def compute_hash(self) -> str:
        return contract_hash(self.document())

    @property
    def definition_hash(self) -> str:
        """The pin (registry/pins.py): the hash of the definition its MCP server declared, or
        of the one the registry serves for a contract no server declared."""
        if self.definition is not None:
            return definition_hash(self.definition)
        return contract_pin(self.document())


def contract_hash(document: dict[str, Any]) -> str:
    """Hash of what a runtime sees; the version number is bookkeeping and does not count."""
    content = {
        k: v
        for k, v in document.items()
        if k != "version" and not (k in HASHED_ONLY_WHEN_SET and not v)
    }
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


class Application(models.Model):
    """An agent product consuming contracts: which tools, permissions and risk it may see."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    all_tools = models.BooleanField(
        default=False, help_text="Enable every tool, present and future."
    )
    enabled_tools = models.ManyToManyField(Tool, blank=True, related_name="applications")
    all_permissions = models.BooleanField(default=False)
    allowed_permissions = models.ManyToManyField(Permission, blank=True)
    max_risk = models.ForeignKey(
        RiskLevel,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        help_text="The riskiest level it may see; empty means every level.",
    )
    unknown_tool_names = models.PositiveIntegerField(
        default=20,
        help_text="How many distinct unregistered tool names its traces may report (kept for "
        "learning until pruned); 0 refuses them all.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PlanningPolicy(models.Model):
    """Cross-tool, plan-wide rules of one application; a policy never travels with a tool."""

    application = models.OneToOneField(Application, on_delete=models.CASCADE, related_name="policy")
    mandate = models.TextField(blank=True, help_text="Appended to the planner's prompt.")
    rules = models.JSONField(default=list, blank=True)
    config_params = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "planning policies"

    def __str__(self) -> str:
        return f"policy of {self.application.name}"

    def clean(self) -> None:
        errors = policy_errors(self.document())
        if errors:
            raise ValidationError({field: reasons for field, reasons in errors.items()})

    def document(self) -> dict[str, Any]:
        return {"mandate": self.mandate, "rules": self.rules, "config_params": self.config_params}


class Revision(models.Model):
    """A single counter that moves whenever what runtimes can see changes; runtimes poll it."""

    value = models.PositiveBigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"revision {self.value}"
