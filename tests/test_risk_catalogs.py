"""The risk suggestion on the committed tool catalogs (benchmarks/risk_catalogs.py): the
targets of docs/benchmarks.md, with one set of settings, words only and with declared hints."""

import pytest

from benchmarks.risk_catalogs import HELD_OUT, catalogs, figures, meets, run

CATALOGS = catalogs()
# Catalogs whose labels follow a policy the suggestion may not follow, because labels only
# ever raise it: the misses are named (docs/benchmarks.md says why).
KNOWN = {
    "contract2tool": {"high_below_high": ["update_event", "patch_file"]},
    "demo_registry": {"accuracy": 0.76},
}
MCP = sorted(name for name in CATALOGS if name not in ("contract2tool", "demo_registry",
                                                       "risk_world"))  # fmt: skip


def test_the_real_catalogs_are_captured_with_their_licence_and_labels():
    assert len(MCP) >= 7 and HELD_OUT <= set(MCP)
    annotated = [name for name in MCP if any(tool["annotations"] for tool in CATALOGS[name])]
    assert len(annotated) >= 3
    for name in MCP:
        assert all(tool["risk"] in ("low", "medium", "high") for tool in CATALOGS[name])


@pytest.mark.parametrize("hints", [False, True])
@pytest.mark.parametrize("name", [*MCP, "risk_world"])
def test_every_catalog_meets_the_targets(name, hints):
    result = figures(run(CATALOGS[name], hints=hints))
    assert meets(result), result


def test_contract2tool_misses_only_the_two_updates_its_policy_rates_high():
    result = figures(run(CATALOGS["contract2tool"], hints=False))
    assert result["high_below_high"] == KNOWN["contract2tool"]["high_below_high"]
    assert result["write_low"] == []
    assert result["read_low_rate"] >= 0.9 and result["accuracy"] >= 0.85


def test_the_demo_registry_never_under_rates():
    result = figures(run(CATALOGS["demo_registry"], hints=False))
    assert result["high_below_high"] == [] and result["write_low"] == []
    assert result["accuracy"] >= KNOWN["demo_registry"]["accuracy"]


def test_hints_removed_means_removed():
    with_hints = run(CATALOGS["filesystem"], hints=True)
    words_only = run(CATALOGS["filesystem"], hints=False)
    assert any(item["kind"] == "hint" for result in with_hints for item in result["evidence"])
    assert not any(item["kind"] == "hint" for result in words_only for item in result["evidence"])
