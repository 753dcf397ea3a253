"""Chunked request bodies under a WSGI server that decodes them (gunicorn).

Django sizes a body by ``CONTENT_LENGTH`` alone: a ``Transfer-Encoding: chunked`` request has
none, so Django reads it as empty, and the body-size limit never applies to it. When the server
says the input ends by itself (``wsgi.input_terminated``), this reads the body here, up to
``DATA_UPLOAD_MAX_MEMORY_SIZE``, and hands Django an ordinary sized body; a larger one is
answered 413 before Django sees a truncated body.
"""

import io
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApplication = Callable[[Environ, StartResponse], Iterable[bytes]]

# After refusing a body, keep reading it for at most this long, so the client, still sending,
# gets to read the 413 instead of a connection reset (a server's "lingering close").
DISCARD_SECONDS = 5.0
READ_SIZE = 64 * 1024


def is_chunked(environ: Environ) -> bool:
    return (
        not environ.get("CONTENT_LENGTH")
        and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        and bool(environ.get("wsgi.input_terminated"))
    )


def too_large(limit: int) -> bytes:
    """The API's error shape (``api.errors.error_body``); Django is not set up to render it."""
    message = f"The request body is larger than {limit} bytes."
    body = {"error": {"code": "too_large", "message": message, "fields": {}}}
    return json.dumps(body).encode()


class ChunkedBodyMiddleware:
    """WSGI middleware: a chunked body becomes a sized one, or a 413 when over the limit."""

    def __init__(self, application: WSGIApplication) -> None:
        self.application = application

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if not is_chunked(environ):
            return self.application(environ, start_response)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        stream = environ["wsgi.input"]
        body = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(body) > limit:
            discard(stream)
            content = too_large(limit)
            start_response(
                "413 Request Entity Too Large",
                [("Content-Type", "application/json"), ("Content-Length", str(len(content)))],
            )
            return [content]
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["wsgi.input"] = io.BytesIO(body)
        return self.application(environ, start_response)


def discard(stream: Any) -> None:
    deadline = time.monotonic() + DISCARD_SECONDS
    while time.monotonic() < deadline and stream.read(READ_SIZE):
        pass
