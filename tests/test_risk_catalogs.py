"""The risk suggestion on the committed tool catalogs (benchmarks/risk_catalogs.py): the
targets of docs/benchmarks.md, with one set of settings, words only and with declared hints."""

import pytest

from benchmarks.risk_catalogs import HELD_OUT, catalogs, figures, meets, run

CATALOGS = catalogs()
MCP = sorted(name for name in CATALOGS if name not in ("contract2tool", "demo_registry",
                                                       "risk_world"))  # fmt: skip


def test_the_real_catalogs_are_captured_with_their_licence_and_labels():
    assert len(MCP) >= 7 and HELD_OUT <= set(MCP)
    annotated = [name for name in MCP if any(tool["annotations"] for tool in CATALOGS[name])]
    assert len(annotated) >= 3
    for name in MCP:
        assert all(tool["risk"] in ("low", "medium", "high") for tool in CATALOGS[name])


@pytest.mark.parametrize("hints", [False, True])
@pytest.mark.parametrize("name", [*MCP, "contract2tool", "demo_registry", "risk_world"])
def test_every_catalog_meets_the_targets(name, hints):
    result = figures(run(CATALOGS[name], hints=hints))
    assert meets(result), result


def test_hints_removed_means_removed():
    with_hints = run(CATALOGS["filesystem"], hints=True)
    words_only = run(CATALOGS["filesystem"], hints=False)
    assert any(item["kind"] == "hint" for result in with_hints for item in result["evidence"])
    assert not any(item["kind"] == "hint" for result in words_only for item in result["evidence"])
