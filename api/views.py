"""The runtime API: reads of approved contracts, exports, traces in, filtering and plan checks.

Every read answers with a strong ETag derived from the registry revision, the caller and the
URL, so a conditional GET is answered 304 before any contract row is read.
"""

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.db import (
    DatabaseError,
    connection,
)
from django.http import Http404, HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from learning.ingest import collector_paused, traces_ingest
from learning.otel import spans_decode
from learning.otel_ingest import BufferFull, spans_receive
from learning.tasks import otel_traces_assemble
from registry.models import ContractVersion
from registry.queueing import task_send_on_commit
from registry.revision import revision_current
from registry.selectors import alias_map, risk_ranks
from sources.declared import SERVER_NAME

from . import exports, otlp, subregistry, webhooks
from .auth import HasScope, IsRuntimeOrStaff, Runtime
from .caching import ConditionalMixin, ProcessCache
from .causal import ProducerIndex, filter_tools
from .errors import error_body, error_message
from .filters import ContractFilter
from .models import RuntimeToken
from .parsers import StrictJSONParser
from .planning import validate_plan
from .selectors import mcp_servers_visible, version_history, visible_versions
from .serializers import (
    AnthropicTool,
    ContractSerializer,
    ErrorSerializer,
    FilterRequest,
    FilterResponse,
    McpServerList,
    McpServerResponse,
    MCPToolList,
    OpenAIResponsesTool,
    OpenAITool,
    PlanRequest,
    PlanResponse,
    RevisionSerializer,
    TraceIn,
    TraceIngestResult,
    state_names,
)
from .throttling import ApplicationScopedThrottle, RuntimeThrottle

logger = logging.getLogger(__name__)
ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 429)}


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class RuntimeView(APIView):
    permission_classes = [IsRuntimeOrStaff, HasScope]
    throttle_classes = [RuntimeThrottle]
    parser_classes = [StrictJSONParser]
    required_scope = RuntimeToken.Scope.CONTRACTS_READ

    @property
    def application(self):
        user = self.request.user
        return user.application if isinstance(user, Runtime) else None

    def visible(self):
        return visible_versions(self.application)

    def policy(self) -> dict[str, Any] | None:
        application = self.application
        if application is None:
            return None
        policy = getattr(application, "policy", None)
        return policy.document() if policy else None


@extend_schema(tags=["contracts"], responses={200: ContractSerializer(many=True), **ERRORS})
class ToolListView(ConditionalMixin, RuntimeView, generics.ListAPIView[ContractVersion]):
    """Approved contracts the caller may see, filterable and paginated."""

    serializer_class = ContractSerializer
    filterset_class = ContractFilter
    pagination_class = Pagination

    def get_queryset(self):
        return self.visible().order_by("tool__name")

    def read(self, request):
        return self.list(request)


class VisibleToolMixin(RuntimeView):
    queryset = ContractVersion.objects.none()  # for the schema; reads go through selectors

    def get_version(self) -> ContractVersion:
        try:
            return self.visible().get(tool__name=self.kwargs["name"])
        except ContractVersion.DoesNotExist:
            raise Http404 from None


@extend_schema(tags=["contracts"], responses={200: ContractSerializer, 304: None, **ERRORS})
class ToolDetailView(
    ConditionalMixin, VisibleToolMixin, RuntimeView, generics.GenericAPIView[ContractVersion]
):
    """One approved contract; 404 for a tool the caller may not see (names do not leak)."""

    serializer_class = ContractSerializer

    def read(self, request, name: str):
        return Response(ContractSerializer(self.get_version()).data)


@extend_schema(tags=["contracts"], responses={200: ContractSerializer(many=True), **ERRORS})
class ToolVersionsView(
    ConditionalMixin, VisibleToolMixin, RuntimeView, generics.GenericAPIView[ContractVersion]
):
    """The approved history of one visible tool, newest first."""

    serializer_class = ContractSerializer

    def read(self, request, name: str):
        history = version_history(self.get_version(), self.application)[:100]
        return Response(ContractSerializer(history, many=True).data)


