"""HTTP caching of the runtime API's reads: strong ETags, 304s and rendered bodies.

The registry revision moves whenever anything a runtime can see changes, so a tag made of
(revision, caller, normalised URL) names the exact body. A matching ``If-None-Match`` is answered
304 right after authentication, before any contract row is read, and a body rendered once is
kept in the shared cache under its tag and the origin it was asked at (``body_key``), and served
again without the database.

Views using ``ConditionalMixin`` implement ``read()``; ``get()`` is the mixin's.
"""

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from django.core.cache import cache
from django.http import HttpResponse, HttpResponseBase, QueryDict
from django.utils.cache import patch_cache_control
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from registry.revision import revision_current

from .auth import Runtime

RESPONSE_CACHE_SECONDS = 300

T = TypeVar("T")


def known_parameters(view: Any) -> frozenset[str]:
    """The query parameters a view understands: its filters', its paginator's and its own."""
    names = set(getattr(view, "query_parameters", ()))
    filterset = getattr(view, "filterset_class", None)
    if filterset is not None:
        names |= set(filterset.base_filters)
    paginator = getattr(view, "pagination_class", None)
    if paginator is not None:
        names |= {paginator.page_query_param, paginator.page_size_query_param} - {None}
    return frozenset(names)


def etag_for(*, revision: int, caller: str, request: Request, known: frozenset[str]) -> str:
    """The tag of (revision, caller, path, known parameters in a canonical order).

    Only known parameters count, each once, sorted: junk added to a URL can neither make a new
    cache entry nor a new tag (unknown parameters are refused before this).
    """
    return etag_of(
        revision=revision,
        caller=caller,
        path=request.path,
        params=known_values(request.query_params, known),
    )


def known_values(query: QueryDict, known: frozenset[str]) -> list[tuple[str, str]]:
    """The known parameters of a query with their (last) values, in a canonical order."""
    return sorted((name, query.get(name, "")) for name in known & set(query))


def etag_of(*, revision: int, caller: str, path: str, params: list[tuple[str, str]]) -> str:
    """The tag itself, from plain values: the fast read path (``api/fast.py``) and the bundles
    (``api/bundles.py``) make the very same tags without a request object."""
    key = f"{revision}|{caller}|{path}|{params!r}"
    return '"' + hashlib.sha256(key.encode()).hexdigest()[:32] + '"'


def body_key(*, etag: str, request: Request) -> str:
    """Where a rendered body is kept: its tag and the origin (scheme and host) it was asked at.

    A page carries absolute ``next``/``previous`` links built from the request, so the same URL
    under another allowed host (or over HTTPS) is another body; the tag stays the same, since a
    client compares it only for the URL it fetched."""
    origin = hashlib.sha256(f"{request.scheme}://{request.get_host()}".encode()).hexdigest()[:16]
    return f"registry:response:{etag}:{origin}"


def conditional_headers(response: HttpResponseBase, *, etag: str, cache_seconds: int) -> None:
    """The ETag and Cache-Control of a read's 200 or 304 (the fast read path's too)."""
    response["ETag"] = etag
    if "Cache-Control" in response:
        patch_cache_control(response, private=True, max_age=cache_seconds, must_revalidate=True)
    else:  # the common case, on every hot read: the same words each time
        response["Cache-Control"] = _cache_control(cache_seconds)


@functools.lru_cache(maxsize=16)
def _cache_control(cache_seconds: int) -> str:
    response = HttpResponse()
    patch_cache_control(response, private=True, max_age=cache_seconds, must_revalidate=True)
    return response["Cache-Control"]


class ConditionalMixin:
    """Strong ETag, 304 and cached bodies for a read view."""

    cache_seconds = 5
    etag_value: str | None = None
    body_key = ""
    query_parameters: tuple[str, ...] = ()

    def caller(self, request: Request) -> str:
        user = request.user
        return f"app-{user.application.pk}" if isinstance(user, Runtime) else "staff"

    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        known = known_parameters(self)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            raise ValidationError(
                {
                    "query": [
                        f"unknown parameter(s): {', '.join(unknown)}; "
                        f"known: {', '.join(sorted(known)) or 'none'}"
                    ]
                }
            )
        self.etag_value = etag_for(
            revision=revision_current(), caller=self.caller(request), request=request, known=known
        )
        sent = [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]
        if self.etag_value in sent:
            return Response(status=status.HTTP_304_NOT_MODIFIED)
        self.body_key = body_key(etag=self.etag_value, request=request)
        cached = cache.get(self.body_key)
        if cached is not None:
            return HttpResponse(cached, content_type="application/json")
        return self.read(request, *args, **kwargs)

    def read(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotImplementedError

    def finalize_response(
        self, request: Request, response: HttpResponse, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if (
            self.etag_value
            and response.status_code == 200
            and isinstance(response, Response)
            and not response.is_rendered
        ):
            response.add_post_render_callback(self._remember)
        if self.etag_value and response.status_code in (200, 304):
            conditional_headers(response, etag=self.etag_value, cache_seconds=self.cache_seconds)
        return response

    def _remember(self, response: HttpResponse) -> HttpResponse:
        cache.set(self.body_key, response.content, RESPONSE_CACHE_SECONDS)
        return response


class ProcessCache(Generic[T]):
    """A small bounded map kept in this process, for objects that are not bytes (a Python
    object graph cannot go to Redis cheaply). Keys carry the registry revision, so a stale
    entry is never reached again, and the bound keeps memory flat."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[Hashable, T] = OrderedDict()

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = build()
        self._entries[key] = value
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value
