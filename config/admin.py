"""The admin site: the reviewer's desk as its home, Reviews first in the app list.

It stands outside the app layers (like the URLs) because the home reads two of them: the review
queue (``reviews.selectors``) and recent drift reports (``learning.selectors``).
"""

from datetime import MAXYEAR, MINYEAR
from functools import update_wrapper
from typing import Any

from django.contrib import admin, messages
from django.http import HttpResponseBadRequest, QueryDict
from django.utils import timezone

from learning.selectors import drift_reports_recent
from reviews.models import AuditEntry, ReviewTicket
from reviews.selectors import review_queue
from reviews.services import REVIEWERS_GROUP, is_reviewer

# Apps a reviewer needs most come first; the rest keep Django's alphabetical order.
APP_ORDER = {"reviews": 0, "registry": 1, "learning": 2, "api": 3}
# Date parts a list may filter on (the date hierarchy's ``<field>__year`` and any ``__month`` or
# ``__day`` lookup), with the values a date can hold. The hierarchy adds a day, a month or a year
# to the date it is given, so the last year is one short of what ``datetime`` holds.
DATE_PARTS = {"year": (MINYEAR, MAXYEAR - 1), "month": (1, 12), "day": (1, 31)}


def query_problem(query: QueryDict) -> str | None:
    """Why an admin URL's query cannot be answered, or None.

    A URL can carry values no column and no date can hold: a NUL (PostgreSQL refuses it in
    any text, so a list filter on a choice field answered 500) and a date part outside what
    ``datetime`` holds (the date hierarchy raised OverflowError). Both are refused here, for
    every admin page at once, rather than in each list filter.
    """
    for name, values in query.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return f"The query parameter {name!r} holds a NUL character."
        part = name.rsplit("__", 1)[-1] if "__" in name else None
        if part in DATE_PARTS and values:
            low, high = DATE_PARTS[part]
            value = values[-1].strip()
            digits = value.lstrip("0") or "0"
            if not value.isdecimal() or len(digits) > 4 or not low <= int(digits) <= high:
                return f"The query parameter {name!r} is not a {part} between {low} and {high}."
    return None


class RegistryAdminSite(admin.AdminSite):
    site_header = "Tool-contract registry"
    site_title = "Tool-contract registry"
    index_title = "Reviewer's desk"
    index_template = "admin/desk_index.html"

    def admin_view(self, view, cacheable=False):
        wrapped = super().admin_view(view, cacheable)

        def refuse_impossible_queries(request, *args, **kwargs):
            problem = query_problem(request.GET)
            if problem:
                return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
            return wrapped(request, *args, **kwargs)

        return update_wrapper(refuse_impossible_queries, wrapped)

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        return sorted(apps, key=lambda app: (APP_ORDER.get(app["app_label"], 9), app["name"]))

    def index(self, request, extra_context=None):
        extra_context = dict(extra_context or {})
        if request.user.has_perm("reviews.view_reviewticket"):
            extra_context["desk"] = self.desk_context(request.user)
        if request.user.is_superuser and not is_reviewer(request.user):
            # A superuser (createsuperuser) sees every ticket, but decisions are the group's.
            messages.info(
                request,
                f"You are not in the {REVIEWERS_GROUP} group, so you cannot approve or reject "
                f"tickets: add yourself to it on your user's page to review.",
            )
        return super().index(request, extra_context)

    def desk_context(self, user) -> dict[str, Any]:
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