@extend_schema(tags=["contracts"], responses={200: RevisionSerializer, **ERRORS})
class RevisionView(ConditionalMixin, RuntimeView):
    """The registry revision: it moves whenever what runtimes may see changes. Poll it."""

    cache_seconds = 1

    def read(self, request):
        return Response({"revision": revision_current()})


EXPORT_FILTERS = [
    OpenApiParameter(name, str, description=f"As on tools/: {name}")
    for name in ("risk", "max_risk", "permission", "requires", "produces", "domain", "search")
]


class ExportView(ConditionalMixin, RuntimeView, generics.GenericAPIView[ContractVersion]):
    queryset = ContractVersion.objects.none()  # for the schema; reads go through selectors
    filterset_class = ContractFilter
    serializer_class = ContractSerializer

    def versions(self) -> list[ContractVersion]:
        return list(self.filter_queryset(self.visible().order_by("tool__name")))

    def mandate(self) -> str:
        policy = self.policy()
        return policy["mandate"] if policy else ""

    def read(self, request):
        options, mandate = self.export_options(request), self.mandate()
        entries = [self.entry(version, mandate=mandate, **options) for version in self.versions()]
        return Response(self.wrap(entries))

    # An export is one entry per visible contract, in name order, wrapped: the bundles
    # (api/bundles.py) render an entry again only when its contract changed, with these.

    def export_options(self, request) -> dict[str, Any]:
        """The export's own query parameters, checked."""
        return {}

    def entry(self, version: ContractVersion, *, mandate: str, **options: Any) -> object:
        raise NotImplementedError

    def wrap(self, entries: list[object]) -> object:
        return entries


@extend_schema(
    tags=["exports"],
    parameters=[
        *EXPORT_FILTERS,
        OpenApiParameter("strict", bool, description="OpenAI strict-mode schemas."),
        OpenApiParameter(
            "shape",
            str,
            enum=["chat", "responses"],
            description="chat (default): Chat Completions tools, "
            '`{"type": "function", "function": {...}}`; responses: the Responses API\'s flat '
            '`{"type": "function", "name", "description", "parameters", "strict"}`.',
        ),
    ],
    responses={
        200: PolymorphicProxySerializer(
            component_name="OpenAIExportTool",
            serializers=[OpenAITool, OpenAIResponsesTool],
            resource_type_field_name=None,
            many=True,
        ),
        **ERRORS,
    },
    examples=[
        OpenApiExample(
            "One function",
            value={
                "type": "function",
                "function": {
                    "name": "calendar__find_events",
                    "description": "Find calendar events.",
                    "parameters": {"type": "object"},
                },
            },
            response_only=True,
        ),
        OpenApiExample(
            "One function, shape=responses",
            value={
                "type": "function",
                "name": "calendar__find_events",
                "description": "Find calendar events.",
                "parameters": {"type": "object"},
                "strict": False,
            },
            response_only=True,
        ),
    ],
)
class OpenAIExportView(ExportView):
    """Tools in OpenAI's function-calling shape ('.' in names is sent as '__')."""

    query_parameters = ("strict", "shape")
    SHAPES = {"chat": exports.openai_tool, "responses": exports.openai_responses_tool}

    def export_options(self, request) -> dict[str, Any]:
        strict = request.query_params.get("strict", "false").lower() in ("1", "true", "yes")
        shape = request.query_params.get("shape", "chat")
        if shape not in self.SHAPES:
            raise ValidationError({"shape": [f"must be one of {', '.join(self.SHAPES)}"]})
        return {"strict": strict, "shape": shape}

    def entry(self, version: ContractVersion, *, mandate: str, **options: Any) -> object:
        tool = self.SHAPES[options.get("shape", "chat")]
        return tool(version.document(), mandate=mandate, strict=options.get("strict", False))


@extend_schema(
    tags=["exports"], parameters=EXPORT_FILTERS, responses={200: AnthropicTool(many=True), **ERRORS}
)
class AnthropicExportView(ExportView):
    """Tools in Anthropic's Messages API shape ('.' in names is sent as '__')."""

    def entry(self, version: ContractVersion, *, mandate: str, **options: Any) -> object:
        return exports.anthropic_tool(version.document(), mandate=mandate)


