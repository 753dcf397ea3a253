"""The risk suggestion on both benchmark worlds: no high-risk tool is ever suggested low, and
Contract2Tool's traced tools keep the documented exact-match bar (docs/benchmarks.md)."""

from benchmarks.contract2tool import run_inference_benchmark
from benchmarks.risk_world import run


def test_the_second_world_suggests_no_high_risk_tool_low():
    pairs = run()
    assert len(pairs) == 54
    assert [name for gold, suggested, name in pairs if gold == "high" and suggested == "low"] == []
    # Every tool whose danger shows only in an effect or a permission is high.
    by_name = {name: suggested for _, suggested, name in pairs}
    assert {by_name[name] for name in ("billing.reconcile", "sync.mirror", "ops.housekeeping",
                                       "notify.digest")} == {"high"}  # fmt: skip


def test_contract2tool_keeps_its_bar_and_suggests_every_high_risk_tool_high():
    result = run_inference_benchmark()
    assert result["ours_traced"]["exact_match"] >= 0.87
    assert [name for gold, suggested, name in result["risk"]
            if gold == "high" and suggested != "high"] == []  # fmt: skip
