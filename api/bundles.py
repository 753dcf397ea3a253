"""Bundles: an application's hot read bodies, rendered once per registry revision.

What a runtime reads most (each visible contract, the ``tools/`` pages, the exports) changes
only when the registry revision moves, so after each change a Celery task (``api.tasks``)
renders them once per application and stores them in the cache's Redis as one hash per
(application, revision), which the fast read path (``api/fast.py``) answers from. A field is
the request's path and its known parameters in the ETag's canonical order; beside each body is
its ETag (field ``#<field>``), so a conditional request is answered 304 without moving the body,
and the field ``!`` says the bundle is complete (a contract absent from it is a 404).

A body is stored as one of:

- ``B<body>``: the response body itself;
- ``P<count> <page> <pages>\\n<results>``: a ``tools/`` page without its ``next`` and
  ``previous`` links, which DRF makes absolute from the request's host (the fast path adds them);
- ``F<path>``: a file under ``API_BUNDLE_DIR`` that nginx sends (``X-Accel-Redirect``), for the
  exports when that setting is on.

The revision is read before anything else, so a body is never older than the revision it is
filed under: a change that lands while a bundle renders is already in it, or makes a newer
revision whose own bundle follows.

Renders are queued once per burst: ``bundle_render_wanted`` marks one waiting render per
application (and one waiting fan-out), and the render clears its mark as it starts, so any
number of changes while it waits costs one render, and a change after it started queues the
next. A renderer claims its (application, revision) with a short lock it renews while it works
(``bundle_claim``): a worker killed mid-render holds nothing for longer than ``CLAIM_SECONDS``.
"""

import hashlib
import logging
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.cache import caches
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.http import HttpRequest, QueryDict
from django.urls import reverse
from django.utils import timezone
from django_redis import get_redis_connection
from django_redis.cache import RedisCache
from redis import Redis
from redis.exceptions import LockError, RedisError
from redis.typing import EncodableT, FieldT
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from registry.models import Application, ContractVersion
from registry.revision import revision_current, revision_forget, revision_stored

from . import views
from .auth import Runtime
from .caching import etag_of, known_parameters
from .models import RuntimeToken
from .selectors import visible_versions
from .serializers import ContractSerializer

logger = logging.getLogger(__name__)

# A bundle outlives its revision's usefulness only until the next one is rendered (which
# deletes it); this bounds what a forgotten one costs. A runtime reading after it expired
# falls back to the normal path, which asks for it again.
BUNDLE_SECONDS = 24 * 3600
# One renderer per (application, revision) at a time: its claim expires this long after its
# owner stops renewing it (every third of it), so a killed worker blocks the next one this long.
CLAIM_SECONDS = 10
# A render marked as waiting (queued, not started): further requests for it are dropped. Should
# its message be lost, the mark expires and the next request queues it again.
QUEUED_SECONDS = 30
COMPLETE = "!"

# The exports a bundle holds: (URL name, view, query, file name).
EXPORTS: tuple[tuple[str, type[views.ExportView], dict[str, str], str], ...] = (
    ("export-openai", views.OpenAIExportView, {}, "export-openai.json"),
    ("export-openai", views.OpenAIExportView, {"strict": "true"}, "export-openai-strict.json"),
    ("export-anthropic", views.AnthropicExportView, {}, "export-anthropic.json"),
    ("export-mcp", views.MCPExportView, {}, "export-mcp.json"),
)


class RevisionNotSeenYet(Exception):
    """The shared cache still holds an older revision than the database (it lives at most two
    seconds): rendering now could file older visibility under the newer revision. Retried."""


def bundle_client() -> Redis | None:
    """The raw client of the cache's Redis, or None when the cache is not Redis."""
    if not isinstance(caches["default"], RedisCache):
        return None
    return get_redis_connection("default")


def bundle_key(application_id: int, revision: int) -> str:
    return bundle_key_prefix() + f"{application_id}:{revision}"


def bundle_key_prefix() -> str:
    return str(caches["default"].make_key("registry:bundle:"))


def _latest_key(application_id: int) -> str:
    return str(caches["default"].make_key(f"registry:bundle-latest:{application_id}"))


def _claim_key(application_id: int, revision: int) -> str:
    return str(caches["default"].make_key(f"registry:bundle-claim:{application_id}:{revision}"))


def _queued_key(application_id: int | None) -> str:
    name = "all" if application_id is None else str(application_id)
    return str(caches["default"].make_key(f"registry:bundle-queued:{name}"))


