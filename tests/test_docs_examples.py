"""Every example in README.md and docs/api.md runs against the demo registry, as documented.

The Markdown marks each fenced block with a role after its language (GitHub shows only the
language), so the files stay readable:

- ``sh example``: run with bash, as a reader would after ``make run``, in one directory where
  ``.venv/bin/python``, ``manage.py`` and ``docs/`` are the project's; variables a block assigns
  (``TOKEN=...``) are kept for the blocks after it, as in one terminal.
- ``python example``: run in one namespace per file, as in one interpreter session, with the
  environment variable ``TOKEN`` set to a runtime token of the demo's ``assistant``
  application, created the way ``make run`` creates it.
- ``json POST <path>``: the body of a request to ``/api/v1/<path>`` with that token.
- ``json output`` / ``text output``: what the block before it prints or answers;
  ``json output partial`` shows only some keys of each object (lists keep their length).
- ``sh synopsis``: command forms with placeholders, or commands that start a server; not run.

In every example ``http://127.0.0.1:8000`` (``make run``'s address) is replaced by the live test
server's. Values that differ from run to run (the revision, times, hashes, ETags) are compared
by type only.
"""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.core.management import call_command
from django.db import connection

from api.services import runtime_token_create

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "docs/api.md"]
MAKE_RUN_ADDRESS = "http://127.0.0.1:8000"
VOLATILE_KEYS = {"revision", "approved_at", "content_hash", "created", "occurred_at"}
FENCE = re.compile(r"^```(.*)$")
ROLES = {"example", "output", "synopsis", "POST"}


@dataclass
class Block:
    document: str
    line: int
    language: str
    role: str
    argument: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def blocks_of(document: str) -> list[Block]:
    blocks, lines = [], (ROOT / document).read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        words = opening.group(1).split()
        end = index + 1
        while not lines[end].startswith("```"):
            end += 1
        blocks.append(
            Block(
                document=document,
                line=index + 1,
                language=words[0] if words else "",
                role=words[1] if len(words) > 1 else "",
                argument=" ".join(words[2:]),
                text="\n".join(lines[index + 1 : end]) + "\n",
            )
        )
        index = end + 1
    return blocks


def json_values(text: str) -> list:
    decoder, values, position = json.JSONDecoder(), [], 0
    text = text.strip()
    while position < len(text):
        value, position = decoder.raw_decode(text, position)
        values.append(value)
        while position < len(text) and text[position].isspace():
            position += 1
    return values


def differences(documented, actual, *, partial: bool, path: str = "$") -> list[str]:
    """Where ``actual`` differs from what the docs show (volatile keys: by type only)."""
    if isinstance(documented, dict) and isinstance(actual, dict):
        found = []
        missing = sorted(set(documented) - set(actual))
        extra = [] if partial else sorted(set(actual) - set(documented))
        found += [f"{path}.{key}: documented, not answered" for key in missing]
        found += [f"{path}.{key}: answered, not documented" for key in extra]
        for key in documented.keys() & actual.keys():
            if key in VOLATILE_KEYS:
                if type(documented[key]) is not type(actual[key]):
                    found.append(f"{path}.{key}: {actual[key]!r} is not like {documented[key]!r}")
                continue
            found += differences(documented[key], actual[key], partial=partial,
                                 path=f"{path}.{key}")  # fmt: skip
        return found
    if isinstance(documented, list) and isinstance(actual, list):
        if len(documented) != len(actual):
            return [f"{path}: {len(actual)} items answered, {len(documented)} documented"]
        found = []
        for index, (left, right) in enumerate(zip(documented, actual, strict=True)):
            found += differences(left, right, partial=partial, path=f"{path}[{index}]")
        return found
    if documented != actual or type(documented) is not type(actual):
        return [f"{path}: answered {actual!r}, documented {documented!r}"]
    return []


