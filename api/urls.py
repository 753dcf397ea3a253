from django.urls import path, register_converter
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
