"""The pin check docs/api.md shows a gateway computes the registry's pin of every live tool."""

import re
import sys
from pathlib import Path

import mcp_types

from registry.pins import definition_hash
from sources.client import Limits, tools_list

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_pin():
    text = API_MD.read_text()
    block = re.search(r"```python synopsis\n(import hashlib.*?)\n\n\napproved", text, re.S)
    assert block, "the pin recipe is no longer in docs/api.md"
    namespace: dict = {}
    exec(block.group(1), namespace)  # noqa: S102 - our own documentation
    return namespace["pin"]


def test_the_documented_recipe_gives_the_registrys_pin_for_live_tools():
    pin = documented_pin()
    listed = tools_list(
        transport="stdio",
        command=[sys.executable, "-m", "mcp_server_time"],
        limits=Limits(30, 100, 10**6),
    )
    extra = {
        "name": "titled",
        "title": "Titled",
        "description": "Has titles and null output.",
        "inputSchema": {"type": "object"},
        "annotations": {"title": "T", "destructiveHint": True},
    }
    for definition in [*listed, extra]:
        tool = mcp_types.Tool.model_validate(definition)
        assert pin(tool) == definition_hash(definition)
