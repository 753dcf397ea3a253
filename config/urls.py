from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from api.urls import mcp_registry_urlpatterns, mcp_registry_v0_urlpatterns

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # Browsers ask for /favicon.ico whatever the page says; answer with the admin's icon.
    path("favicon.ico", RedirectView.as_view(url=static("registry/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    # The MCP Registry API's read endpoints, where clients of a registry look for them.
    path("v0.1/", include((mcp_registry_urlpatterns, "mcp-registry"), namespace="v0.1")),
    path("v0/", include((mcp_registry_v0_urlpatterns, "mcp-registry"), namespace="v0")),
]
