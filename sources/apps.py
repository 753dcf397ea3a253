from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_delete, post_save


class SourcesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sources"
    verbose_name = "sources"

    def ready(self) -> None:
        """An MCP server's record is part of what runtimes see: the MCP Registry API's
        endpoints (``/v0.1/servers``) serve it. Saving or deleting one, or changing its
        applications, moves the registry revision, so their ETags and cached bodies follow. A
        sync writes its own bookkeeping with ``update()``, which sends no signal: syncs do not
        move the revision by themselves. Receivers need the app registry ready: Django's
        documented place for these imports."""
        from registry.handlers import revision_bump_on_change

        from .models import McpServer

        post_save.connect(
            revision_bump_on_change, sender=McpServer, dispatch_uid="revision-mcp-save"
        )
        post_delete.connect(
            revision_bump_on_change, sender=McpServer, dispatch_uid="revision-mcp-delete"
        )
        m2m_changed.connect(
            revision_bump_on_change,
            sender=McpServer.applications.through,
            dispatch_uid="revision-mcp-applications",
        )
