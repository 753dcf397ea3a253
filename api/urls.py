from django.urls import URLPattern, path, re_path, register_converter
from django.urls.converters import StringConverter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from registry.validation import unstorable_text

from . import views


class ToolNameConverter(StringConverter):
    """A tool name in a path. Text no database can store (a NUL, invalid Unicode) names no
    tool, and PostgreSQL refuses to compare it: it is read as the empty name, which no tool
    has, so the view answers its usual 404 without sending the database a value it refuses."""

    def to_python(self, value: str) -> str:
        return "" if unstorable_text(value) else value


register_converter(ToolNameConverter, "tool")

urlpatterns = [
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("tools/<tool:name>/", views.ToolDetailView.as_view(), name="tool-detail"),
    path("tools/<tool:name>/versions/", views.ToolVersionsView.as_view(), name="tool-versions"),
    path("revision/", views.RevisionView.as_view(), name="revision"),
    path("export/openai/", views.OpenAIExportView.as_view(), name="export-openai"),
    path("export/anthropic/", views.AnthropicExportView.as_view(), name="export-anthropic"),
    path("export/mcp/", views.MCPExportView.as_view(), name="export-mcp"),
    path("traces/", views.TraceIngestView.as_view(), name="traces"),
    # OTLP/HTTP's path for traces, under the API: exporters append nothing to a signal endpoint.
    path("otlp/v1/traces", views.OTLPTraceView.as_view(), name="otlp-traces"),
    path("filter/", views.FilterView.as_view(), name="filter"),
    path("plans/validate/", views.PlanValidateView.as_view(), name="plans-validate"),
    path("webhooks/test/", views.WebhookTestView.as_view(), name="webhooks-test"),
    path("health/", views.HealthView.as_view(), name="health"),
    # The schema describes the API, not the registry's contents: anyone may read it.
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]),
        name="docs",
    ),
]


# The MCP Registry API's reads, at the paths it publishes (config/urls.py mounts them under
# /v0.1/ and /v0/). A server name holds a '/', sent as %2F, which arrives decoded: the name is
# everything before the last /versions.
def _mcp_registry(
    list_view: type[views.McpRegistryView],
    versions_view: type[views.McpRegistryView],
    version_view: type[views.McpRegistryView],
) -> list[URLPattern]:
    return [
        re_path(r"^servers$", list_view.as_view(), name="servers"),
        re_path(r"^servers/(?P<name>[\s\S]+)/versions$", versions_view.as_view(), name="versions"),
        re_path(
            r"^servers/(?P<name>[\s\S]+)/versions/(?P<version>[^/]+)$",
            version_view.as_view(),
            name="version",
        ),
    ]


mcp_registry_urlpatterns = _mcp_registry(
    views.McpServerListView, views.McpServerVersionsView, views.McpServerVersionView
)
mcp_registry_v0_urlpatterns = [
    *_mcp_registry(
        views.McpServerListV0View, views.McpServerVersionsV0View, views.McpServerVersionV0View
    ),
    # GET /v0/servers/{name}: the latest version, as the API served it until 2025-10-17.
    re_path(r"^servers/(?P<name>[\s\S]+)$", views.McpServerLatestView.as_view(), name="server"),
]
