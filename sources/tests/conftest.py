"""Fixtures of the sources tests: the stand-in server's tools, rewritten between syncs."""

import json
from pathlib import Path

import pytest


@pytest.fixture
def tools_file(tmp_path):
    """Write the stand-in server's tools (a list of MCP definitions, or a special spec)."""
    path = tmp_path / "tools.json"

    def write(value) -> Path:
        path.write_text(json.dumps(value))
        return path

    write([])
    return write
