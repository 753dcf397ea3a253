"""``LabelIndex``: the labels read and indexed once; a suggestion for a labelled tool leaves
the tool's own label out by subtraction, and must say what it says without that label."""

from collections import Counter

import pytest

from learning.risk import LabelIndex, label_read, lexicon, prepare_labels, suggest_risk
from learning.risk._labels import labels_model_without

VERBS = {"find": "low", "get": "low", "list": "low", "summarize": "low", "create": "medium",
         "update": "medium", "share": "high", "delete": "high", "send": "high"}  # fmt: skip


def catalog(size: int) -> list[dict]:
    """Tools ``domainD.verb_N``, each producing its own variable and requiring an earlier one."""
    tools = []
    for number in range(size):
        verb = list(VERBS)[number % len(VERBS)]
        tools.append({
            "name": f"domain{number % 8}.{verb}_{number}",
            "description": f"{verb.capitalize()} thing number {number} of domain {number % 8}.",
            "requires": [f"var_{(number * 7) % size}"], "produces": [f"var_{number}"],
            "risk": VERBS[verb], "permissions": ["read"] if VERBS[verb] == "low" else ["write"],
        })  # fmt: skip
    return tools


WORLD = catalog(120)
# Labels that disagree with the world's verbs, so the neighbours and the model have work.
for number, tool in enumerate(WORLD):
    if number % 7 == 0:
        tool["risk"] = "high" if tool["risk"] == "low" else "low"
# Action words no other label in their namespace has: left out, such a tool is judged by the
# namespace's model, which must then be trained without it.
WORLD += [
    {"name": f"domain1.{verb}_box", "description": f"{verb.title()} a box.", "risk": risk,
     "produces": [], "permissions": ["write"]}
    for verb, risk in [("archive", "high"), ("move", "medium"), ("rename", "low")]
]  # fmt: skip
PREPARED = prepare_labels(WORLD)


def suggestion(tool: dict, labelled) -> tuple:
    found = suggest_risk(
        name=tool["name"], description=tool["description"], produces=tool["produces"],
        permissions=tool["permissions"], labelled=labelled, gated=tool.get("gated", []),
    )  # fmt: skip
    return found.risk, found.confidence, found.evidence


@pytest.mark.parametrize("number", [*range(0, 120, 3), 120, 121, 122])
def test_a_labelled_tool_is_judged_as_if_its_own_label_were_not_there(number):
    index = LabelIndex(PREPARED)
    tool = WORLD[number]
    others = [label for label in PREPARED if label["name"] != tool["name"]]

    assert suggestion(tool, index) == suggestion(tool, LabelIndex(others))


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("domain3.archive_thing", "Archive a thing of domain 3."),  # a verb no label has
        ("domain5.move_thing", "Move a thing."),
        ("solo_tool", "Tweak the settings."),  # no namespace
        ("domain7.get_thing", "Get one thing."),
    ],
)
def test_an_unlabelled_tool_reads_the_same_from_the_index_or_the_list(name, description):
    tool = {"name": name, "description": description, "produces": ["var_3"], "permissions": []}

    assert suggestion(tool, LabelIndex(PREPARED)) == suggestion(tool, WORLD)


def test_the_model_without_a_tool_is_the_model_trained_without_it():
    index = LabelIndex(PREPARED)
    space = index.spaces["domain1"]
    own = index.own(next(iter(space.tools.values()))["name"])
    rest = LabelIndex([label for label in PREPARED if label not in own]).spaces["domain1"]

    without = labels_model_without(space.model, own)
    assert without["counts"] == rest.model["counts"]
    assert without["size"] == rest.model["size"]
    assert without["seen"] == rest.model["seen"]
    for risk, table in rest.model["features"].items():
        assert {f: c for f, c in without["features"][risk].items() if c} == dict(table)


def test_an_index_kept_up_to_date_says_what_one_built_afresh_says():
    """Readings added and removed in steps, as revisions come (an approval replaces a tool's
    label; a tool that requires another's output comes and goes), against an index built at
    once from the final labels."""
    lex = lexicon()
    tools = dict(enumerate(WORLD))
    readings = {number: label_read(tool, lex) for number, tool in tools.items()}
    kept = LabelIndex()
    kept.update(added={n: r for n, r in readings.items() if n < 100}, removed=[])
    # A later version of tool 5 (other words, another label), and tools 100 and up arrive;
    # tool 7 goes. Tool 101 requires what tool 3 produces.
    tools[200] = replaced = {**WORLD[5], "description": "Erase things for good.", "risk": "high"}
    tools[101] = {**WORLD[101], "requires": WORLD[3]["produces"]}
    readings[200], readings[101] = label_read(tools[200], lex), label_read(tools[101], lex)
    kept.update(added={n: readings[n] for n in [200, *range(100, len(WORLD))]}, removed=[5, 7])
    fresh = LabelIndex(prepare_labels([tools[n] for n in sorted(tools) if n not in (5, 7)]))

    assert kept.keys() == {n for n in readings if n not in (5, 7)}
    consumed = {label["name"] for label in kept.everything.tools.values()
                if "o:consumed" in label["features"]}  # fmt: skip
    assert WORLD[3]["name"] in consumed
    assert consumed == {label["name"] for label in fresh.everything.tools.values()
                        if "o:consumed" in label["features"]}  # fmt: skip
    for name in {*fresh.spaces, ""}:
        space, other = kept.spaces.get(name), fresh.spaces.get(name)
        if other is None:
            assert space is None or not space.tools
            continue
        assert space.model["counts"] == other.model["counts"]
        assert space.model["seen"] == other.model["seen"]
        assert space.kinds + Counter() == other.kinds + Counter()
    for tool in [*WORLD[::9], replaced, {"name": "domain2.archive_it", "description": "Archive it.",
                                         "produces": [], "permissions": []}]:  # fmt: skip
        assert suggestion(tool, kept) == suggestion(tool, fresh)
