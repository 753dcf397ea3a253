from django.db import models
from django.db.models import Q

from registry.models import Application, ContractVersion, Tool


class Trace(models.Model):
    """One tool call an agent runtime made, as it reported it.

    A trace belongs to the application whose token sent it, and is unique on (trace_id, step)
    within that application; traces an operator imported without naming one (``application``
    empty) are unique among themselves. One application's keys never shadow another's.
    """

    class Status(models.TextChoices):
        SUCCESS = "success"
        ERROR = "error"

    trace_id = models.CharField(max_length=200)
    step = models.PositiveIntegerField()
    tool_name = models.CharField(max_length=200)  # indexed with id: trace_tool_idx
    # No index: nothing looks traces up by tool. A trace names a tool only if the tool was
    # approved when it arrived, and an approved tool has audit entries, which protect it from
    # deletion, so even SET_NULL never runs (Django raises ProtectedError before any update).
    tool = models.ForeignKey(
        Tool,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="traces",
        db_index=False,
    )
    unknown_tool = models.BooleanField(
        default=False, help_text="The registry had no such tool when the trace arrived."
    )
    args = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices)
    state_before = models.JSONField(default=dict)
    state_after = models.JSONField(default=dict)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)
    application = models.ForeignKey(
        Application,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="traces",
        help_text="The application whose runtime reported it; empty: an operator's import.",
        db_index=False,  # indexed with id: trace_application_idx
    )
    # False from the moment ingest stores a trace until the fold (``learning.fold.traces_fold``)
    # has added it to its tool's statistics, in the same transaction as the statistics.
    aggregated = models.BooleanField(default=False)
    # The trace's data flow (``learning.dataflow``), found at ingest where the user's words are
    # (never stored), kept until the fold has added it to the statistics; then emptied.
    dataflow = models.JSONField(null=True, blank=True)
    # A default the database holds (no table rewrite when the column is added, and a row written
    # without it, by an older process during a deploy, is a captured call).
    captured = models.BooleanField(
        default=True,
        db_default=True,
        help_text="The call came with its arguments and result; if not, it counts in the tool's "
        "days (calls, errors, latency) but is learnt from in no aggregate.",
    )

    class Meta:
        ordering = ["-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["application", "trace_id", "step"],
                condition=Q(application__isnull=False),
                name="unique_trace_step_per_application",
            ),
            models.UniqueConstraint(
                fields=["trace_id", "step"],
                condition=Q(application__isnull=True),
                name="unique_operator_trace_step",
            ),
        ]
        indexes = [
            # The admin's list filtered by a tool or an application, newest first, reads a page
            # of one index (the filter's rows in id order) rather than walking the primary key
            # backwards past every other tool's or application's traces. Each also serves its
            # column alone (a tool's traces at pruning, an application's at deletion), so
            # neither column has an index of its own.
            models.Index(fields=["tool_name", "id"], name="trace_tool_idx"),
            models.Index(fields=["application", "id"], name="trace_application_idx"),
            # A run by its id: the admin's search, and drift evidence finding the runs behind a
            # few example ids without reading the tool's other traces. The unique constraints
            # lead with the application, or hold only operators' traces.
            models.Index(fields=["trace_id"], name="trace_run_idx"),
            # The admin's error filter: errors are few, so a page of them is not a walk
            # backwards through every success.
            models.Index(fields=["id"], condition=Q(status="error"), name="trace_error_idx"),
            # The fold claims the oldest traces not folded yet, and a refresh a tool's: small,
            # partial indexes (only the backlog is in them).
            models.Index(fields=["id"], condition=Q(aggregated=False), name="trace_unfolded_idx"),
            models.Index(
                fields=["tool_name", "id"], condition=Q(aggregated=False), name="trace_pending_idx"
            ),
            models.Index(fields=["occurred_at"], name="trace_occurred_idx"),
            # The unregistered tool names an application has used: its allowance is counted here.
            models.Index(
                fields=["application", "tool_name"],
                condition=Q(unknown_tool=True),
                name="trace_unknown_name_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}#{self.step} {self.tool_name}"


class ToolStats(models.Model):
    """What inference needs of a tool's traces, folded incrementally; survives trace pruning."""

    tool_name = models.CharField(max_length=200, unique=True)
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="stats"
    )
    aggregate = models.JSONField(default=dict)
    since_version = models.ForeignKey(
        ContractVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    aggregate_since_version = models.JSONField(
        default=dict, help_text="Only traces that arrived after since_version was approved."
    )
    traces_total = models.PositiveBigIntegerField(default=0)
    traces_since_version = models.PositiveBigIntegerField(default=0)
    dirty = models.BooleanField(default=False, help_text="New traces since the last inference.")
    # Counts writes of the aggregates: a refresh clears ``dirty`` only if it is unchanged since
    # the refresh read them, so a fold committed in between keeps the row dirty.
    changes = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    inferred_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tool_name"]
        verbose_name_plural = "tool statistics"

    def __str__(self) -> str:
        return f"stats of {self.tool_name}"


class InferredContract(models.Model):
    """The latest contract inferred from a tool's traces: a suggestion, never served."""

    tool_name = models.CharField(max_length=200, unique=True)
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="inferred"
    )
    document = models.JSONField()
    support = models.PositiveBigIntegerField()
    confidence = models.JSONField(default=dict)
    differs = models.BooleanField(
        default=False, help_text="The inferred contract differs from the approved one."
    )
    differing_fields = models.JSONField(default=list, blank=True)
    inferred_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tool_name"]
        # The inferred contracts written since a time: what the risk label index reads again
        # after a publication (``learning.selectors.risk_label_index``).
        indexes = [models.Index(fields=["inferred_at"], name="inferred_written_idx")]

    def __str__(self) -> str:
        return f"inferred {self.tool_name}"


class DriftReport(models.Model):
    """A difference between what a tool does and what its approved contract says."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="drift_reports")
    base = models.ForeignKey(ContractVersion, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64, unique=True)
    items = models.JSONField()
    evidence = models.JSONField(default=dict)
    ticket = models.ForeignKey(
        "reviews.ReviewTicket", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    auto_published = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"drift of {self.tool.name}"


class OtelTrace(models.Model):
    """An OpenTelemetry trace whose tool-call spans are buffered until it is assembled.

    Spans of one trace may arrive in several requests and in any order; they wait here until
    the trace is complete (its root span arrived) and settled, or a quiet period passed, so the
    steps never depend on how they were batched. Unique per application: one application's
    trace ids never reach another's buffer.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        ASSEMBLED = "assembled"

    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="otel_traces"
    )
    trace_id = models.CharField(max_length=32, help_text="The OpenTelemetry trace id, in hex.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    complete = models.BooleanField(default=False, help_text="Its root span has arrived.")
    span_count = models.PositiveIntegerField(default=0)
    span_bytes = models.PositiveBigIntegerField(
        default=0, help_text="What its buffered spans weigh as sent, in bytes."
    )
    first_received_at = models.DateTimeField()
    last_received_at = models.DateTimeField()
    assembled_at = models.DateTimeField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=0, help_text="Tool calls made into traces.")
    problems = models.JSONField(default=list, blank=True, help_text="Steps ingest refused.")

    class Meta:
        ordering = ["-last_received_at"]
        verbose_name = "OpenTelemetry trace"
        constraints = [
            models.UniqueConstraint(
                fields=["application", "trace_id"], name="unique_otel_trace_per_application"
            )
        ]
        indexes = [
            models.Index(fields=["state", "last_received_at"], name="otel_trace_ready_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} ({self.state})"


class OtelSpan(models.Model):
    """One buffered span (a tool call, or the span carrying the initial state)."""

    trace = models.ForeignKey(OtelTrace, on_delete=models.CASCADE, related_name="spans")
    span_id = models.CharField(max_length=16)
    record = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trace", "span_id"], name="unique_otel_span")
        ]

    def __str__(self) -> str:
        return self.span_id


class SpanIntake(models.Model):
    """How many spans an application's runtimes sent through OTLP, and what became of them."""

    application = models.OneToOneField(
        Application, on_delete=models.CASCADE, related_name="span_intake"
    )
    received = models.PositiveBigIntegerField(default=0)
    buffered = models.PositiveBigIntegerField(
        default=0, help_text="Tool-call and state spans kept (repeats included)."
    )
    ignored = models.PositiveBigIntegerField(default=0, help_text="Spans that are not tool calls.")
    ignored_reasons = models.JSONField(
        default=dict,
        blank=True,
        help_text="Why spans were ignored: the kind each said it was (a few kinds), and how many.",
    )
    uncaptured = models.PositiveBigIntegerField(
        default=0,
        help_text="Tool calls sent without arguments or result (content capture off): counted, "
        "not learnt from.",
    )
    rejected = models.PositiveBigIntegerField(default=0)
    last_received_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["application__name"]
        verbose_name = "span intake"

    def __str__(self) -> str:
        return f"spans of {self.application}"


class CandidateVariable(models.Model):
    """A result field of a tool that the vocabulary does not know, or one whose values fed an
    argument under another name (``alias_of``): counted, never added silently.

    A person may add it to the vocabulary (admin action, through a service): as a variable, or
    as an alias of the variable it fed.
    """

    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="candidate_variables"
    )
    tool_name = models.CharField(max_length=200)
    name = models.CharField(max_length=100)
    alias_of = models.CharField(
        max_length=100,
        blank=True,
        help_text="The variable this field's values fed under another name: adopting the "
        "candidate adds the field as its alias.",
    )
    count = models.PositiveBigIntegerField(default=0)
    examples = models.JSONField(default=list, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-count"]
        constraints = [
            models.UniqueConstraint(
                fields=["application", "tool_name", "name"], name="unique_candidate_variable"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tool_name})"


class ToolDayStats(models.Model):
    """One tool's calls on one day (UTC, by when they occurred), folded at ingest beside
    ToolStats and kept after the traces are pruned: what the tool-health charts draw.

    Bounded: one row per tool and day, and durations go into the aggregates' fixed logarithmic
    buckets (``learning.aggregates``), so p50 and p95 come within 7.5 % from a few hundred
    integers whatever the number of calls.
    """

    tool_name = models.CharField(max_length=200)
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="day_stats"
    )
    day = models.DateField()
    calls = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    durations = models.JSONField(default=dict, help_text="Duration histogram: bucket → calls.")
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tool_name", "day"]
        verbose_name = "tool day"
        verbose_name_plural = "tool days"
        constraints = [
            models.UniqueConstraint(fields=["tool_name", "day"], name="unique_tool_day"),
        ]
        indexes = [models.Index(fields=["day"], name="tool_day_day_idx")]

    def __str__(self) -> str:
        return f"{self.tool_name} on {self.day}"
