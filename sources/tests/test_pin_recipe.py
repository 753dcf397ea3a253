"""The pin check of docs/api.md, run as a gateway would: mcp 2.x, mcp 1.x and raw JSON agree
with the registry's pins on real servers and on one declaring annotation keys of its own."""

import hashlib
import json
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from registry.models import Tool
from registry.pins import canonical_json, definition_hash
from sources.services import mcp_server_add, mcp_server_sync
from tests.helpers import APPENDIX_B
from tests.mcp import EVERYTHING, MCP1_PYTHON, documented, recipe_pins

ROOT = Path(__file__).resolve().parents[2]
RAW_SERVER = Path(__file__).with_name("raw_server.py")
# Extra annotation keys (chrome-devtools' "category", a vendor's own), null, numbers written
# in forms JCS rewrites, a non-BMP key: what an SDK model or a naive serialiser gets wrong.
OWN_KEYS = """[
 {"name": "click", "title": "Click", "description": "Clicks on the provided element.",
  "inputSchema": {"type": "object", "properties": {"uid": {"type": "string"}},
                  "required": ["uid"]},
  "annotations": {"category": "Input automation", "readOnlyHint": false,
                  "x-cost": {"weight": 1.50, "big": 1E21, "tiny": 1e-7}},
  "outputSchema": null, "_meta": {"vendor/\\ud83d\\ude00": "\\u00e9", "\\uff61": 1}},
 {"name": "list_pages", "description": "Get a list of pages open in the browser.",
  "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true,
  "category": "Navigation automation"}}
]"""


def test_the_documented_canonical_form_writes_the_rfcs_numbers():
    namespace: dict = {}
    exec(documented("canonical JSON"), namespace)  # noqa: S102 - our own documentation
    for ieee, expected in APPENDIX_B:
        assert namespace["number"](struct.unpack(">d", bytes.fromhex(ieee))[0]) == expected
    value = json.loads(OWN_KEYS)
    assert namespace["canonical"](value).encode() == canonical_json(value)


def servers(tmp_path) -> dict[str, list[str]]:
    tools = tmp_path / "tools.json"
    tools.write_text(OWN_KEYS)
    found = {
        "clock": [sys.executable, "-m", "mcp_server_time"],
        "chromedev": [sys.executable, str(RAW_SERVER), str(tools)],
    }
    if shutil.which("node") and EVERYTHING.exists():
        found["everything"] = ["node", str(EVERYTHING), "stdio"]
    elif os.environ.get("CI"):
        pytest.fail("node or @modelcontextprotocol/server-everything is missing in CI")
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("sdk", ["mcp 2.x", "mcp 1.x"])
def test_the_documented_check_agrees_with_the_registrys_pins_and_the_raw_json(tmp_path, sdk):
    python = sys.executable if sdk == "mcp 2.x" else str(MCP1_PYTHON)
    if sdk == "mcp 1.x" and not MCP1_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no {MCP1_PYTHON}: .ci/run builds it")
        pytest.skip(
            f"no {MCP1_PYTHON}: python3 -m venv var/mcp1 && var/mcp1/bin/pip install 'mcp>=1.20,<2'"
        )
    for name, command in servers(tmp_path).items():
        server = mcp_server_add(name=name, command=command)
        report = mcp_server_sync(server=server, approve=True)
        assert report.outcome == "ok", (report.error, report.refused)

        pins = recipe_pins(python, sdk, command)

        registry = {
            tool.name.removeprefix(f"{name}."): tool.versions.latest("number").definition_hash
            for tool in Tool.objects.filter(name__startswith=f"{name}.")
        }
        assert pins == registry and len(pins) >= 2, name
    raw = {tool["name"]: tool for tool in json.loads(OWN_KEYS)}
    for local, tool in raw.items():
        expected = hashlib.sha256(canonical_json(tool)).hexdigest()
        assert definition_hash(tool) == expected
        assert Tool.objects.get(name=f"chromedev.{local}").current_version.definition == tool
    assert recipe_pins(python, sdk, servers(tmp_path)["chromedev"]) == {
        local: hashlib.sha256(canonical_json(tool)).hexdigest() for local, tool in raw.items()
    }
