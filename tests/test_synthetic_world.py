"""Inference recovers the synthetic world's contracts exactly, and finds its one drift."""

from benchmarks.contract2tool import run_inference_benchmark
from demo import synthetic_world as world
from learning.aggregates import aggregate_add, new_aggregate
from learning.inference import contract_drift, infer_contract
from learning.traces import trace_parse


def aggregates(traces) -> tuple[dict, dict]:
    whole, late = {}, {}
    for index, item in enumerate(traces):
        trace, errors = trace_parse(item, aliases=world.ALIASES)
        assert not errors
        aggregate_add(whole.setdefault(trace["tool"], new_aggregate()), trace)
        if index >= 2000:
            aggregate_add(late.setdefault(trace["tool"], new_aggregate()), trace)
    return whole, late


def infer(name: str, aggregate: dict) -> dict:
    return infer_contract(name=name, description="", input_schema=None, aggregate=aggregate)


def test_inference_recovers_every_faithful_contract_exactly():
    whole, _ = aggregates(world.generate())
    gold = world.gold_contracts()
    for name, expected in gold.items():
        if name == world.DRIFTED:
            continue
        inferred = infer(name, whole[name])
        assert inferred["requires"] == expected["requires"], name
        assert inferred["produces"] == expected["produces"], name


def test_only_the_drifted_tool_drifts_once_it_has_changed():
    _, late = aggregates(world.generate())
    gold = world.gold_contracts()
    drifted = []
    for name, expected in gold.items():
        approved = {**expected, "risk": "low"}
        inferred = infer(name, late[name])
        items = [
            item
            for item in contract_drift(approved=approved, inferred=inferred)
            if item["field"] in ("requires", "produces")
        ]
        if items:
            drifted.append(name)
            assert inferred["requires"] == world.drifted_contract()["requires"]
            assert inferred["produces"] == world.drifted_contract()["produces"]
    assert drifted == [world.DRIFTED]


def test_contract2tool_needs_only_the_initial_state_with_the_vocabulary_declared():
    # Per-step state stripped: the runtime sends the task's state on its first call, and the
    # rest is found in the values (learning.dataflow).
    for state in ("every step", "initial"):
        row = run_inference_benchmark(state=state)["ours_traced"]
        assert (row["requires_f1"], row["produces_f1"]) == (1.0, 1.0), state
