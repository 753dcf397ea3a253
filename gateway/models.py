"""What the gateway refused: a call the contract stopped before it reached its tool.

Forwarded calls are traces (``learning.Trace``), learned from like any other; a refusal is not
the tool's behaviour, so it is kept here, beside them, under the same trace id and step.
"""

from django.db import models

from registry.models import Application


class Refusal(models.Model):
    """One call the gateway refused, the rule that refused it and what the caller was told."""

    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="gateway_refusals"
    )
    trace_id = models.CharField(max_length=200)
    step = models.PositiveIntegerField()
    tool = models.CharField(max_length=200)
    rule = models.CharField(
        max_length=64, help_text="approved, input_schema, an invariant's id, pin..."
    )
    field = models.CharField(max_length=200, blank=True)
    message = models.TextField()
    args = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()

    class Meta:
        ordering = ["-occurred_at"]
        constraints = [
            models.UniqueConstraint(fields=["trace_id", "step"], name="one_refusal_per_step")
        ]
        indexes = [models.Index(fields=["application", "-occurred_at"])]

    def __str__(self) -> str:
        return f"{self.tool} refused ({self.rule}) at {self.trace_id}#{self.step}"


class ApplicationSetting(models.Model):
    """How the gateway treats one application's calls (absent: the defaults)."""

    class Requires(models.TextChoices):
        OFF = "off", "off: not checked"
        WARN = "warn", "warn: forwarded, the result says what was missing"
        ENFORCE = "enforce", "enforce: refused"

    application = models.OneToOneField(
        Application, on_delete=models.CASCADE, related_name="gateway_setting"
    )
    requires = models.CharField(
        max_length=10,
        choices=Requires.choices,
        default=Requires.WARN,
        help_text="A call whose contract requires a variable no earlier call of its session "
        "produced.",
    )
    calls_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Calls a minute this application may make through the gateway, every gateway "
        "process together; past it a call is refused with the time to wait. Empty: "
        "MCP_GATEWAY_CALLS_PER_MINUTE; 0: no limit.",
    )

    class Meta:
        verbose_name = "gateway setting"

    def __str__(self) -> str:
        return f"gateway setting of {self.application.name}"
