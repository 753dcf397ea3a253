"""``VerbPool``: the tools of one action word read once for many suggestions must vote as
``neighbours_vote`` votes on the same tools, sorted anew, and count as ``mostly_low`` counts."""

import random

import pytest

from learning.risk import LabelIndex, lexicon, prepare_labels, suggest_risk
from learning.risk._labels import RISK_ORDER, VerbPool, mostly_low, neighbours_vote

WORDS = ["record", "look", "tool", "id", "user", "mail", "file", "repo", "issue", "page"]


def label(name, tokens, risk):
    return {"name": name, "risk": risk, "tokens": set(tokens), "verb": "get", "kind": "informs",
            "features": frozenset(), "produces": [], "requires": [], "gated": []}  # fmt: skip


def random_pool(rnd):
    """Tools with few words, so likeness ties, repeated names and empty word sets are common."""
    names = [f"ns{rnd.randint(0, 2)}.tool_{rnd.randint(0, 9)}" for _ in range(rnd.randint(1, 14))]
    return [
        label(name, rnd.sample(WORDS, rnd.randint(0, 3)), rnd.choice(RISK_ORDER)) for name in names
    ]


def test_the_pool_votes_and_counts_as_the_pool_sorted_anew():
    rnd = random.Random(32)
    compared = 0
    for _ in range(3000):
        tools = random_pool(rnd)
        pool = VerbPool(tools)
        own = set(rnd.sample(WORDS, rnd.randint(0, 3)))
        name = rnd.choice([tools[0]["name"], rnd.choice(tools)["name"], "ns9.absent"])
        others = [tool for tool in tools if tool["name"] != name]
        assert pool.size_without(name) == len(others)
        if not others:
            continue
        low = pool.risks_without(name)["low"]
        assert (low * 2 > len(others)) == mostly_low(others)
        assert low == sum(tool["risk"] == "low" for tool in others)
        for same_kind in (True, False):
            expected = neighbours_vote(own, others, same_kind=same_kind)
            assert pool.vote_without(own, name, same_kind=same_kind) == expected
        compared += 1
    assert compared > 2000


@pytest.mark.parametrize(
    "tokens",
    [
        [["a"], ["a"], ["a"], ["a"]],  # every likeness equal: the names decide
        [[], [], ["a"]],  # empty word sets have no likeness
        [["a", "b"], ["b"], ["a", "b", "c"], ["c"], ["a", "b"]],  # ties across the third place
    ],
)
def test_ties_are_broken_by_name_then_by_the_order_given(tokens):
    names = ["b.t", "a.t", "b.t", "a.s", "c.t"][: len(tokens)]
    tools = [label(name, words, RISK_ORDER[i % len(RISK_ORDER)]) for i, (name, words) in enumerate(
        zip(names, tokens, strict=True))]  # fmt: skip
    for own in ({"a"}, {"a", "b"}, set()):
        for name in ("a.t", "zz"):
            others = [tool for tool in tools if tool["name"] != name]
            for same_kind in (True, False):
                assert VerbPool(tools).vote_without(own, name, same_kind=same_kind) == (
                    neighbours_vote(own, others, same_kind=same_kind)
                )


def test_a_pool_follows_the_tools_of_its_word_as_they_come_and_go():
    lex = lexicon()

    def get(name, risk):
        return {"name": f"crm.get_{name}", "description": "Get a contact.", "risk": risk}

    def suggested(labelled):
        return suggest_risk(name="crm.get_new", description="Get a contact.", produces=[],
                            permissions=[], labelled=labelled, lex=lex)  # fmt: skip

    labelled = prepare_labels([get(f"z{n}", "low") for n in range(6)], lex)
    index = LabelIndex(labelled)
    assert suggested(index).risk == "low"
    extra = prepare_labels([get(f"a{n}", "high") for n in range(9)], lex)
    for tool in extra:
        index.everything.add(tool)
        index.spaces["crm"].add(tool)
    assert suggested(index).risk == "high"
    assert suggested(index) == suggested(LabelIndex([*labelled, *extra]))
    for tool in extra:
        index.everything.remove(tool)
        index.spaces["crm"].remove(tool)
    assert suggested(index) == suggested(LabelIndex(labelled))
