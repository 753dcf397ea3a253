"""Poisoning flags a reviewer can believe (benchmarks/poisoning_flags.py): at most 2 % of the
real vendor tools of the committed catalogs carry an alarm, and at least 90 % of the poisoned
tools do. Counting, not timing; pure Python, no database."""

import pytest

from benchmarks.poisoning_flags import (
    HELD_OUT,
    TARGETS,
    alarms,
    catalog_figures,
    catalogs,
    everything_wrong,
    recall,
    techniques,
    tool_flags,
)

CATALOGS = catalogs()


@pytest.fixture(scope="module")
def figures():
    return {name: catalog_figures(tools, name) for name, tools in CATALOGS.items()}


def test_the_catalogs_are_real_servers_with_their_licences():
    assert len(CATALOGS) >= 12 and HELD_OUT <= set(CATALOGS)
    assert sum(len(tools) for tools in CATALOGS.values()) >= 300
    # Annotations of a vendor's own, beyond the four standard hints, are kept as declared.
    own = {
        name
        for name, tools in CATALOGS.items()
        for tool in tools
        if set(tool.get("annotations") or {})
        - {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
    }
    assert "chrome_devtools" in own


def test_at_most_two_percent_of_real_tools_raise_an_alarm(figures):
    flagged = total = 0
    for result in figures.values():
        flagged += len(result["alarm"])
        total += result["tools"]
    assert total >= 300
    assert flagged / total <= TARGETS["false_positive_rate"], flagged


def test_links_and_long_texts_of_real_tools_are_information_not_alarms(figures):
    # The vendors' documentation links and long descriptions are still shown to a reviewer.
    assert sum(len(result["information"]) for result in figures.values()) >= 30


def test_at_least_ninety_percent_of_the_techniques_raise_an_alarm():
    tools = [item["tool"] for item in techniques()]
    hit, missed = recall(tools)

    assert len(tools) == 30
    assert hit / len(tools) >= TARGETS["recall"], missed


def test_the_poisoned_tools_of_a_published_vulnerable_server_raise_an_alarm():
    tools = everything_wrong()
    poisoned = [tool for tool in tools if tool["poisoned"]]
    honest = [tool for tool in tools if not tool["poisoned"]]

    hit, missed = recall(poisoned)
    assert poisoned and hit / len(poisoned) >= TARGETS["recall"], missed
    assert not [tool["name"] for tool in honest if alarms(tool_flags("wrong", tool) or [])]