@extend_schema(tags=["exports"], parameters=EXPORT_FILTERS, responses={200: MCPToolList, **ERRORS})
class MCPExportView(ExportView):
    """An MCP tools/list result."""

    def entry(self, version: ContractVersion, *, mandate: str, **options: Any) -> object:
        return exports.mcp_tool(
            version.document(),
            mandate=mandate,
            definition=version.definition,
            pin=version.definition_hash,
        )

    def wrap(self, entries: list[object]) -> object:
        return {"tools": entries}


@extend_schema(
    tags=["traces"],
    request=TraceIn(many=True),
    responses={200: TraceIngestResult, 413: ErrorSerializer, **ERRORS},
)
class TraceIngestView(RuntimeView):
    """Store a batch of traces (at most 1,000); each bad item is reported, nothing good is lost."""

    required_scope = RuntimeToken.Scope.TRACES_WRITE

    @collector_paused()
    def post(self, request):
        items = request.data
        if not isinstance(items, list):
            raise ValidationError({"body": ["must be a JSON list of traces"]})
        limit = settings.API_MAX_TRACES_PER_REQUEST
        if len(items) > limit:
            raise ValidationError(
                {"body": [f"at most {limit} traces per request, got {len(items)}"]}
            )
        result = traces_ingest(items=enumerate(items), application=self.application)
        return Response(
            {
                "accepted": result.accepted,
                "duplicates": result.duplicates,
                "rejected": len({problem["index"] for problem in result.rejected}),
                "problems": result.rejected,
            }
        )


@extend_schema(
    tags=["health"],
    responses={
        200: inline_serializer("Health", {"status": serializers.CharField()}),
        503: ErrorSerializer,
    },
)
class HealthView(APIView):
    """Liveness and database reachability, for load balancers and compose healthchecks."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def get(self, request):
        try:
            # A query, not just a connection object: a persistent connection outlives its server.
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except DatabaseError:
            return Response(
                error_body(503, "The registry's database is unavailable; retry shortly."),
                status=503,
                headers={"Retry-After": "5"},
            )
        return Response({"status": "ok"})


_INDEXES: ProcessCache[tuple[ProducerIndex, dict[str, ContractVersion]]] = ProcessCache(32)


def _producer_index(view: "RuntimeView") -> tuple[ProducerIndex, dict[str, ContractVersion]]:
    """The causal index of the caller's visible set, built once per registry revision."""
    application = view.application

    def build() -> tuple[ProducerIndex, dict[str, ContractVersion]]:
        versions = list(view.visible().order_by("tool_id"))
        documents = [version.document() for version in versions]
        return (
            ProducerIndex(documents, risk_rank=risk_ranks()),
            {version.tool.name: version for version in versions},
        )

    key = (application.pk if application else "staff", revision_current())
    return _INDEXES.get_or_build(key, build)


@extend_schema(
    tags=["planning"],
    request=FilterRequest,
    responses={200: FilterResponse, **ERRORS},
    examples=[
        OpenApiExample(
            "Move an event",
            value={"state": ["event_query", "new_start_time"], "goal": ["event_revision"]},
            request_only=True,
        )
    ],
)
class FilterView(RuntimeView):
    """Causal minimal tool filtering: the tools that move this state toward this goal, now."""

    def post(self, request):
        body = FilterRequest(data=request.data)
        body.is_valid(raise_exception=True)
        aliases = alias_map()
        state = {aliases.get(name, name) for name in state_names(body.validated_data["state"])}
        goal = {aliases.get(name, name) for name in body.validated_data["goal"]}
        index, by_name = _producer_index(self)
        result = filter_tools(
            index,
            state=state,
            goal=goal,
            max_tools=body.validated_data.get("max_tools"),
            alternatives=body.validated_data["alternatives"],
        )
        return Response(
            {
                "tools": ContractSerializer(
                    [by_name[name] for name in result.tools], many=True
                ).data,
                "plan": result.plan,
                "unreachable": result.unreachable,
            }
        )


