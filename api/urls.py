from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from . import views

urlpatterns = [
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("tools/<str:name>/", views.ToolDetailView.as_view(), name="tool-detail"),
    path("tools/<str:name>/versions/", views.ToolVersionsView.as_view(), name="tool-versions"),
    path("revision/", views.RevisionView.as_view(), name="revision"),
    path("export/openai/", views.OpenAIExportView.as_view(), name="export-openai"),
    path("export/anthropic/", views.AnthropicExportView.as_view(), name="export-anthropic"),
    path("export/mcp/", views.MCPExportView.as_view(), name="export-mcp"),
    path("traces/", views.TraceIngestView.as_view(), name="traces"),
    path("filter/", views.FilterView.as_view(), name="filter"),
    path("plans/validate/", views.PlanValidateView.as_view(), name="plans-validate"),
    path("health/", views.HealthView.as_view(), name="health"),
    # The schema describes the API, not the registry's contents: anyone may read it.
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]),
        name="docs",
    ),
]