def bundle_render_wanted(*, application_id: int | None) -> bool:
    """Mark a render of the application (None: the fan-out to all) as waiting. True when the
    caller should queue it; False when one is already waiting, or there are no bundles (no
    Redis cache), or Redis is down (the next request asks again)."""
    client = bundle_client()
    if client is None:
        return False
    try:
        return bool(client.set(_queued_key(application_id), 1, nx=True, ex=QUEUED_SECONDS))
    except RedisError as exc:
        logger.warning("bundle render not queued: %s", exc)
        return False


def bundle_render_started(*, application_id: int | None) -> None:
    """Clear the waiting mark: a change from now on queues a render of its own."""
    client = bundle_client()
    if client is None:
        return
    try:
        client.delete(_queued_key(application_id))
    except RedisError:
        pass  # it expires on its own


@contextmanager
def bundle_claim(application_id: int, revision: int) -> Iterator[bool]:
    """Whether this process may render the bundle (True while it holds the claim). The claim
    is redis-py's lock, owned by a random token and renewed by a thread while the block runs:
    it dies with its owner within CLAIM_SECONDS, and is never released by anyone else."""
    client = bundle_client()
    assert client is not None
    lock = client.lock(
        _claim_key(application_id, revision),
        timeout=CLAIM_SECONDS,
        blocking=False,
        thread_local=False,  # the renewing thread holds the same token
    )
    if not lock.acquire():
        yield False
        return
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(CLAIM_SECONDS / 3):
            try:
                lock.reacquire()
            except (LockError, RedisError) as exc:
                logger.warning("bundle claim of application %s lost: %s", application_id, exc)
                return

    renewer = threading.Thread(target=renew, name="bundle-claim", daemon=True)
    renewer.start()
    try:
        yield True
    finally:
        stop.set()
        renewer.join()
        try:
            lock.release()
        except (LockError, RedisError):
            pass  # expired or unreachable: it lapses on its own


def bundle_field(path: str, params: list[tuple[str, str]]) -> str:
    """The field of a request: its path and known parameters, as the ETag orders them."""
    return f"{path}?{urlencode(params)}"


def bundle_applications() -> list[int]:
    """Applications with at least one usable token: nobody else can read a bundle."""
    now = timezone.now()
    usable = RuntimeToken.objects.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)
    return sorted(set(usable.values_list("application_id", flat=True)))


def bundle_render(*, application_id: int) -> int | None:
    """Render the application's bundle for the current revision and drop its previous one.

    Returns the revision rendered, or None when there was nothing to do: no Redis cache, an
    unknown application, a bundle already complete or being rendered by another worker.
    """
    client = bundle_client()
    if client is None:
        return None
    bundle_render_started(application_id=application_id)  # before the revision is read
    revision = revision_stored()  # first: the bodies read below are at least this new
    revision_forget()
    if revision_current() < revision:
        # Visibility's own caches are keyed on the revision readers see: wait for them.
        raise RevisionNotSeenYet(f"the cache still says {revision_current()}, not {revision}")
    key = bundle_key(application_id, revision)
    try:
        if client.hexists(key, COMPLETE):
            return None
        with bundle_claim(application_id, revision) as claimed:
            if not claimed:
                return None
            return _render_store(client, application_id, revision)
    except RedisError as exc:
        logger.warning("bundle of application %s not rendered: %s", application_id, exc)
        return None


def _render_store(client: Redis, application_id: int, revision: int) -> int | None:
    key = bundle_key(application_id, revision)
    try:
        application = (
            Application.objects.select_related("max_risk", "policy")
            .filter(pk=application_id)
            .first()
        )
        if application is None:
            return None
        client.delete(key)  # a render that died half-way left fields, never the mark
        writer = _FieldWriter(client, key, revision=revision, caller=f"app-{application.pk}")
        _render(client, application, revision, writer)
        writer.flush()
        pipe = client.pipeline(transaction=True)
        pipe.hset(key, COMPLETE, "1")
        pipe.expire(key, BUNDLE_SECONDS)
        pipe.getset(_latest_key(application_id), revision)
        pipe.expire(_latest_key(application_id), BUNDLE_SECONDS)
        previous = pipe.execute()[2]
        if previous is not None and int(previous) < revision:
            client.unlink(bundle_key(application_id, int(previous)))
            _files_forget(application_id, keep=(int(previous), revision))
        return revision
    except RedisError as exc:
        logger.warning("bundle of application %s not stored: %s", application_id, exc)
        return None


# Fields written to Redis per command: a bundle of 100,000 contracts is many commands, each
# small, never one that holds the whole bundle in a buffer (or outlives the cache's timeout).
WRITE_CHUNK = 1000


