"""manage.py mcp_servers add NAME --from-registry SERVER_NAME: real server.json documents of the
official MCP Registry (tests/data/mcp_registry, MIT) served by a stand-in registry, and what a
hostile registry answers."""

import copy
import json
import socket
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from sources import mcp_registry
from sources.models import McpServer

from .registry_standin import Answer, StandinRegistry

DATA = Path(__file__).with_name("data") / "mcp_registry"
SEED = json.loads((DATA / "seed.json").read_text())
WITH_REMOTE = json.loads((DATA / "with-remote.json").read_text())
AIRTABLE = "io.github.domdomegg/airtable-mcp-server"
TIME_PYPI = "io.github.domdomegg/time-mcp-pypi"
TIME_NUGET = "io.github.domdomegg/time-mcp-nuget"
CYPHREX = "io.github.getcyphrex/cyphrex-mcp"
WEATHER = "io.github.user/remote-weather"
AIRTABLE_LATEST = f"/v0.1/servers/{AIRTABLE.replace('/', '%2F')}/versions/latest"


@pytest.fixture
def standin():
    registry = StandinRegistry()
    for server in [*SEED, WITH_REMOTE]:
        registry.servers.setdefault(server["name"], []).append(server)
    registry.start()
    yield registry
    registry.stop()


def add(name: str, server_name: str, registry: StandinRegistry, *args: str) -> str:
    out = StringIO()
    call_command(
        "mcp_servers", "add", name, "--from-registry", server_name,
        "--registry", registry.url, *args, stdout=out, stderr=StringIO(),
    )  # fmt: skip
    return out.getvalue()


def refused(name: str, server_name: str, registry: StandinRegistry, *args: str) -> str:
    with pytest.raises(CommandError) as caught:
        add(name, server_name, registry, *args)
    assert not McpServer.objects.filter(name=name).exists()
    return str(caught.value)


def test_the_real_documents_are_server_responses_of_the_published_api():
    assert mcp_registry.openapi()["info"]["version"] == "2025-12-01"
    for server in [*SEED, WITH_REMOTE]:
        assert mcp_registry.problems({"server": server}, "ServerResponse") == []
    assert mcp_registry.problems({"server": {"name": "no-slash"}}, "ServerResponse") != []


def test_it_runs_an_npm_package_and_names_its_secret_without_storing_it(db, standin):
    out = add("airtable", AIRTABLE, standin)

    server = McpServer.objects.get(name="airtable")
    assert server.transport == McpServer.Transport.STDIO
    assert server.command == ["npx", "-y", "airtable-mcp-server@1.7.3"]  # latest of two versions
    assert server.env == {"AIRTABLE_API_KEY": "MCP_AIRTABLE_AIRTABLE_API_KEY"}
    assert server.registry_entry["name"] == AIRTABLE
    assert server.registry_entry["version"] == "1.7.3"
    assert server.registry_entry["registry"] == standin.url
    assert server.registry_entry["server"] == SEED[1]
    assert standin.paths == [AIRTABLE_LATEST]
    assert "npm package airtable-mcp-server 1.7.3" in out
    assert "MCP_AIRTABLE_AIRTABLE_API_KEY -> AIRTABLE_API_KEY (required, secret)" in out
    assert "synced every 60 minutes by beat" in out


def test_a_version_is_read_as_asked(db, standin):
    add("airtable", AIRTABLE, standin, "--version", "1.7.2")
    assert McpServer.objects.get().command == ["npx", "-y", "airtable-mcp-server@1.7.2"]
    assert standin.paths[-1].endswith("/versions/1.7.2")


def test_it_runs_a_pypi_package_with_uvx(db, standin):
    add("clock", TIME_PYPI, standin)
    server = McpServer.objects.get(name="clock")
    assert server.command == ["uvx", "time-mcp-pypi@1.0.6"]
    assert server.env == {}


