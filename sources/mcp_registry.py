"""MCP servers read from an MCP registry: the official one or any sub-registry of its API.

Pure: no Django. ``server_read`` fetches one ``server.json`` (``GET {registry}/v0.1/servers/
{name}/versions/{version}``, then the ``/v0`` path for a registry that serves only that one),
within a deadline over the whole exchange, a cap on the bytes read, following no redirect and
accepting no compressed body (a small answer cannot unpack into a large one); the answer must be
a ``ServerResponse`` of the API's published OpenAPI document (``data/mcp-registry-openapi.yaml``,
MIT, copied with its licence), whose ``ServerDetail`` is the ``server.json`` schema. Every
failure raises ``RegistryError`` with a sentence for the operator.

``server_setup`` turns a ``server.json`` into what ``mcp_servers add`` stores: a stdio command
for an npm (``npx``), PyPI (``uvx``) or OCI (``docker run``) package, or the URL of a remote.
Its environment variables and headers become names of the worker's ``MCP_...`` variables that
the operator sets; no value from the registry is ever stored or sent as a secret.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx2
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from registry.web import url_problem

SPEC = Path(__file__).with_name("data") / "mcp-registry-openapi.yaml"
# The stable path first; /v0 is the API's development version, all some sub-registries serve.
API_PATHS = ("v0.1", "v0")
SERVER_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+\Z")  # ServerDetail.name's pattern
MAX_NAME_CHARS = 200
MAX_VERSION_CHARS = 255
MAX_PROBLEMS = 5
TEMPLATE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SUPPORTED_PACKAGES = ("npm", "pypi", "oci")


class RegistryError(Exception):
    """The server could not be read or used; the message says why, for the operator."""


@dataclass(frozen=True)
class Limits:
    timeout: float  # seconds for each request, wall clock, name lookup included
    max_bytes: int  # of one answer


@cache
def openapi() -> dict[str, Any]:
    """The MCP registry API's OpenAPI document, parsed."""
    loaded: dict[str, Any] = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    return loaded


