"""Real servers whose annotations carry keys of their own: chrome-devtools-mcp from npm
(``category``, ``conditions``) and airbyte-connector-builder-mcp from PyPI (``domain``).

Each is synced once for the module. Then the registry's pins must equal the documented check
run with mcp 2.x, with mcp 1.x, on the raw JSON the server wrote and, for chrome-devtools, the
JavaScript form with Node; ``export/mcp/`` and the approved definitions carry the annotations
exactly as declared, keys of their own included.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings

from registry.models import Application, Tool
from registry.pins import definition_hash
from reviews.models import ReviewTicket
from reviews.services import ProposalSeen, review_approve, reviewers_group
from sources.services import mcp_server_add, mcp_server_sync
from tests.mcp import API_MD, MCP1_PYTHON, documented, recipe_pins

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tests" / "mcp_servers"
CHROME_DEVTOOLS = (
    NODE_MODULES / "node_modules/chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js"
)
# A virtualenv of its own (it needs mcp 1.x and fastmcp), built by .ci/run from
# tests/mcp_servers/requirements-airbyte.txt.
AIRBYTE = ROOT / "var" / "mcp-airbyte" / "bin" / "airbyte-connector-builder-mcp"
SERVERS = {
    # No usage statistics, no CrUX look-ups: nothing leaves the machine. Listing its tools
    # starts no browser.
    "chromedev": ["node", str(CHROME_DEVTOOLS), "--no-usage-statistics", "--no-performance-crux"],
    "builder": [str(AIRBYTE)],
}
OWN_KEYS = {"chromedev": {"category", "conditions"}, "builder": {"domain"}}
STANDARD = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
MISSING = {
    "chromedev": "node or chrome-devtools-mcp is missing: make mcp-servers",
    "builder": "no var/mcp-airbyte: python3 -m venv var/mcp-airbyte && "
    "var/mcp-airbyte/bin/pip install -r tests/mcp_servers/requirements-airbyte.txt",
}
DRIVER = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = JSON.parse(process.argv[2]);
const client = new Client({ name: "pin-check", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const pins = Object.fromEntries((await listedTools(client)).map((tool) => [tool.name, pin(tool)]));
console.log(JSON.stringify(pins));
await client.close();
"""


def available(name: str) -> bool:
    if name == "chromedev":
        return shutil.which("node") is not None and CHROME_DEVTOOLS.exists()
    return AIRBYTE.exists()


def raw_listing(command: list[str], timeout: float = 120) -> list[dict]:
    """The tools as the server wrote them on stdout, each JSON-RPC line parsed by ``json``
    alone: no SDK between the bytes and the hash."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    )
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict) -> None:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    def answer(ident: int) -> dict:
        for line in process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not a JSON-RPC line
            if isinstance(message, dict) and message.get("id") == ident:
                assert "result" in message, message
                return message["result"]
        raise AssertionError(f"the server closed its output before answering request {ident}")

    try:
        info = {"name": "raw", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        send({"id": 1, "method": "initialize", "params": params})
        answer(1)
        send({"method": "notifications/initialized"})
        tools: list[dict] = []
        cursor, ident = None, 2
        while True:
            send(
                {
                    "id": ident,
                    "method": "tools/list",
                    "params": {"cursor": cursor} if cursor else {},
                }
            )
            result = answer(ident)
            tools += result["tools"]
            cursor, ident = result.get("nextCursor"), ident + 1
            if not cursor:
                return tools
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def synced(django_db_setup, django_db_blocker):
    """Each available server synced once (trust on first use), inside a transaction rolled
    back when the module ends; with each, the raw tools it sent."""
    found = {}
    for name, command in SERVERS.items():
        if available(name):
            found[name] = {"command": command, "raw": raw_listing(command)}
        elif os.environ.get("CI"):
            pytest.fail(f"{MISSING[name]} (CI installs it)")
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            Application.objects.get_or_create(name="assistant")
            with override_settings(MCP_MAX_NEW_TOOLS_PER_SYNC=1_000):
                for name, server in found.items():
                    added = mcp_server_add(
                        name=name, command=server["command"], applications=["assistant"]
                    )
                    server["report"] = mcp_server_sync(server=added, approve=True)
                    approve_as_reviewers(server["report"].flagged)
            yield found
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def approve_as_reviewers(flagged: dict[str, str]) -> None:
    """Tools --approve left open for their poisoning flags, approved by reviewers who read
    them (the point here is what an approved definition keeps, not the flags)."""
    reviewers = []
    for username in ("own-keys-reviewer-1", "own-keys-reviewer-2"):
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.groups.add(reviewers_group())
        reviewers.append(user)
    for ticket in ReviewTicket.objects.filter(
        tool__name__in=flagged, status=ReviewTicket.Status.OPEN
    ):
        for reviewer in reviewers[: ticket.approvals_required]:
            review_approve(ticket=ticket, reviewer=reviewer, seen=ProposalSeen.of(ticket))


def server(synced, name: str) -> dict:
    if name not in synced:
        pytest.skip(MISSING[name])
    return synced[name]


def registry_pins(name: str) -> dict[str, str]:
    return {
        tool.name.removeprefix(f"{name}."): tool.versions.latest("number").definition_hash
        for tool in Tool.objects.filter(name__startswith=f"{name}.")
    }


def own_keys(tool: dict) -> set[str]:
    """The keys of the tool's annotations that the specification does not name."""
    return set(tool.get("annotations") or {}) - STANDARD