@extend_schema(
    tags=["planning"],
    request=PlanRequest,
    responses={200: PlanResponse, 422: ErrorSerializer, **ERRORS},
    examples=[
        OpenApiExample(
            "A clinical plan",
            value={
                "plan": [
                    {
                        "tool": "retrieval_llm",
                        "args": {"query": "statins", "subquestion_ids": ["q1", "q2"]},
                    },
                    {"tool": "source_link_retrieval", "args": {"passage_set_id": "ps_1"}},
                ],
                "state": ["research_question"],
            },
            request_only=True,
        )
    ],
)
class PlanValidateView(RuntimeView):
    """Check a plan (or a single call, as a plan of one step) against each tool's contract,
    from the given state, and against the application's planning policy."""

    def post(self, request):
        body = PlanRequest(data=request.data)
        body.is_valid(raise_exception=True)
        plan = body.validated_data["plan"]
        # Any JSON may stand where a name should (a list is not even hashable): validate_plan
        # names each malformed step; only names are looked up.
        tools = [step.get("tool") for step in plan if isinstance(step, dict)]
        names = {name for name in tools if isinstance(name, str)}
        versions = self.visible().filter(tool__name__in=names)
        contracts = {version.tool.name: version.document() for version in versions}
        index, _ = _producer_index(self)

        def producers(variable: str) -> list[str]:
            return [index.names[tool] for tool in index.producers.get(variable, ())]

        result = validate_plan(
            plan=plan,
            contracts=contracts,
            policy=self.policy(),
            state=body.validated_data["state"],
            config=body.validated_data["config"],
            aliases=alias_map(),
            producers=producers,
        )
        tripped = sorted({v["invariant"] for v in result["violations"]})
        if tripped:
            logger.info("plan check tripped %s", ", ".join(tripped))
        return Response(result)


@extend_schema(
    tags=["webhooks"],
    request=None,
    responses={
        202: inline_serializer(
            "WebhookTestQueued",
            {"deliveries": serializers.ListField(child=serializers.IntegerField())},
        ),
        **ERRORS,
    },
)
class WebhookTestView(RuntimeView):
    """Send a signed ``webhook.test`` delivery to each enabled webhook of the caller's
    application (the delivery log in the admin shows how each went). Each costs the worker
    up to a delivery's deadline, so an application has a budget of its own
    (``WEBHOOK_TEST_THROTTLE_RATE``), past which it is answered 429."""

    throttle_classes = [RuntimeThrottle, ApplicationScopedThrottle]
    throttle_scope = "webhook_test"

    def post(self, request):
        application = self.application
        if application is None:
            raise ValidationError({"application": ["a runtime token names the application"]})
        ids = [
            webhooks.webhook_test_send(webhook=webhook).pk
            for webhook in application.webhooks.filter(enabled=True)
        ]
        webhooks.webhook_deliveries_queue(ids)
        return Response({"deliveries": ids}, status=202)


OTLP_ERRORS = (400, 401, 403, 413, 415, 429, 503)
OTLPStatus = inline_serializer(
    "OTLPStatus", {"code": serializers.IntegerField(), "message": serializers.CharField()}
)