@cache
def validator(component: str) -> Draft202012Validator:
    """A JSON Schema validator for one of the document's ``components.schemas``."""
    document = openapi()
    identifier = document["$id"]
    registry: Registry[Any] = Registry().with_resource(
        identifier, DRAFT202012.create_resource(document)
    )
    return Draft202012Validator(
        {"$ref": f"{identifier}#/components/schemas/{component}"},
        registry=registry,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def problems(document: Any, component: str) -> list[str]:
    """Where ``document`` breaks the component's schema (at most a few), or []."""
    found = []
    errors = sorted(validator(component).iter_errors(document), key=lambda e: list(e.path))
    for error in errors[:MAX_PROBLEMS]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        found.append(f"{where.lstrip('.') or '(top)'}: {error.message[:200]}")
    return found


def registry_url_problem(url: str) -> str:
    """Why ``url`` cannot be a registry's base URL, or "": an outbound URL with no query or
    fragment (the API's paths are appended to it)."""
    problem = url_problem(url)
    if not problem and (urlsplit(url).query or urlsplit(url).fragment):
        problem = "A registry URL has no query or fragment."
    return problem


def server_read(
    registry: str, name: str, version: str = "latest", *, limits: Limits
) -> dict[str, Any]:
    """The ``server.json`` of ``name`` at ``version`` (``latest`` by default), as the registry
    serves it, checked against the API's ``ServerResponse``."""
    problem = registry_url_problem(registry)
    if problem:
        raise RegistryError(f"--registry {registry[:200]}: {problem}")
    if len(name) > MAX_NAME_CHARS or not SERVER_NAME.fullmatch(name):
        raise RegistryError(
            f"{name[:200]!r} is not a registry server name (namespace/name, such as "
            "io.github.user/weather)"
        )
    if not version or len(version) > MAX_VERSION_CHARS or not version.isprintable():
        raise RegistryError("--version: one version, such as 1.0.2 (or latest)")
    base = registry.rstrip("/")
    wanted = name if version == "latest" else f"{name} {version}"
    for api in API_PATHS:
        url = f"{base}/{api}/servers/{quote(name, safe='')}/versions/{quote(version, safe='')}"
        status, body = anyio.run(_get, url, limits)
        if status == 404:
            continue
        if status != 200:
            raise RegistryError(f"the registry answered {status} for {wanted} ({url})")
        break
    else:
        raise RegistryError(f"the registry at {base} has no server {wanted}")
    document = _parsed(body)
    found = problems(document, "ServerResponse")
    if found:
        raise RegistryError(
            "the registry's answer is not a server of the MCP registry API: " + "; ".join(found)
        )
    server: dict[str, Any] = document["server"]
    if server["name"] != name:
        raise RegistryError(
            f"the registry answered with another server ({server['name'][:200]}) for {name}"
        )
    if version != "latest" and server["version"] != version:
        raise RegistryError(
            f"the registry answered with version {server['version'][:100]} for {wanted}"
        )
    return server


async def _get(url: str, limits: Limits) -> tuple[int, bytes]:
    headers = {
        "Accept": "application/json",
        "Accept-Encoding": "identity",
        "User-Agent": "tool-contract-registry",
    }
    try:
        # The deadline covers the whole exchange: a per-read timeout restarts at every byte.
        with anyio.fail_after(limits.timeout):
            async with (
                httpx2.AsyncClient(
                    follow_redirects=False, timeout=limits.timeout, headers=headers
                ) as client,
                client.stream("GET", url) as response,
            ):
                if 300 <= response.status_code < 400:
                    location = response.headers.get("location", "")[:200] or "?"
                    raise RegistryError(
                        f"the registry answered {response.status_code}, a redirect to "
                        f"{location}; no redirect is followed: give --registry the address "
                        "it redirects to"
                    )
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise RegistryError(
                        f"the registry sent a {encoding[:50]}-encoded answer; only plain answers "
                        "are read (a small compressed one can unpack into a huge one)"
                    )
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > limits.max_bytes:
                        raise RegistryError(
                            f"the registry's answer is larger than {limits.max_bytes:,} bytes "
                            "(MCP_REGISTRY_MAX_BYTES)"
                        )
                return response.status_code, bytes(body)
    except (TimeoutError, httpx2.TimeoutException):
        raise RegistryError(
            f"the registry sent no complete answer within {limits.timeout:g} s "
            "(MCP_REGISTRY_TIMEOUT_SECONDS)"
        ) from None
    except httpx2.HTTPError as exc:
        raise RegistryError(
            f"cannot reach the registry: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None


def _parsed(body: bytes) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(body.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RegistryError(f"the registry's answer is not JSON: {str(exc)[:200]}") from None


@dataclass(frozen=True)
class Variable:
    """A value the server needs, read from the worker's environment: never stored."""

    name: str  # the server's own name for it: an environment variable or a header
    variable: str  # the worker's environment variable its value is read from (MCP_...)
    required: bool
    secret: bool
    description: str


@dataclass
class Setup:
    """What ``mcp_servers add`` stores for a server read from a registry."""

    source: str  # what was chosen, for the operator: "npm package airtable-mcp-server 1.7.2"
    command: list[str] = field(default_factory=list)
    url: str = ""
    legacy_sse: bool = False
    env: list[Variable] = field(default_factory=list)
    headers: list[Variable] = field(default_factory=list)
    # Declared, not required: not passed unless the operator names them (--env, --header).
    optional: list[Variable] = field(default_factory=list)
    passed_over: list[str] = field(default_factory=list)  # other choices, each with its reason


class Unsupported(Exception):
    """One package or remote of a server.json that cannot be used here, and why."""


def server_setup(server: dict[str, Any], *, local_name: str, remote: bool = False) -> Setup:
    """How to run ``server`` (a server.json checked by ``server_read``): its first package that
    can run here (npm, PyPI or OCI, over stdio), else its first remote; with ``remote``, its
    first remote only. ``local_name`` (the server's name here) prefixes the worker's variables
    (``MCP_<LOCAL>_<NAME>``), so two servers never read each other's secrets."""
    choices: list[tuple[str, Any]] = []
    if not remote:
        choices += [("package", package) for package in server.get("packages") or []]
    choices += [("remote", entry) for entry in server.get("remotes") or []]
    passed_over: list[str] = []
    for kind, entry in choices:
        label = _label(kind, entry)
        try:
            setup = (
                _package_setup(entry, local_name, label)
                if kind == "package"
                else _remote_setup(entry, local_name, label)
            )
        except Unsupported as exc:
            passed_over.append(f"{label}: {exc}")
            continue
        setup.passed_over = passed_over
        return setup
    what = "remote" if remote else "package or remote"
    reasons = "; ".join(passed_over) if passed_over else f"it lists no {what}"
    raise RegistryError(f"nothing in {server['name']}'s server.json can be used here: {reasons}")


def _label(kind: str, entry: dict[str, Any]) -> str:
    if kind == "package":
        version = f" {entry['version']}" if entry.get("version") else ""
        return f"{entry['registryType']} package {entry['identifier']}{version}"[:300]
    return f"{entry['type']} remote {entry['url']}"[:300]


def _package_setup(package: dict[str, Any], local_name: str, label: str) -> Setup:
    kind = package["registryType"]
    if kind not in SUPPORTED_PACKAGES:
        raise Unsupported(
            f"{kind} packages are not run here (npm, pypi and oci are); add the server with "
            "--stdio and the command that runs it"
        )
    transport = package["transport"]["type"]
    if transport != "stdio":
        raise Unsupported(f"it serves {transport} locally; only stdio packages are run here")
    identifier, version = package["identifier"], package.get("version")
    if not version and not (kind == "oci" and _image_pinned(identifier)):
        raise Unsupported("no version: an unpinned package could change under its approved pins")
    if identifier.startswith("-"):
        raise Unsupported("its identifier starts with '-' and would be read as an option")
    env, optional = _variables(package.get("environmentVariables") or [], local_name)
    runtime = _arguments(package.get("runtimeArguments") or [])
    arguments = _arguments(package.get("packageArguments") or [])
    if kind == "npm":
        command = ["npx", "-y", *runtime, f"{identifier}@{version}", *arguments]
    elif kind == "pypi":
        command = ["uvx", *runtime, f"{identifier}@{version}", *arguments]
    else:
        image = identifier if _image_pinned(identifier) else f"{identifier}:{version}"
        # -e NAME without a value hands the container the variable as docker itself got it.
        passed = [token for variable in env for token in ("-e", variable.name)]
        command = ["docker", "run", "-i", "--rm", *passed, *runtime, image, *arguments]
    return Setup(source=label, command=command, env=env, optional=optional)


def _image_pinned(identifier: str) -> bool:
    last = identifier.rsplit("/", 1)[-1]
    return "@sha256:" in identifier or ":" in last


def _remote_setup(remote: dict[str, Any], local_name: str, label: str) -> Setup:
    variables = remote.get("variables") or {}
    url = _substituted(remote["url"], variables, "its URL")
    if TEMPLATE.search(url):
        raise Unsupported(f"its URL names a variable it does not define: {url[:200]}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unsupported("its URL is not an http or https URL with a host")
    headers, optional = _variables(remote.get("headers") or [], local_name)
    return Setup(
        source=label,
        url=url,
        legacy_sse=remote["type"] == "sse",
        headers=headers,
        optional=optional,
    )


def _variables(
    declared: list[dict[str, Any]], local_name: str
) -> tuple[list[Variable], list[Variable]]:
    """Required (or fixed) ones, passed; optional ones, listed for the operator."""
    passed, optional = [], []
    for item in declared:
        variable = Variable(
            name=item["name"],
            variable=worker_variable(local_name, item["name"]),
            required=bool(item.get("isRequired")),
            secret=bool(item.get("isSecret")),
            description=str(item.get("description") or "")[:300],
        )
        # A fixed value must reach the server too; it is read from the worker like the rest.
        if variable.required or "value" in item:
            passed.append(variable)
        else:
            optional.append(variable)
    return passed, optional


def worker_variable(local_name: str, name: str) -> str:
    """The worker's environment variable for the server's ``name``: ``MCP_<LOCAL>_<NAME>``."""
    token = re.sub(r"[^A-Z0-9]+", "_", f"{local_name}_{name}".upper()).strip("_")
    return f"MCP_{token[:100]}"


def _arguments(declared: list[dict[str, Any]]) -> list[str]:
    tokens: list[str] = []
    for argument in declared:
        label = argument.get("name") or argument.get("valueHint") or "positional"
        value = argument.get("value", argument.get("default"))
        if value is None:
            if argument.get("isRequired"):
                raise Unsupported(
                    f"the argument {label} needs a value the server.json leaves to the user; "
                    "add the server with --stdio and the full command"
                )
            continue
        value = _substituted(value, argument.get("variables") or {}, f"the argument {label}")
        if argument["type"] == "named":
            if not str(argument["name"]).startswith("-"):
                raise Unsupported(f"the named argument {label} does not start with '-'")
            tokens += [argument["name"], value]
        else:
            tokens.append(value)
    return tokens


def _substituted(template: str, variables: dict[str, Any], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        spec = variables.get(match.group(1))
        if not isinstance(spec, dict):
            return match.group(0)  # the spec: an unknown {name} stays as it is
        chosen = spec.get("value", spec.get("default"))
        if chosen is None:
            raise Unsupported(
                f"{where} needs {{{match.group(1)}}}, which the server.json leaves to the user"
            )
        return str(chosen)

    return TEMPLATE.sub(value, template)
