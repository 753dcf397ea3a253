"""Every DISTINCT query the code builds says its order.

A model's default ordering joins a DISTINCT selection unless the query orders by what it
selects: ``Trace.objects.values_list("tool_name").distinct()`` is ``SELECT DISTINCT tool_name,
id``, a row per trace. The tests of each such query (``distinct_leaks`` in conftest.py) catch
it from the compiled SQL when they run it; this check also covers a query no test runs, by
reading the source: each ``.distinct()`` call must sit in one chain with an ``.order_by(...)``,
either ``order_by()`` clearing the default or an order over the selected columns. A query kept
in a variable and made distinct later could hide its order from a reader, so the rule asks for
one chain.
"""

import ast
from pathlib import Path

APPS = ("registry", "reviews", "learning", "sources", "api", "gateway", "demo", "config")
ROOT = Path(__file__).resolve().parent.parent


def _chain(node: ast.expr) -> list[str]:
    """The method names called along a chain such as ``a.filter().order_by().distinct()``."""
    names = []
    while isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.append(node.func.attr)
            node = node.func.value
        elif isinstance(node, ast.Call):
            break
        else:
            node = node.value
    return names


def _unordered_distinct_calls(source: str) -> list[int]:
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "distinct"
            and not node.args
        ):
            continue
        top: ast.AST = node  # the whole chain: climb while this node is what is called on
        while isinstance(parent := parents.get(top), ast.Attribute | ast.Subscript | ast.Call):
            if top is not getattr(parent, "value", None) and top is not getattr(
                parent, "func", None
            ):
                break
            top = parent
        if not isinstance(top, ast.expr) or "order_by" not in _chain(top):
            lines.append(node.lineno)
    return lines


def test_the_rule_sees_a_distinct_without_an_order():
    assert _unordered_distinct_calls("q = T.objects.values_list('a').distinct()") == [1]
    assert _unordered_distinct_calls("q = T.objects.order_by().values_list('a').distinct()") == []
    assert _unordered_distinct_calls("q = T.objects.values('a').distinct().order_by('a')[:5]") == []
    assert _unordered_distinct_calls("q = pending.distinct()") == [1]


def test_every_distinct_query_in_the_code_says_its_order():
    unordered = [
        f"{path.relative_to(ROOT)}:{line}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "tests" not in path.parts and "migrations" not in path.parts
        for line in _unordered_distinct_calls(path.read_text())
    ]
    assert unordered == []
