"""Where tests and their helpers live (docs/architecture.md, *Tests*), checked on the source."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("registry", "reviews", "learning", "sources", "api", "gateway", "demo", "tests")


def test_no_test_module_imports_another():
    """A helper two test modules share belongs in the ``tests`` package: importing it from a
    test module ties one module's tests to another's file, which a move or a split breaks."""
    found = []
    for app in APPS:
        for path in (ROOT / app).rglob("test_*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                found += [
                    f"{path.relative_to(ROOT)}: {name}"
                    for name in names
                    if name.rsplit(".", 1)[-1].startswith("test_")
                ]
    assert found == []