class Reader:
    """Runs a document's examples in order, like a reader at a terminal after ``make run``."""

    def __init__(self, base_url: str, token: str, workdir: Path):
        self.base_url = base_url
        self.token = token
        self.workdir = workdir
        self.shell_state = workdir / ".state.sh"
        self.shell_state.write_text("")
        self.namespace: dict = {"__name__": "__docs__"}
        (workdir / ".venv" / "bin").mkdir(parents=True)
        python = workdir / ".venv" / "bin" / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
        (workdir / "manage.py").symlink_to(ROOT / "manage.py")
        (workdir / "docs").symlink_to(ROOT / "docs")

    def run(self, block: Block) -> str:
        """What the example printed (for a request: the answer's body)."""
        text = block.text.replace(MAKE_RUN_ADDRESS, self.base_url)
        if block.role == "POST":
            response = requests.post(
                f"{self.base_url}/api/v1/{block.argument}",
                data=text.encode(),
                headers={"Authorization": f"Bearer {self.token}",
                         "Content-Type": "application/json"},
                timeout=60,
            )  # fmt: skip
            return response.text
        if block.language == "python":
            return self._python(block, text)
        return self._shell(block, text)

    def _shell(self, block: Block, text: str) -> str:
        assigned = sorted(set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)=", text, re.MULTILINE)))
        script = f"set -euo pipefail\nsource {self.shell_state}\n{text}\n"
        if assigned:
            script += f"declare -p {' '.join(assigned)} >> {self.shell_state}\n"
        result = subprocess.run(["bash", "-c", script], cwd=self.workdir, env=self._env(),
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, f"{block.where} failed:\n{result.stderr}"
        return result.stdout

    def _python(self, block: Block, text: str) -> str:
        # The namespace carries on from block to block; stdout is what the reader would see.
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(text, block.where, "exec"), self.namespace)
        return output.getvalue()

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
               "PYTHONPATH": str(ROOT), "TOKEN": self.token}  # fmt: skip
        database = connection.settings_dict
        if database["ENGINE"].endswith("postgresql"):
            env["DATABASE_URL"] = (
                f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
                f"{database['PORT']}/{database['NAME']}"
            )
        else:
            env["DATABASE_URL"] = f"sqlite:///{database['NAME']}"
        return env


def check_output(block: Block, printed: str, expected: Block) -> list[str]:
    if expected.language == "json":
        try:
            answered = json_values(printed)
        except json.JSONDecodeError as exc:
            return [f"{block.where}: printed no JSON ({exc}):\n{printed}"]
        partial = expected.argument == "partial"
        found = differences(json_values(expected.text), answered, partial=partial)
        return [f"{expected.where}: {problem}" for problem in found]
    if printed.strip() != expected.text.strip():
        return [f"{expected.where}: printed\n{textwrap.indent(printed, '    ')}"]
    return []


def test_every_block_says_whether_and_how_it_runs():
    for document in DOCUMENTS:
        for block in blocks_of(document):
            assert block.role in ROLES, f"{block.where}: no role ({', '.join(sorted(ROLES))})"
            if block.role == "output":
                assert block.language in ("json", "text"), block.where


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_examples_run_and_print_what_the_docs_say(document, live_server, tmp_path,
                                                      monkeypatch):  # fmt: skip
    call_command("load_demo", verbosity=0)
    # The token make run creates: the assistant application, every scope.
    _, token = runtime_token_create(application_name="assistant", name="demo",
                                    scopes=["contracts:read", "traces:write"])  # fmt: skip
    monkeypatch.setenv("TOKEN", token)
    reader = Reader(live_server.url, token, tmp_path)
    blocks = blocks_of(document)
    problems, ran = [], 0
    for index, block in enumerate(blocks):
        if block.role not in ("example", "POST"):
            continue
        printed = reader.run(block)
        ran += 1
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        if following is not None and following.role == "output":
            problems += check_output(block, printed, following)
    # A session the examples left open keeps a live-server thread, and its database
    # connection, alive past the test.
    for value in reader.namespace.values():
        if isinstance(value, requests.Session):
            value.close()
    assert ran > 0
    assert problems == [], "\n".join(problems)


def test_the_request_examples_of_the_openapi_schema_are_valid_for_the_demo(runtime_client_factory):
    call_command("load_demo", "--no-traces", verbosity=0)
    client = runtime_client_factory("assistant")
    schema = client.get("/api/v1/schema/?format=json").json()
    checked = 0
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            for example in content.get("application/json", {}).get("examples", {}).values():
                response = client.generic(method.upper(), path, json.dumps(example["value"]),
                                          content_type="application/json")  # fmt: skip
                assert response.status_code == 200, (path, response.content)
                body = response.json()
                if path.endswith("/plans/validate/"):
                    assert body["valid"] is True, body["violations"]
                    assert not [v for v in body["violations"] if v["invariant"] == "input_schema"]
                if path.endswith("/filter/"):
                    assert body["tools"] and body["unreachable"] == []
                checked += 1
    assert checked >= 2
