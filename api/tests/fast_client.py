"""A test client whose requests meet the fast read path first, as under gunicorn.

``config/wsgi.py`` puts ``api.fast.FastReads`` in front of Django; Django's test client calls
Django's handler directly. ``fast(client)`` makes the client ask ``FastReads`` first and go to
Django's handler only when it declines, exactly what the WSGI wrapper does, and records which
path answered each request (``client.handler.answered``).
"""

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpResponse
from rest_framework.test import APIClient, ForceAuthClientHandler

from api.auth import Runtime
from api.bundles import RevisionNotSeenYet, bundle_render
from api.fast import FastReads


class FastHandler(ForceAuthClientHandler):
    def __init__(self, *args, render: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fast = FastReads(app=None)  # type: ignore[arg-type]
        self.answered: list[str] = []
        self.render = render

    def __call__(self, environ):
        answer = self.fast.answer(environ)
        if answer is None:
            self.answered.append("django")
            response = super().__call__(environ)
            user = getattr(response.wsgi_request, "user", None)
            if self.render and isinstance(user, Runtime):
                # What the worker does after a publication, done here at once and outside the
                # next request, so a test measuring that request measures the request alone.
                try:
                    bundle_render(application_id=user.application.pk)
                except RevisionNotSeenYet:
                    pass  # the test changed the revision without committing: no bundle yet
            return response
        self.answered.append("fast")
        status, headers, body = answer
        response = HttpResponse(body, status=int(status.split()[0]))
        del response["Content-Type"]
        for name, value in headers:
            response[name] = value
        response.wsgi_request = WSGIRequest(environ)
        return response


def fast(client: APIClient, *, render: bool = False) -> APIClient:
    """The same client (credentials kept), its requests going through the fast path first;
    with ``render``, each request Django answers for a runtime is followed by rendering that
    application's bundle if it is missing."""
    client.handler = FastHandler(enforce_csrf_checks=False, render=render)
    return client
