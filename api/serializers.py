from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry.models import ContractVersion


# A ContractVersion, or many with many=True, which the stubs cannot type as one parameter.
class ContractSerializer(serializers.Serializer[Any]):
    """An approved contract document with its version bookkeeping."""

    name = serializers.CharField(source="tool.name")
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    output_schema = serializers.JSONField(allow_null=True)
    annotations = serializers.JSONField()
    requires = serializers.ListField(child=serializers.CharField())
    produces = serializers.ListField(child=serializers.CharField())
    effects = serializers.JSONField()
    risk = serializers.CharField(source="risk.name")
    cost = serializers.JSONField()
    permissions = serializers.ListField(child=serializers.CharField())
    invariants = serializers.JSONField()
    config_params = serializers.JSONField()
    dependencies = serializers.ListField(child=serializers.CharField())
    resource_limits = serializers.JSONField()
    status = serializers.CharField(source="lifecycle")
    version = serializers.IntegerField(source="number")
    approved_at = serializers.DateTimeField()
    content_hash = serializers.CharField()
    definition_hash = serializers.CharField(
        help_text="The pin: SHA-256 of the tool's MCP definition (docs/api.md, pinning)."
    )

    class Meta:
        model = ContractVersion


class RevisionSerializer(serializers.Serializer[dict[str, Any]]):
    revision = serializers.IntegerField()


class TraceIn(serializers.Serializer[dict[str, Any]]):
    """One trace as docs/formats.md gives it (validated item by item by the ingest service)."""

    trace_id = serializers.CharField(max_length=200)
    step = serializers.IntegerField(min_value=0)
    tool = serializers.CharField(max_length=200)
    args = serializers.JSONField(required=False)
    status = serializers.ChoiceField(choices=["success", "error"])
    state_before = serializers.JSONField(required=False)
    state_after = serializers.JSONField(required=False)
    output = serializers.JSONField(required=False, allow_null=True)
    error = serializers.CharField(required=False, allow_null=True)
    duration_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    occurred_at = serializers.DateTimeField(required=False)
    messages = serializers.ListField(child=serializers.DictField(), required=False)


class TraceProblem(serializers.Serializer[dict[str, Any]]):
    index = serializers.IntegerField()
    field = serializers.CharField()
    reason = serializers.CharField()


class TraceIngestResult(serializers.Serializer[dict[str, Any]]):
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    rejected = serializers.IntegerField()
    problems = TraceProblem(many=True)


class ErrorDetail(serializers.Serializer[dict[str, Any]]):
    code = serializers.CharField()
    message = serializers.CharField()
    # The error shape's key is "fields", which a Serializer also names its own field list.
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))  # type: ignore[assignment]


class ErrorSerializer(serializers.Serializer[dict[str, Any]]):
    error = ErrorDetail()


class BoundedListField(serializers.ListField):
    """A list whose length is checked before its items.

    DRF checks each item first and the length after, so 30,000 bad items in 100 KB of body
    would make 30,000 errors (300 times the body in memory) before the length is refused.
    """

    def to_internal_value(self, data):
        if isinstance(data, list) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "array",
                "items": {"type": "string", "maxLength": 100},
                "maxItems": 1000,
                "description": "the names of the variables the state holds",
            },
            {
                "type": "object",
                "additionalProperties": True,
                "description": "the state's variables and their values",
            },
        ]
    }
)
class StateField(serializers.Field[list[str] | dict[str, Any], Any, Any, Any]):
    """A state in either shape: a list of variable names, or an object of values by name.

    The internal value keeps the shape (a list, or a dict); ``state_names`` reads the names.
    """

    default_error_messages = {
        "invalid": "Expected a list of variable names or an object of values.",
    }

    def __init__(self, **kwargs):
        self.names = BoundedListField(child=serializers.CharField(max_length=100), max_length=1000)
        self.values = serializers.DictField()
        super().__init__(**kwargs)

    def bind(self, field_name, parent):
        super().bind(field_name, parent)
        # The inner fields report errors under this field's name.
        self.names.bind(field_name, parent)
        self.values.bind(field_name, parent)

    def to_internal_value(self, data):
        if isinstance(data, list):
            return self.names.run_validation(data)
        if isinstance(data, dict):
            return self.values.run_validation(data)
        self.fail("invalid")

    def to_representation(self, value):
        return value


def state_names(state: list[str] | dict[str, Any]) -> list[str]:
    return list(state)


class FilterRequest(serializers.Serializer[dict[str, Any]]):
    state = StateField()
    goal = BoundedListField(
        child=serializers.CharField(max_length=100), min_length=1, max_length=100
    )
    max_tools = serializers.IntegerField(required=False, min_value=1, max_value=1000)
    alternatives = serializers.BooleanField(required=False, default=False)