def test_it_runs_an_oci_image_handing_it_the_variables(db, standin):
    oci_only = copy.deepcopy(SEED[1])
    oci_only["packages"] = [p for p in oci_only["packages"] if p["registryType"] == "oci"]
    standin.servers[AIRTABLE] = [oci_only]
    add("airtable", AIRTABLE, standin)
    server = McpServer.objects.get()
    assert server.command == [
        "docker", "run", "-i", "--rm", "-e", "AIRTABLE_API_KEY",
        "docker.io/domdomegg/airtable-mcp-server:1.7.3",
    ]  # fmt: skip
    assert server.env == {"AIRTABLE_API_KEY": "MCP_AIRTABLE_AIRTABLE_API_KEY"}


def test_an_operator_names_the_variables_of_their_choice(db, standin):
    add("airtable", AIRTABLE, standin, "--env", "AIRTABLE_API_KEY=MCP_SHARED_AIRTABLE")
    assert McpServer.objects.get().env == {"AIRTABLE_API_KEY": "MCP_SHARED_AIRTABLE"}


def test_a_remote_becomes_a_url_under_the_allowlist(db, standin, settings):
    assert "MCP_URL_ALLOWLIST" in refused("cyphrex", CYPHREX, standin)

    settings.MCP_URL_ALLOWLIST = ["https://mcp.cyphrex.io/"]
    out = add("cyphrex", CYPHREX, standin)
    server = McpServer.objects.get(name="cyphrex")
    assert (server.transport, server.url, server.command) == (
        McpServer.Transport.HTTP,
        "https://mcp.cyphrex.io/mcp",
        [],
    )
    assert "url: https://mcp.cyphrex.io/mcp" in out


def test_a_remote_template_and_its_headers_become_names_of_variables(db, standin, settings):
    settings.MCP_URL_ALLOWLIST = ["https://api.example.com/"]
    settings.MCP_SECRET_DESTINATIONS = {"MCP_WEATHER_AUTHORIZATION": ["https://api.example.com/"]}
    add("weather", WEATHER, standin)
    server = McpServer.objects.get()
    assert server.url == "https://api.example.com/mcp"  # {host} from the variable's default
    assert server.headers == {"Authorization": "MCP_WEATHER_AUTHORIZATION"}


def test_remote_chooses_the_remote_over_the_packages(db, standin, settings):
    hybrid = copy.deepcopy(SEED[3])  # time-mcp-pypi, given the remote of cyphrex as well
    hybrid["remotes"] = SEED[4]["remotes"]
    standin.servers[TIME_PYPI] = [hybrid]
    settings.MCP_URL_ALLOWLIST = ["https://mcp.cyphrex.io/"]
    add("clock", TIME_PYPI, standin, "--remote")
    assert McpServer.objects.get().url == "https://mcp.cyphrex.io/mcp"


def test_it_says_which_package_types_it_does_not_run(db, standin):
    message = refused("clock", TIME_NUGET, standin)
    assert "nuget packages are not run here (npm, pypi and oci are)" in message


def test_a_required_argument_left_to_the_user_is_refused_with_its_name(db, standin):
    server = copy.deepcopy(SEED[3])
    server["packages"][0]["packageArguments"] = [
        {"type": "positional", "valueHint": "target_dir", "isRequired": True}
    ]
    standin.servers[TIME_PYPI] = [server]
    assert "the argument target_dir needs a value" in refused("clock", TIME_PYPI, standin)


def test_an_unknown_server_is_looked_for_on_both_api_paths(db, standin):
    message = refused("nowhere", "io.github.nobody/nothing", standin)
    assert f"the registry at {standin.url} has no server io.github.nobody/nothing" in message
    assert [path.split("/")[1] for path in standin.paths] == ["v0.1", "v0"]


def test_a_sub_registry_serving_only_v0_is_read(db, standin):
    standin.only_v0 = True
    add("clock", TIME_PYPI, standin)
    assert McpServer.objects.get().command == ["uvx", "time-mcp-pypi@1.0.6"]