class _FieldWriter:
    """Writes a bundle's fields, each body with its ETag, in chunks. Until the completeness mark
    is written last, a reader finding a field reads a right body, and one missing goes on to
    the view."""

    def __init__(self, client: Redis, key: str, *, revision: int, caller: str) -> None:
        self.client, self.key, self.revision, self.caller = client, key, revision, caller
        self.pending: dict[FieldT, EncodableT] = {}

    def put(self, path: str, params: list[tuple[str, str]], value: bytes) -> None:
        field = bundle_field(path, params)
        self.pending[field] = value
        self.pending["#" + field] = etag_of(
            revision=self.revision, caller=self.caller, path=path, params=params
        ).encode()
        if len(self.pending) >= WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(self.key, mapping=self.pending)
            pipe.expire(self.key, BUNDLE_SECONDS)
            pipe.execute()
            self.pending = {}


def _render(client: Redis, application: Application, revision: int, writer: _FieldWriter) -> None:
    """Every body of the bundle: each visible contract, the ``tools/`` pages and the exports.

    Incremental: each contract's body and its entry in each export are kept between revisions
    (``_Parts``) and rendered again only when what they are made of changed, so a publication
    renders what it changed, not the registry. Pages and exports are joined from those parts.
    """
    renderer = JSONRenderer()
    rows = _visible_rows(application)
    parts = _Parts(client, application.pk, rows)
    contracts = parts.bodies(
        "contract", lambda version: renderer.render(ContractSerializer(version).data)
    )
    for (_, name, _), body in zip(rows, contracts, strict=True):
        writer.put(reverse("tool-detail", kwargs={"name": name}), [], b"B" + body)
    size = views.Pagination.page_size
    pages = max(1, math.ceil(len(rows) / size))
    list_path = reverse("tool-list")
    for page in range(1, pages + 1):
        results = b"[" + b",".join(contracts[(page - 1) * size : page * size]) + b"]"
        value = f"P{len(rows)} {page} {pages}\n".encode() + results
        writer.put(list_path, [("page", str(page))], value)
        if page == 1:
            writer.put(list_path, [], value)
    del contracts
    folder = _files_folder(application.pk, revision)
    for index, (url_name, view_class, query, file_name) in enumerate(EXPORTS):
        export = _export_body(parts, f"export{index}", view_class, application, query)
        if export is None:
            continue  # e.g. a tool OpenAI's strict mode cannot take: the normal path says why
        params = sorted(query.items())
        if folder is None:
            writer.put(reverse(url_name), params, b"B" + export)
        else:
            _file_write(folder / file_name, export)
            relative = f"{application.pk}/{revision}/{file_name}"
            writer.put(reverse(url_name), params, b"F" + relative.encode())
    parts.forget_others()


def _visible_rows(application: Application) -> list[tuple[int, str, str]]:
    """(version id, tool name, fingerprint) of each contract the application sees, by name.

    The fingerprint is what a contract's rendered forms are made of besides the version's own
    fields, which never change once approved: the risk level's name, and whether the version
    holds its server's definition (recorded once, later; the pin follows it)."""
    versions = (
        visible_versions(application)
        .order_by("tool__name")
        .annotate(declared=ExpressionWrapper(Q(definition__isnull=False), BooleanField()))
        .values_list("pk", "tool__name", "risk__name", "declared")
    )
    return [(pk, name, f"{pk} {risk} {int(declared)}") for pk, name, risk, declared in versions]


def _export_body(
    parts: "_Parts",
    kind: str,
    view_class: type[views.ExportView],
    application: Application,
    query: dict[str, Any],
) -> bytes | None:
    """One export, joined from its entries as the view's ``read()`` makes it: the view's own
    ``options``, ``mandate``, ``entry`` and ``wrap``. None when an entry cannot be made."""
    view, request = _view(view_class, application, query)
    renderer = JSONRenderer()
    try:
        options, mandate = view.export_options(request), view.mandate()
        entries = parts.bodies(
            kind,
            lambda version: renderer.render(view.entry(version, mandate=mandate, **options)),
            salt=mandate,
        )
    except ValidationError:
        return None
    # What wraps the entries, rendered around a marker that stands for them.
    before, after = renderer.render(view.wrap([ENTRIES_MARK])).split(_MARK_JSON)
    return before + b",".join(entries) + after


ENTRIES_MARK = "\x00entries\x00"
_MARK_JSON = JSONRenderer().render(ENTRIES_MARK)