@extend_schema(
    tags=["traces"],
    request={
        otlp.PROTOBUF: OpenApiTypes.BINARY,
        otlp.JSON: OpenApiTypes.OBJECT,
    },
    responses={
        (200, otlp.PROTOBUF): OpenApiTypes.BINARY,
        **{(code, otlp.PROTOBUF): OpenApiTypes.BINARY for code in OTLP_ERRORS},
        **{(code, otlp.JSON): OTLPStatus for code in OTLP_ERRORS},
        (200, otlp.JSON): inline_serializer(
            "ExportTraceServiceResponse",
            {
                "partialSuccess": inline_serializer(
                    "ExportTracePartialSuccess",
                    {
                        "rejectedSpans": serializers.CharField(),
                        "errorMessage": serializers.CharField(),
                    },
                    required=False,
                )
            },
        ),
    },
)
class OTLPTraceView(RuntimeView):
    """An OTLP/HTTP traces receiver: OpenTelemetry GenAI tool-call spans become traces.

    Answers follow the OTLP specification rather than the API's error shape: an
    ExportTraceServiceResponse (with partial_success when spans were refused), or a
    google.rpc.Status, in the request's encoding.
    """

    required_scope = RuntimeToken.Scope.TRACES_WRITE

    @collector_paused()
    def post(self, request):
        media = otlp.media_type(request.META.get("CONTENT_TYPE"))
        if self.application is None:
            raise otlp.OTLPError(403, "Spans belong to an application: send a runtime token.")
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        body = otlp.inflate(request.body, request.META.get("HTTP_CONTENT_ENCODING"), limit=limit)
        batch = spans_decode(
            otlp.request_decode(body, media), max_spans=settings.OTLP_MAX_SPANS_PER_REQUEST
        )
        try:
            received = spans_receive(application=self.application, batch=batch)
        except BufferFull as exc:
            raise otlp.OTLPError(429, str(exc), {"Retry-After": str(exc.retry_after)}) from None
        if received.complete:
            # Assembled once the trace has settled; the periodic run catches a lost message.
            countdown = settings.OTLP_SETTLE_SECONDS + 1
            send = partial(otel_traces_assemble.apply_async, countdown=countdown, retry=False)
            task_send_on_commit(send, what="OTLP assembly")
        content = otlp.export_response(
            media, rejected=received.rejected, message=received.message()
        )
        return HttpResponse(content, content_type=media)

    def handle_exception(self, exc):
        """Every failure as OTLP says: a google.rpc.Status in the request's encoding, with the
        status, message and headers the API's own handler gives it (``api/errors.py``)."""
        media = self.request.META.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        media = media if media in otlp.MEDIA_TYPES else otlp.JSON
        headers: dict[str, str] = {}
        if isinstance(exc, otlp.OTLPError):
            status, message, headers = exc.status, exc.message, exc.headers
        else:
            try:
                answer = super().handle_exception(exc)
            except Exception:
                # Still a google.rpc.Status, never an HTML page an exporter cannot read.
                logger.exception("OTLP request failed")
                status, message = 500, "The registry failed to handle these spans; retry later."
            else:
                status, message = answer.status_code, error_message(answer.data)
                headers = {
                    name: answer[name]
                    for name in ("Retry-After", "WWW-Authenticate")
                    if answer.has_header(name)
                }
        response = HttpResponse(
            otlp.status_response(media, status=status, message=message),
            status=status,
            content_type=media,
        )
        for name, value in headers.items():
            response[name] = value
        return response


MCP_REGISTRY_PAGE = 30  # the official registry's default page
MCP_REGISTRY_MAX_PAGE = 100
MCP_SERVER_NAME = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.PATH,
    description="The server's name, URL-encoded (tool-contract-registry%2Facme).",
)
INCLUDE_DELETED = OpenApiParameter(
    "include_deleted", bool, description="Accepted for the API's sake: no server is deleted here."
)


class McpRegistryView(ConditionalMixin, RuntimeView):
    """The MCP Registry API's reads (``/v0/``, ``/v0.1/``): the MCP servers the caller may use,
    each with its approved tools and their pins (``api/subregistry.py``)."""

    query_parameters: tuple[str, ...] = ("include_deleted",)

    def served(self, name: str) -> subregistry.ServedServer:
        namespace, _, local_name = name.partition("/")
        # A name no server can have is not looked up (the database refuses some, such as NUL).
        if namespace == subregistry.NAMESPACE and SERVER_NAME.fullmatch(local_name):
            found = mcp_servers_visible(self.application, name=local_name)
            if found:
                return found[0]
        raise Http404

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        include_deleted = request.query_params.get("include_deleted", "false").lower()
        if include_deleted not in ("true", "false"):
            raise ValidationError({"include_deleted": ["must be true or false"]})