@pytest.mark.django_db
@pytest.mark.parametrize("name", SERVERS)
def test_each_server_declares_keys_of_its_own_and_every_tool_is_published(synced, name):
    found = server(synced, name)
    report = found["report"]
    assert report.outcome == "ok", (report.error, report.refused)
    assert not report.refused and not report.deferred
    declared = {tool["name"] for tool in found["raw"]}
    assert len(declared) >= 20
    # Published at once, or (flagged) left for the reviewers who approved it above.
    assert sorted([*report.published, *report.flagged]) == sorted(
        f"{name}.{tool}" for tool in declared
    )
    keys = set().union(*(own_keys(tool) for tool in found["raw"]))
    assert keys == OWN_KEYS[name]
    assert sum(bool(own_keys(tool)) for tool in found["raw"]) >= len(declared) - 2


@pytest.mark.django_db
@pytest.mark.parametrize("name", SERVERS)
def test_the_pin_is_the_same_from_mcp_2_mcp_1_the_raw_json_and_the_registry(synced, name):
    found = server(synced, name)
    namespace: dict = {}
    exec(documented("canonical JSON"), namespace)  # noqa: S102 - our own documentation
    raw = {tool["name"]: namespace["pin"](tool) for tool in found["raw"]}
    assert raw == {tool["name"]: definition_hash(tool) for tool in found["raw"]}
    assert registry_pins(name) == raw

    assert recipe_pins(sys.executable, "mcp 2.x", found["command"]) == raw
    if not MCP1_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no {MCP1_PYTHON}: .ci/run builds it")
        pytest.skip(f"no {MCP1_PYTHON}: python3 -m venv var/mcp1 && pip install 'mcp>=1.20,<2'")
    assert recipe_pins(str(MCP1_PYTHON), "mcp 1.x", found["command"]) == raw


@pytest.mark.parametrize("name", SERVERS)
def test_the_export_carries_exactly_the_declared_annotations(synced, name, runtime_client_factory):
    found = server(synced, name)
    client = runtime_client_factory("assistant")
    exported = {
        tool["name"]: tool
        for tool in client.get("/api/v1/export/mcp/").json()["tools"]
        if tool["name"].startswith(f"{name}.")
    }
    listed = client.get("/api/v1/tools/", {"page_size": 200}).json()
    rows = {row["name"]: row for row in listed.get("results", listed)}
    assert set(exported) == {f"{name}.{tool['name']}" for tool in found["raw"]}
    for tool in found["raw"]:
        served = exported[f"{name}.{tool['name']}"]
        if "annotations" in tool:
            assert served["annotations"] == tool["annotations"]  # own keys kept, none invented
        else:
            assert "annotations" not in served
        assert served["_meta"]["tool-contract-registry/definitionHash"] == definition_hash(tool)
        assert rows[served["name"]]["annotations"] == tool.get("annotations", {})


@pytest.mark.django_db
@pytest.mark.parametrize("name", SERVERS)
def test_keys_of_its_own_survive_into_the_approved_definition(synced, name):
    found = server(synced, name)
    for tool in found["raw"]:
        approved = Tool.objects.get(name=f"{name}.{tool['name']}").current_version
        assert approved is not None and approved.definition == tool
        assert approved.annotations == tool.get("annotations", {})
        assert own_keys(approved.definition) == own_keys({"annotations": approved.annotations})
    assert any(own_keys(tool) for tool in found["raw"])


def run_javascript(driver: str, argument) -> str:
    """The documented JavaScript block followed by ``driver``, run by Node with ``argument``
    (JSON) as process.argv[2]; what it printed last."""
    blocks = dict(re.findall(r"```js synopsis\n// pin: (.*?)\n(.*?)```", API_MD.read_text(), re.S))
    assert "JavaScript" in blocks, "the JavaScript pin check is no longer in docs/api.md"
    # Beside tests/mcp_servers/node_modules, where its imports resolve.
    with tempfile.NamedTemporaryFile(
        "w", suffix=".mjs", prefix=".pin-check-", dir=NODE_MODULES, delete=False
    ) as script:
        script.write(blocks["JavaScript"] + driver)
    try:
        done = subprocess.run(
            ["node", script.name, json.dumps(argument)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.unlink(script.name)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.django_db
def test_the_documented_javascript_check_agrees_with_the_registrys_pins(synced):
    found = server(synced, "chromedev")
    pins = json.loads(run_javascript(DRIVER, found["command"]))
    assert pins == registry_pins("chromedev")
    assert pins == {tool["name"]: definition_hash(tool) for tool in found["raw"]}
    assert any(own_keys(tool) for tool in found["raw"])  # the keys an SDK model may drop


def test_the_javascript_hash_is_sha256_of_the_canonical_form():
    """Node's canonicalize and createHash against registry/pins.py on keys JCS reorders,
    numbers it rewrites and non-BMP text, with no server involved."""
    if shutil.which("node") is None or not (NODE_MODULES / "node_modules/canonicalize").exists():
        if os.environ.get("CI"):
            pytest.fail("node or canonicalize is missing in CI")
        pytest.skip("node or canonicalize is missing: make mcp-servers")
    tool = {
        "name": "click",
        "annotations": {"category": "input", "x-cost": {"weight": 1.5, "big": 1e21, "tiny": 1e-7}},
        "_meta": {"\U0001f600": "\u00e9", "\uff61": 1},  # UTF-16 order, not code points
        "outputSchema": None,
    }
    printed = run_javascript("\nconsole.log(pin(JSON.parse(process.argv[2])));\n", tool)
    assert printed == definition_hash(tool)
    assert definition_hash(tool) != hashlib.sha256(json.dumps(tool).encode()).hexdigest()
