"""The MCP Registry API's reads (/v0.1/servers, /v0/servers): each application sees the MCP
servers it may use, with their approved tools and pins, in the shapes of the API's published
OpenAPI document (sources/data/mcp-registry-openapi.yaml)."""

import json
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from registry.models import Application, ContractVersion
from registry.pins import definition_hash
from sources.mcp_registry import problems
from sources.services import mcp_server_add, mcp_server_edit, mcp_server_sync
from tests.helpers import client_for
from tests.mcp import GREET, STANDIN

SEED = json.loads(
    (Path(__file__).parents[2] / "sources/tests/data/mcp_registry/seed.json").read_text()
)
WAVE = {
    "name": "wave",
    "description": "Wave at someone, by name.",
    "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
}
ACME = "/v0.1/servers/tool-contract-registry%2Facme"


def server(name: str, tools: list[dict], tmp_path: Path, *, applications, **extra):
    """An MCP server (the stand-in, over stdio) whose tools are approved on first use."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(tools))
    added = mcp_server_add(
        name=name,
        command=[sys.executable, STANDIN, str(path)],
        applications=applications,
        **extra,
    )
    assert mcp_server_sync(server=added, approve=True).outcome == "ok"
    return added, path


@pytest.fixture
def servers(db, tmp_path):
    Application.objects.create(name="assistant")
    Application.objects.create(name="other")
    acme, acme_tools = server("acme", [GREET], tmp_path, applications=["assistant"])
    # A tool the server declares later waits for a reviewer: not served until approved.
    acme_tools.write_text(json.dumps([GREET, WAVE]))
    mcp_server_sync(server=acme)
    server("beta", [GREET], tmp_path, applications=["other"])
    return acme


def test_it_lists_the_servers_an_application_may_use_in_the_apis_shape(servers):
    response = client_for("assistant").get("/v0.1/servers")

    assert response.status_code == 200
    body = response.json()
    assert problems(body, "ServerList") == []
    assert [entry["server"]["name"] for entry in body["servers"]] == ["tool-contract-registry/acme"]
    assert body["metadata"] == {"count": 1}
    meta = body["servers"][0]["_meta"]
    assert meta["io.modelcontextprotocol.registry/official"]["isLatest"] is True
    assert [tool["name"] for tool in meta["tool-contract-registry/contracts"]["tools"]] == [
        "acme.greet"
    ]  # acme.wave is proposed, not approved

    other = client_for("other").get("/v0/servers").json()
    assert [entry["server"]["name"] for entry in other["servers"]] == [
        "tool-contract-registry/beta"
    ]


def test_each_pin_is_the_pin_of_the_approved_tool(servers):
    body = client_for("assistant").get(f"{ACME}/versions/latest").json()

    (tool,) = body["_meta"]["tool-contract-registry/contracts"]["tools"]
    approved = ContractVersion.objects.get(tool__name="acme.greet", status="approved")
    assert tool == {
        "name": "acme.greet",
        "serverTool": "greet",
        "version": approved.number,
        "pin": approved.definition_hash,
        "risk": approved.risk.name,
    }
    assert tool["pin"] == definition_hash(GREET)  # the hash of the tool as its server sent it
    exported = client_for("assistant").get("/api/v1/export/mcp/").json()["tools"]
    assert tool["pin"] == exported[0]["_meta"]["tool-contract-registry/definitionHash"]


def test_one_server_by_version_and_its_versions(servers):
    client = client_for("assistant")
    latest = client.get(f"{ACME}/versions/latest")
    assert latest.status_code == 200
    assert problems(latest.json(), "ServerResponse") == []
    assert latest.json()["server"]["version"] == "0.0.0"
    assert client.get(f"{ACME}/versions/0.0.0").json() == latest.json()
    assert client.get(f"{ACME}/versions/9.9.9").status_code == 404
    versions = client.get(f"{ACME}/versions").json()
    assert problems(versions, "ServerList") == []
    assert versions["servers"] == [latest.json()]
    # The form before /versions/latest, kept under /v0/.
    assert client.get("/v0/servers/tool-contract-registry%2Facme").json() == latest.json()
    assert client.get("/v0.1/servers/tool-contract-registry%2Facme").status_code == 404


def test_an_application_never_sees_another_applications_server(servers):
    client = client_for("other")
    for path in (f"{ACME}/versions/latest", f"{ACME}/versions", f"{ACME}/versions/0.0.0"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert client.get("/v0/servers/tool-contract-registry%2Facme").status_code == 404
    # A name no server can have answers 404 without a query (PostgreSQL refuses a NUL).
    assert client.get("/v0.1/servers/tool-contract-registry%2Fac%00me/versions").status_code == 404
    assert client.get("/v0/servers/%0A/versions/1").json()["error"]["code"] == "not_found"


def test_it_needs_a_runtime_token(servers):
    assert APIClient().get("/v0.1/servers").status_code == 401


def test_a_server_read_from_a_registry_is_served_as_it_published_it(db, tmp_path):
    Application.objects.create(name="assistant")
    airtable = SEED[1]
    entry = {
        "registry": "https://registry.modelcontextprotocol.io",
        "name": airtable["name"],
        "version": airtable["version"],
        "source": "npm package airtable-mcp-server 1.7.3",
        "server": airtable,
    }
    server("airtable", [GREET], tmp_path, applications=["assistant"], registry_entry=entry)

    body = (
        client_for("assistant")
        .get("/v0.1/servers/tool-contract-registry%2Fairtable/versions/1.7.3")
        .json()
    )

    assert problems(body, "ServerResponse") == []
    detail = body["server"]
    assert detail["name"] == "tool-contract-registry/airtable"
    assert (detail["version"], detail["description"]) == ("1.7.3", airtable["description"])
    assert detail["packages"] == airtable["packages"]
    assert body["_meta"]["tool-contract-registry/contracts"]["origin"] == {
        "registry": "https://registry.modelcontextprotocol.io",
        "name": airtable["name"],
        "version": "1.7.3",
    }


def test_an_http_server_shows_its_url_and_header_names_never_values(db, settings, tmp_path):
    # Stored as an HTTP server straight away: the listing itself is not what is tested here.
    from sources.models import McpServer

    settings.MCP_URL_ALLOWLIST = ["https://mcp.example.com/"]
    settings.MCP_SECRET_DESTINATIONS = {"MCP_TOKEN": ["https://mcp.example.com/"]}
    Application.objects.create(name="assistant")
    acme, _ = server("acme", [GREET], tmp_path, applications=["assistant"])
    McpServer.objects.filter(pk=acme.pk).update(
        transport="http", command=[], url="https://mcp.example.com/mcp",
        headers={"Authorization": "MCP_TOKEN"},
    )  # fmt: skip
    mcp_server_edit(server=acme, enabled=True)  # a save: the revision moves

    detail = client_for("assistant").get(f"{ACME}/versions/latest").json()["server"]
    assert detail["remotes"] == [
        {
            "type": "streamable-http",
            "url": "https://mcp.example.com/mcp",
            "headers": [{"name": "Authorization", "isRequired": True, "isSecret": True}],
        }
    ]
    assert "MCP_TOKEN" not in json.dumps(detail)


def test_pages_follow_the_cursor(db, tmp_path):
    Application.objects.create(name="assistant")
    for name in ("c-three", "a-one", "b-two"):
        server(name, [GREET], tmp_path, applications=["assistant"])
    client = client_for("assistant")

    first = client.get("/v0.1/servers", {"limit": 2}).json()
    assert problems(first, "ServerList") == []
    assert [s["server"]["name"] for s in first["servers"]] == [
        "tool-contract-registry/a-one",
        "tool-contract-registry/b-two",
    ]
    assert first["metadata"] == {"count": 2, "nextCursor": "tool-contract-registry/b-two"}
    second = client.get("/v0.1/servers", {"limit": 2, "cursor": "tool-contract-registry/b-two"})
    assert [s["server"]["name"] for s in second.json()["servers"]] == [
        "tool-contract-registry/c-three"
    ]
    assert second.json()["metadata"] == {"count": 1}

    assert [
        s["server"]["name"]
        for s in client.get("/v0.1/servers", {"search": "TWO"}).json()["servers"]
    ] == ["tool-contract-registry/b-two"]
    assert client.get("/v0.1/servers", {"version": "1.0.0"}).json()["servers"] == []
    assert len(client.get("/v0.1/servers", {"version": "latest"}).json()["servers"]) == 3
    future = client.get("/v0.1/servers", {"updated_since": "2999-01-01T00:00:00Z"})
    assert future.json()["servers"] == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"updated_since": "yesterday"}, "updated_since"),
        ({"updated_since": "2025-01-01T00:00:00"}, "updated_since"),
        ({"include_deleted": "maybe"}, "include_deleted"),
        ({"page": "2"}, "query"),
    ],
)
def test_a_bad_query_is_a_clear_400(servers, query, field):
    response = client_for("assistant").get("/v0.1/servers", query)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_conditional_read_is_304_until_the_servers_change(
    servers, django_capture_on_commit_callbacks
):
    client = client_for("assistant")
    first = client.get("/v0.1/servers")
    assert client.get("/v0.1/servers", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304

    with django_capture_on_commit_callbacks(execute=True):
        mcp_server_edit(server=servers, enabled=False)  # the revision moves once this commits

    changed = client.get("/v0.1/servers", HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200
    assert changed.json()["servers"] == []


def test_the_endpoints_are_in_the_openapi_schema(servers):
    schema = client_for("assistant").get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    paths = schema.json()["paths"]
    assert "/v0.1/servers" in paths
    assert "/v0.1/servers/{name}/versions/{version}" in paths
    assert "/v0/servers/{name}" in paths