@extend_schema(
    tags=["mcp-registry"],
    parameters=[
        OpenApiParameter("cursor", str, description="metadata.nextCursor of the previous page."),
        OpenApiParameter(
            "limit",
            int,
            description=f"Servers per page, 1 to {MCP_REGISTRY_MAX_PAGE} "
            f"(default {MCP_REGISTRY_PAGE}).",
        ),
        OpenApiParameter("search", str, description="A substring of the name or description."),
        OpenApiParameter("version", str, description="latest, or one exact version."),
        OpenApiParameter(
            "updated_since", OpenApiTypes.DATETIME, description="RFC 3339: servers changed since."
        ),
        INCLUDE_DELETED,
    ],
    responses={200: McpServerList, 304: None, **ERRORS},
)
@extend_schema_view(get=extend_schema(operation_id="mcp_registry_servers_list"))
class McpServerListView(McpRegistryView):
    """The MCP servers the caller may use, with their approved tools and pins (MCP Registry API)."""

    query_parameters = ("cursor", "limit", "search", "version", "updated_since", "include_deleted")

    def read(self, request):
        params = request.query_params
        limit = params.get("limit", str(MCP_REGISTRY_PAGE))
        if (
            not limit.isascii()
            or not limit.isdigit()
            or not 1 <= int(limit) <= MCP_REGISTRY_MAX_PAGE
        ):
            raise ValidationError({"limit": [f"a whole number from 1 to {MCP_REGISTRY_MAX_PAGE}"]})
        since = None
        if "updated_since" in params:
            try:
                since = parse_datetime(params["updated_since"])
            except ValueError:
                since = None
            if since is None or since.tzinfo is None:
                raise ValidationError(
                    {"updated_since": ["an RFC 3339 date and time with its offset"]}
                )
        page = subregistry.servers_page(
            mcp_servers_visible(self.application),
            cursor=params.get("cursor", ""),
            limit=int(limit),
            search=params.get("search", ""),
            version=params.get("version", ""),
            updated_since=since,
        )
        metadata: dict[str, Any] = {"count": len(page.servers)}
        if page.next_cursor:
            metadata["nextCursor"] = page.next_cursor
        servers = [subregistry.server_response(server) for server in page.servers]
        return Response({"servers": servers, "metadata": metadata})


@extend_schema(
    tags=["mcp-registry"],
    parameters=[MCP_SERVER_NAME, INCLUDE_DELETED],
    responses={200: McpServerList, 304: None, **ERRORS},
)
@extend_schema_view(get=extend_schema(operation_id="mcp_registry_server_versions"))
class McpServerVersionsView(McpRegistryView):
    """A server's versions: the one it is served in (MCP Registry API)."""

    def read(self, request, name: str):
        server = self.served(name)
        return Response(
            {"servers": [subregistry.server_response(server)], "metadata": {"count": 1}}
        )


@extend_schema(
    tags=["mcp-registry"],
    parameters=[
        MCP_SERVER_NAME,
        OpenApiParameter(
            "version", str, OpenApiParameter.PATH, description="latest, or its version."
        ),
        INCLUDE_DELETED,
    ],
    responses={200: McpServerResponse, 304: None, **ERRORS},
)
@extend_schema_view(get=extend_schema(operation_id="mcp_registry_server_version"))
class McpServerVersionView(McpRegistryView):
    """One version of a server, or ``latest`` (MCP Registry API)."""

    def read(self, request, name: str, version: str = subregistry.LATEST):
        server = self.served(name)
        if version not in (subregistry.LATEST, server.version):
            raise Http404
        return Response(subregistry.server_response(server))


@extend_schema(
    tags=["mcp-registry"],
    parameters=[MCP_SERVER_NAME, INCLUDE_DELETED],
    responses={200: McpServerResponse, 304: None, **ERRORS},
)
@extend_schema_view(get=extend_schema(operation_id="mcp_registry_v0_server"))
class McpServerLatestView(McpServerVersionView):
    """A server's latest version: the API's form before /versions/latest, kept under /v0/."""


# The same reads under /v0/, the API's development path: their own operation ids.
@extend_schema_view(get=extend_schema(operation_id="mcp_registry_v0_servers_list"))
class McpServerListV0View(McpServerListView):
    pass


@extend_schema_view(get=extend_schema(operation_id="mcp_registry_v0_server_versions"))
class McpServerVersionsV0View(McpServerVersionsView):
    pass


@extend_schema_view(get=extend_schema(operation_id="mcp_registry_v0_server_version"))
class McpServerVersionV0View(McpServerVersionView):
    pass
