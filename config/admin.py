"""The admin site: the reviewer's desk as its home, Reviews first in the app list.

It stands outside the app layers (like the URLs) because the home reads two of them: the review
queue (``reviews.selectors``) and recent drift reports (``learning.selectors``).
"""

from django.contrib import admin
from django.utils import timezone

from learning.selectors import drift_reports_recent
from reviews.models import AuditEntry, ReviewTicket
from reviews.selectors import review_queue

# Apps a reviewer needs most come first; the rest keep Django's alphabetical order.
APP_ORDER = {"reviews": 0, "registry": 1, "learning": 2, "api": 3}


class RegistryAdminSite(admin.AdminSite):
    site_header = "Tool-contract registry"
    site_title = "Tool-contract registry"
    index_title = "Reviewer's desk"
    index_template = "admin/desk_index.html"

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        return sorted(apps, key=lambda app: (APP_ORDER.get(app["app_label"], 9), app["name"]))

    def index(self, request, extra_context=None):
        extra_context = dict(extra_context or {})
        if request.user.has_perm("reviews.view_reviewticket"):
            extra_context["desk"] = self.desk_context(request.user)
        return super().index(request, extra_context)

    def desk_context(self, user) -> dict:
        """What the home page shows; every figure links to the filtered list behind it."""
        queue = review_queue(user=user)
        now = timezone.now()
        # The admin sorts a list by column number: oldest first is "created_at" ascending.
        created_column = self._registry[ReviewTicket].list_display.index("created_at") + 1
        return {
            "queue": queue,
            "oldest": [(ticket, now - ticket.created_at) for ticket in queue.oldest],
            "oldest_first": f"?status__exact=open&o={created_column}",
            "drift_reports": drift_reports_recent(limit=8),
            "published": AuditEntry.Action.PUBLISHED,
        }