class _Parts:
    """The rendered forms of an application's contracts, kept between revisions in one Redis
    hash per application: field ``<kind>|<tool name>``, value ``<fingerprint>\n<bytes>``. A
    part whose fingerprint is not the contract's current one is rendered again; one left over
    from another render is harmless, as every read checks the fingerprint."""

    def __init__(self, client: Redis, application_id: int, rows: list[tuple[int, str, str]]):
        self.client, self.rows = client, rows
        self.key = str(caches["default"].make_key(f"registry:bundle-parts:{application_id}"))
        self.kinds: set[str] = set()
        self.rendered = 0  # parts made this render, not reused
        # The versions read this render, by id: a contract changed since the last render is
        # stale in every kind, and is read from the database once for all of them.
        self.versions: dict[int, ContractVersion] = {}

    def bodies(
        self, kind: str, render: Callable[[ContractVersion], bytes], *, salt: str = ""
    ) -> list[bytes]:
        """Each row's part of this kind, in the rows' order, rendering only the stale ones."""
        self.kinds.add(kind)
        tag = hashlib.sha256(salt.encode()).hexdigest()[:16] if salt else ""
        result: list[bytes] = []
        for start in range(0, len(self.rows), WRITE_CHUNK):
            rows = self.rows[start : start + WRITE_CHUNK]
            fields = [f"{kind}|{name}" for _, name, _ in rows]
            kept: list[bytes | None] = self.client.hmget(self.key, fields)  # type: ignore[assignment]
            chunk: list[bytes | None] = []
            stale: dict[int, int] = {}  # version id → index in the chunk
            for index, ((pk, _, fingerprint), value) in enumerate(zip(rows, kept, strict=True)):
                wanted = f"{fingerprint} {tag}".encode() + b"\n"
                if value is not None and value.startswith(wanted):
                    chunk.append(value[len(wanted) :])
                else:
                    chunk.append(None)
                    stale[pk] = index
            if stale:
                fresh: dict[FieldT, EncodableT] = {}
                for version in self.read(stale):
                    index = stale[version.pk]
                    body = render(version)
                    chunk[index] = body
                    fresh[fields[index]] = f"{rows[index][2]} {tag}\n".encode() + body
                self.rendered += len(fresh)
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(self.key, mapping=fresh)
                pipe.expire(self.key, BUNDLE_SECONDS)
                pipe.execute()
            if any(body is None for body in chunk):
                # A version left between the two reads: the revision has moved, and this
                # bundle will be replaced by the next one's; it must not be marked complete.
                raise RevisionNotSeenYet("a visible contract changed while it rendered")
            result += [body for body in chunk if body is not None]
        return result

    def read(self, ids: Collection[int]) -> list[ContractVersion]:
        """The versions of these ids, each read from the database once this render; an id no
        longer there is left out."""
        unread = [pk for pk in ids if pk not in self.versions]
        if unread:
            versions = ContractVersion.objects.filter(pk__in=unread).select_related("tool", "risk")
            self.versions.update((version.pk, version) for version in versions)
        return [self.versions[pk] for pk in ids if pk in self.versions]

    def forget_others(self) -> None:
        """Drop the parts of contracts the application no longer sees."""
        keep = {f"{kind}|{name}" for kind in self.kinds for _, name, _ in self.rows}
        stale: list[bytes] = []
        for field, _ in self.client.hscan_iter(self.key, count=WRITE_CHUNK):
            if field.decode() not in keep:
                stale.append(field)
                if len(stale) >= WRITE_CHUNK:
                    self.client.hdel(self.key, *stale)
                    stale = []
        if stale:
            self.client.hdel(self.key, *stale)


def _view(
    view_class: type[views.ExportView], application: Application, query: dict[str, Any]
) -> tuple[views.ExportView, Request]:
    """The view a request for the export would run, and its request: the very code."""
    django_request = HttpRequest()
    django_request.method = "GET"
    django_request.GET = QueryDict(mutable=True)
    django_request.GET.update(query)
    request = Request(django_request)
    # A runtime without a token: rendering reads the application only (the stubs type a
    # request's user as Django's own user classes).
    request.user = Runtime(application=application, token=None)  # type: ignore[assignment,arg-type]
    view = view_class()
    view.setup(django_request)
    view.request = request
    view.format_kwarg = None
    unknown = set(query) - known_parameters(view)
    if unknown:
        raise ValueError(f"{view_class.__name__} does not know {sorted(unknown)}")
    return view, request


def bundle_files_root() -> Path | None:
    folder = getattr(settings, "API_BUNDLE_DIR", None)
    return Path(folder) if folder else None


def _files_folder(application_id: int, revision: int) -> Path | None:
    root = bundle_files_root()
    if root is None:
        return None
    folder = root / str(application_id) / str(revision)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_write(path: Path, body: bytes) -> None:
    """Whole or not at all: nginx never sends a half-written file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(body)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _files_forget(application_id: int, *, keep: tuple[int, ...]) -> None:
    """Drop the application's files of other revisions, keeping the previous one a while for
    requests that were redirected to it just before the new bundle landed."""
    root = bundle_files_root()
    if root is None or not (root / str(application_id)).is_dir():
        return
    for folder in (root / str(application_id)).iterdir():
        if folder.name.isdigit() and int(folder.name) not in keep:
            shutil.rmtree(folder, ignore_errors=True)
