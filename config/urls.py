from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # Browsers ask for /favicon.ico whatever the page says; answer with the admin's icon.
    path("favicon.ico", RedirectView.as_view(url=static("registry/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
]
