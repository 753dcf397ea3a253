from django.contrib.admin.apps import AdminConfig


class RegistryAdminConfig(AdminConfig):
    """The admin, with the reviewer's desk as its home page (``config.admin``)."""

    default_site = "config.admin.RegistryAdminSite"
