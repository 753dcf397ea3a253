"""Test clients that tell the two ways a hot read is answered apart.

The fast read path is a middleware (``api.fast.FastReadsMiddleware``), so Django's test client
meets it as gunicorn's requests do. ``fast(client)`` records which path answered each request
(``client.handler.answered``: "fast" or "django"); ``plain(client)`` loads the middleware
without it, so every request goes to the view.
"""

from django.test import override_settings
from rest_framework.test import APIClient, ForceAuthClientHandler

from api.auth import Runtime
from api.bundles import RevisionNotSeenYet, bundle_render
from api.fast import ANSWERED_KEY


class FastHandler(ForceAuthClientHandler):
    def __init__(self, *args, with_fast: bool = True, render: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.answered: list[str] = []
        self.render = render
        if not with_fast:
            with override_settings(API_FAST_READS=False):
                self.load_middleware()

    def __call__(self, environ):
        response = super().__call__(environ)
        fast = bool(response.wsgi_request.META.get(ANSWERED_KEY))
        self.answered.append("fast" if fast else "django")
        user = getattr(response.wsgi_request, "user", None)
        if self.render and not fast and isinstance(user, Runtime):
            # What the worker does after a publication, done here at once and outside the
            # next request, so a test measuring that request measures the request alone.
            try:
                bundle_render(application_id=user.application.pk)
            except RevisionNotSeenYet:
                pass  # the test changed the revision without committing: no bundle yet
        return response


def fast(client: APIClient, *, render: bool = False) -> APIClient:
    """The same client (credentials kept), recording which path answered; with ``render``,
    each request the view answers for a runtime is followed by rendering that application's
    bundle if it is missing."""
    client.handler = FastHandler(enforce_csrf_checks=False, render=render)
    return client


def plain(client: APIClient) -> APIClient:
    """The same client, its requests never meeting the fast path (settings as they are now)."""
    client.handler = FastHandler(enforce_csrf_checks=False, with_fast=False)
    return client