def test_an_unreachable_registry(db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CommandError, match="cannot reach the registry"):
        call_command(
            "mcp_servers", "add", "x", "--from-registry", AIRTABLE,
            "--registry", f"http://127.0.0.1:{port}", stdout=StringIO(),
        )  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Answer(body=b"x" * 5000), "larger than 4,096 bytes"),
        (Answer(body=b"<html>rate limited</html>"), "not JSON"),
        (Answer(body=b'{"server": NaN}'), "not JSON"),
        (Answer(body=b"[" * 2000 + b"]" * 2000), "not JSON: maximum recursion depth"),
        (Answer(body=json.dumps(SEED[1]).encode()), "(top): 'server' is a required property"),
        (
            Answer(body=json.dumps({"server": {**SEED[1], "description": "x" * 101}}).encode()),
            "server.description",
        ),
        (Answer(body=json.dumps({"server": SEED[3]}).encode()), "another server"),
        (Answer(status=500, body=b"{}"), "the registry answered 500"),
        (
            Answer(status=302, headers={"Location": "http://169.254.169.254/latest/meta-data"}),
            "a redirect to http://169.254.169.254/latest/meta-data; no redirect is followed",
        ),
        (Answer(body=b"{}" + b" " * 10_000_000, gzip=True), "gzip-encoded answer"),
    ],
)
def test_a_hostile_registry_gets_a_clear_refusal_and_nothing_is_stored(
    db, standin, settings, answer, message
):
    settings.MCP_REGISTRY_MAX_BYTES = 4096
    standin.answers[AIRTABLE_LATEST] = answer
    assert message in refused("airtable", AIRTABLE, standin)
    assert standin.paths == [AIRTABLE_LATEST]  # a redirect is never followed


def test_a_registry_dripping_its_answer_meets_one_deadline(db, standin, settings):
    settings.MCP_REGISTRY_TIMEOUT_SECONDS = 1
    standin.answers[AIRTABLE_LATEST] = Answer(body=json.dumps({"server": SEED[1]}).encode(),
                                              drip_seconds=0.05)  # fmt: skip
    assert "no complete answer within 1 s" in refused("airtable", AIRTABLE, standin)


def test_text_from_the_registry_cannot_drive_the_terminal(db, standin):
    server = copy.deepcopy(SEED[1])
    server["packages"][0]["environmentVariables"][0]["description"] = "key\x1b[2J\x1b]0;owned\x07"
    standin.servers[AIRTABLE] = [server]
    out = add("airtable", AIRTABLE, standin)
    assert "\x1b" not in out and "\x07" not in out and "key [2J ]0;owned" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--registry", "http://127.0.0.1:1", "--stdio", "run"], "--registry goes with"),
        (["--remote", "--stdio", "run"], "--remote goes with"),
    ],
)
def test_registry_options_go_with_from_registry(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("mcp_servers", "add", "x", *args, stdout=StringIO())


@pytest.mark.parametrize(
    ("registry", "name", "message"),
    [
        ("ftp://registry.example.com", AIRTABLE, "Only http and https URLs with a host"),
        ("https://user:pw@registry.example.com", AIRTABLE, "user name or password"),
        ("https://registry.example.com/?page=2", AIRTABLE, "no query or fragment"),
        ("https://registry.example.com", "no-namespace", "not a registry server name"),
    ],
)
def test_a_bad_registry_or_name_is_refused_before_anything_is_sent(db, registry, name, message):
    with pytest.raises(CommandError, match=message):
        call_command(
            "mcp_servers", "add", "x", "--from-registry", name, "--registry", registry,
            stdout=StringIO(),
        )  # fmt: skip


def test_the_admin_shows_where_a_server_came_from(db, standin, admin_client):
    add("airtable", AIRTABLE, standin)
    server = McpServer.objects.get()
    page = admin_client.get(reverse("admin:sources_mcpserver_change", args=[server.pk]))
    assert f"{AIRTABLE} 1.7.3 at {standin.url}: npm package airtable-mcp-server 1.7.3" in (
        page.content.decode()
    )