class FilterResponse(serializers.Serializer[dict[str, Any]]):
    tools = ContractSerializer(many=True)
    plan = serializers.ListField(child=serializers.CharField())
    unreachable = serializers.ListField(child=serializers.CharField())


class PlanStep(serializers.Serializer[dict[str, Any]]):
    tool = serializers.CharField(max_length=200)
    args = serializers.DictField(required=False, default=dict)


class PlanRequest(serializers.Serializer[dict[str, Any]]):
    plan = BoundedListField(child=serializers.JSONField(), max_length=200)
    state = StateField(required=False, default=dict)
    config = serializers.DictField(required=False, default=dict)


class Violation(serializers.Serializer[dict[str, Any]]):
    step = serializers.IntegerField(allow_null=True)
    invariant = serializers.CharField()
    rule = serializers.CharField()
    action = serializers.ChoiceField(choices=["rejected", "corrected", "dropped"])
    missing = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="unmet_requires only: the variables missing before the step",
    )
    producers = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="unmet_requires only: for each missing variable, the approved tools this "
        "application sees that produce it",
    )


class PlanResponse(serializers.Serializer[dict[str, Any]]):
    plan = PlanStep(many=True)
    violations = Violation(many=True)
    valid = serializers.BooleanField()
    config = serializers.DictField()
    mandate = serializers.CharField()


class OpenAIFunction(serializers.Serializer[dict[str, Any]]):
    name = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,64}\Z")
    description = serializers.CharField()
    parameters = serializers.DictField()
    strict = serializers.BooleanField(required=False)


class OpenAITool(serializers.Serializer[dict[str, Any]]):
    type = serializers.ChoiceField(choices=["function"])
    function = OpenAIFunction()


class OpenAIResponsesTool(serializers.Serializer[dict[str, Any]]):
    type = serializers.ChoiceField(choices=["function"])
    name = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,64}\Z")
    description = serializers.CharField()
    parameters = serializers.DictField()
    strict = serializers.BooleanField()


class AnthropicTool(serializers.Serializer[dict[str, Any]]):
    name = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,64}\Z")
    description = serializers.CharField()
    input_schema = serializers.DictField()


class MCPAnnotations(serializers.Serializer[dict[str, Any]]):
    # Exactly the annotations the tool's definition declares, keys of its server's own
    # included; a tool that declares none has none.
    title = serializers.CharField(required=False)
    readOnlyHint = serializers.BooleanField(required=False)  # noqa: N815 - MCP's own spelling
    destructiveHint = serializers.BooleanField(required=False)  # noqa: N815
    idempotentHint = serializers.BooleanField(required=False)  # noqa: N815
    openWorldHint = serializers.BooleanField(required=False)  # noqa: N815


class MCPTool(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    description = serializers.CharField()
    inputSchema = serializers.DictField()  # noqa: N815
    title = serializers.CharField(required=False)
    outputSchema = serializers.DictField(required=False)  # noqa: N815
    annotations = MCPAnnotations(required=False)
    _meta = serializers.DictField(
        help_text='"tool-contract-registry/definitionHash": the approved definition\'s pin.'
    )


class MCPToolList(serializers.Serializer[dict[str, Any]]):
    tools = MCPTool(many=True)


class McpServerDetail(serializers.Serializer[dict[str, Any]]):
    """A server.json: the MCP Registry API's ``ServerDetail``."""

    name = serializers.CharField(help_text="tool-contract-registry/<server>")
    description = serializers.CharField()
    version = serializers.CharField(
        help_text="As its MCP registry published it (mcp_servers add --from-registry), else 0.0.0."
    )
    title = serializers.CharField(required=False)
    repository = serializers.DictField(required=False)
    websiteUrl = serializers.CharField(required=False)  # noqa: N815 - the API's own spelling
    icons = serializers.ListField(child=serializers.DictField(), required=False)
    packages = serializers.ListField(child=serializers.DictField(), required=False)
    remotes = serializers.ListField(child=serializers.DictField(), required=False)


class McpServerResponse(serializers.Serializer[dict[str, Any]]):
    """The MCP Registry API's ``ServerResponse``."""

    server = McpServerDetail()
    _meta = serializers.DictField(
        help_text='"io.modelcontextprotocol.registry/official": status, publishedAt, updatedAt, '
        'isLatest; "tool-contract-registry/contracts": {server, origin?, tools: [{name, '
        "serverTool, version, pin, risk}]}, the approved tools the caller may use and their pins."
    )


class McpServerListMetadata(serializers.Serializer[dict[str, Any]]):
    nextCursor = serializers.CharField(  # noqa: N815
        required=False, help_text="The cursor of the next page; absent on the last one."
    )
    count = serializers.IntegerField(help_text="Servers on this page.")


class McpServerList(serializers.Serializer[dict[str, Any]]):
    """The MCP Registry API's ``ServerList``."""

    servers = McpServerResponse(many=True)
    metadata = McpServerListMetadata()
