"""Error rate, latency and output contracts against a fair baseline, with counter-examples."""

from learning.aggregates import aggregate_add, new_aggregate
from learning.baselines import (
    LATENCY_GROWTH,
    baseline_snapshot,
    behaviour_drift,
    wilson_bounds,
)

SUPPORT = 30


def since(
    calls: int,
    errors: int,
    *,
    duration: int = 100,
    baseline: dict | None = None,
    output_checks: list[dict] | None = None,
) -> dict:
    """A since-version aggregate of ``calls`` calls, the first ``errors`` of them failed."""
    aggregate = new_aggregate()
    checks = list(output_checks or [])
    for n in range(calls):
        failed = n < errors
        trace = {
            "trace_id": f"t{n}",
            "step": 0,
            "status": "error" if failed else "success",
            "state_before": {},
            "state_after": {},
            "args": {},
            "duration_ms": duration,
            "output": {"refund_id": f"re_{n}"},
        }
        if not failed and checks:
            trace["output_check"] = checks.pop(0)
        aggregate_add(aggregate, trace)
    if baseline is not None:
        aggregate["baseline"] = baseline
    return aggregate


def before(calls: int, errors: int, *, duration: int = 100, version: int = 2) -> dict:
    return baseline_snapshot(since(calls, errors, duration=duration), version=version)


def items(approved_cost: dict, aggregate: dict, **kwargs) -> dict:
    found = behaviour_drift(
        approved={"cost": approved_cost}, since=aggregate, min_support=SUPPORT, **kwargs
    )
    return {item["field"]: item for item in found}


def test_wilson_bounds_match_the_textbook_values():
    lower, upper = wilson_bounds(0, 10)
    assert lower == 0.0 and 0.3 < upper < 0.36  # 0.351 at z = 2.326
    lower, upper = wilson_bounds(50, 100)
    assert abs((0.5 - lower) - (upper - 0.5)) < 1e-9 and 0.38 < lower < 0.39
    assert wilson_bounds(0, 0) == (0.0, 1.0)


def test_a_steady_high_error_rate_is_no_drift():
    # It always failed about a quarter of its calls, before and after the version.
    aggregate = since(100, 25, baseline=before(200, 50))
    assert "error_rate" not in items({}, aggregate)


def test_a_few_errors_in_a_few_calls_are_no_drift():
    # 5 of 31 is 16 %, eight times the declared 2 %, but 31 calls cannot show that at 99 %.
    assert "error_rate" not in items({"error_rate": 0.02}, since(31, 5))


def test_a_significant_jump_over_the_declared_rate_is_drift_with_its_evidence():
    item = items({"error_rate": 0.02}, since(100, 40))["error_rate"]
    assert item["report_only"] is False
    assert item["baseline"] == {"source": "declared", "rate": 0.02}
    assert item["observed"]["rate"] == 0.4 and item["observed"]["lower_bound"] > 0.07
    assert item["counts"] == {"total": 100, "errors": 40}
    assert item["examples"] == ["t0", "t1", "t2", "t3", "t4"]


def test_a_jump_over_the_rate_observed_before_publication_is_drift():
    item = items({}, since(100, 40, baseline=before(200, 4)))["error_rate"]
    assert item["report_only"] is False
    assert item["baseline"]["source"] == "observed before v2 was published"
    assert item["baseline"]["rate"] == 0.02 and item["baseline"]["total"] == 200


def test_without_any_baseline_a_high_error_rate_is_reported_never_drift():
    item = items({}, since(100, 40))["error_rate"]
    assert item["report_only"] is True and item["baseline"] is None
    # Too few traces before publication are no baseline either.
    item = items({}, since(100, 40, baseline=before(10, 0)))["error_rate"]
    assert item["report_only"] is True
    # A low rate with no baseline says nothing worth reporting.
    assert "error_rate" not in items({}, since(100, 1))


def test_latency_growth_past_the_factor_is_reported_and_drift_only_where_asked():
    slow = since(60, 0, duration=int(200 * LATENCY_GROWTH * 1.5))
    item = items({"latency_ms_p95": 200}, slow)["latency_ms_p95"]
    assert item["report_only"] is True
    assert item["baseline"]["latency_ms_p95"] == 200.0 and item["observed"]["latency_ms_p95"] > 300
    assert item["counts"] == {"total": 60} and len(item["examples"]) == 5
    assert (
        items({"latency_ms_p95": 200}, slow, latency_is_drift=True)["latency_ms_p95"]["report_only"]
        is False
    )
    # Within the factor: nothing; against what came before publication: the same rule.
    assert "latency_ms_p95" not in items({"latency_ms_p95": 200}, since(60, 0, duration=250))
    observed_before = since(60, 0, duration=600, baseline=before(100, 0, duration=100))
    assert items({}, observed_before)["latency_ms_p95"]["baseline"]["source"].startswith(
        "observed before"
    )


def violation(path: str = "output.refund_status (enum)") -> dict:
    return {"paths": [path], "missing": [], "unchecked": ""}


CLEAN = {"paths": [], "missing": [], "unchecked": ""}


def test_output_violations_below_the_share_are_a_report():
    checks = [violation()] * 3 + [CLEAN] * 57
    item = items({}, since(60, 0, output_checks=checks))["output"]
    assert item["report_only"] is True
    assert item["counts"] == {"checked": 60, "failed": 3, "unchecked": 0}
    assert item["detail"].startswith("output violations")


def test_output_violations_above_the_share_are_drift_with_paths_and_examples():
    missing = {"paths": [], "missing": ["refund_id"], "unchecked": ""}
    checks = [violation()] * 12 + [missing] * 3 + [CLEAN] * 45
    item = items({}, since(60, 0, output_checks=checks))["output"]
    assert item["report_only"] is False
    assert item["detail"].startswith("output no longer matches its contract: 15 of 60")
    assert item["observed"]["paths"] == {"output.refund_status (enum)": 12}
    assert item["observed"]["missing"] == {"refund_id": 3}
    assert item["examples"] == ["t0", "t1", "t2", "t3", "t4"]


def test_output_violations_in_too_few_checked_calls_are_only_a_report():
    checks = [violation()] * 10 + [CLEAN] * 10
    assert items({}, since(20, 0, output_checks=checks))["output"]["report_only"] is True


def test_clean_outputs_report_nothing():
    assert items({"error_rate": 0.02}, since(60, 0, output_checks=[CLEAN] * 60)) == {}
