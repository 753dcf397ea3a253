"""Plan validation against contracts and a planning policy (pure: no database)."""

import copy
import json
import re
import socket
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from api.planning import schema_problems, validate_plan
from registry import jsonschema_re2

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "retrieval_llm.json"


@pytest.fixture(scope="module")
def example():
    return json.loads(EXAMPLE.read_text())


@pytest.fixture
def contracts(example):
    return {tool["name"]: copy.deepcopy(tool) for tool in example["tools"]}


@pytest.fixture
def policy(example):
    (clinical,) = [app for app in example["applications"] if app["name"] == "clinical"]
    return copy.deepcopy(clinical["policy"])


def retrieve(query="statin dosing in kidney disease", **args):
    return {"tool": "retrieval_llm", "args": {"query": query, **args}}


def cite(passage_set_id="ps_1", **args):
    return {"tool": "source_link_retrieval", "args": {"passage_set_id": passage_set_id, **args}}


def check(plan, contracts, policy=None, *, state=None, **kwargs):
    # The example's plans start from a question; test_planning_requires.py walks requires.
    if state is None or isinstance(state, dict):
        state = {"research_question": "statin dosing", **(state or {})}
    return validate_plan(plan=plan, contracts=contracts, policy=policy, state=state, **kwargs)


def found(result):
    """(step, invariant, action) of each violation, in the order returned."""
    return [(v["step"], v["invariant"], v["action"]) for v in result["violations"]]


def tools_of(result):
    return [step["tool"] for step in result["plan"]]


# --- the classic example, one invariant or rule at a time ----------------------------------


def test_it_accepts_a_plan_that_keeps_every_rule(contracts, policy):
    plan = [retrieve(), cite()]

    result = check(plan, contracts, policy)

    assert result["valid"] is True
    assert result["violations"] == []
    assert result["plan"] == plan
    assert result["mandate"] == policy["mandate"]
    assert result["config"] == {"max_sources": 5, "top_k": 8, "library": "clinical-guidelines"}


def test_it_rejects_both_subquestion_id_and_subquestion_ids(contracts):
    step = retrieve(subquestion_id="q1", subquestion_ids=["q2"], web_search=True)

    result = check([step], contracts)

    assert result["valid"] is False
    assert result["violations"] == [
        {
            "step": 0,
            "invariant": "subquestion-id-xor-ids",
            "rule": "A step cannot use both subquestion_id and subquestion_ids.",
            "action": "rejected",
        }
    ]
    assert result["plan"] == [step]


def test_it_accepts_subquestion_id_alone(contracts):
    result = check([retrieve(subquestion_id="q1")], contracts)

    assert result["valid"] is True
    assert result["violations"] == []


@pytest.mark.parametrize("given", [{}, {"web_search": False}, {"web_search": None}])
def test_it_corrects_web_search_for_steps_with_subquestion_ids(contracts, given):
    result = check([retrieve(subquestion_ids=["q1", "q2"], **given)], contracts)

    assert result["valid"] is True
    assert found(result) == [(0, "subquestion-ids-need-web-search", "corrected")]
    assert result["plan"][0]["args"]["web_search"] is True


def test_it_leaves_web_search_alone_without_subquestion_ids(contracts):
    result = check([retrieve(web_search=False)], contracts)

    assert result["violations"] == []
    assert result["plan"][0]["args"]["web_search"] is False


def test_it_drops_the_second_step_with_subquestion_ids(contracts):
    plan = [
        retrieve("first question", subquestion_ids=["q1"], web_search=True),
        retrieve("second question", subquestion_ids=["q2"], web_search=True),
        retrieve("third question", subquestion_id="q3"),
    ]

    result = check(plan, contracts)

    assert result["valid"] is True
    assert found(result) == [(1, "one-multi-subquestion-step", "dropped")]
    assert [step["args"]["query"] for step in result["plan"]] == [
        "first question",
        "third question",
    ]


def test_it_drops_later_duplicate_query_and_web_search_calls(contracts):
    plan = [
        retrieve("statins", web_search=True),
        retrieve("statins", web_search=False),
        retrieve("statins", web_search=True),
        retrieve("statins"),
        retrieve("statins"),
        retrieve("statin", web_search=True),
    ]

    result = check(plan, contracts)

    assert found(result) == [
        (2, "no-duplicate-retrieval", "dropped"),
        (4, "no-duplicate-retrieval", "dropped"),
    ]
    assert [step["args"].get("web_search") for step in result["plan"]] == [True, False, None, True]


def test_it_compares_call_fields_as_json_values():
    contracts = {
        "lookup": {
            "name": "lookup",
            "input_schema": {"type": "object"},
            "invariants": [
                {
                    "id": "once",
                    "rule": "No repeated lookups.",
                    "kind": "unique_calls",
                    "params": {"fields": ["key", "options"]},
                    "action": "drop",
                }
            ],
        }
    }
    plan = [
        {"tool": "lookup", "args": {"key": 1, "options": {"a": 1, "b": [1, 2]}}},
        {"tool": "lookup", "args": {"key": 1.0, "options": {"b": [1, 2], "a": 1}}},  # same
        {"tool": "lookup", "args": {"key": True, "options": {"a": 1, "b": [1, 2]}}},  # differs
        {"tool": "lookup", "args": {"key": None}},
        {"tool": "lookup", "args": {}},  # null and absent are the same
    ]

    result = check(plan, contracts)

    assert found(result) == [(1, "once", "dropped"), (4, "once", "dropped")]


def test_it_rejects_a_medical_plan_without_source_links(contracts, policy):
    result = check([retrieve()], contracts, policy)

    assert result["valid"] is False
    assert result["violations"] == [
        {
            "step": None,
            "invariant": "medical-plans-retrieve-and-cite",
            "rule": policy["rules"][0]["rule"],
            "action": "rejected",
        }
    ]


def test_it_reports_each_missing_tool_of_must_include(contracts, policy):
    result = check([], contracts, policy)

    assert found(result) == [
        (None, "medical-plans-retrieve-and-cite", "rejected"),
        (None, "medical-plans-retrieve-and-cite", "rejected"),
    ]


def test_it_appends_missing_steps_when_must_include_corrects(contracts, policy):
    policy["rules"][0]["action"] = "correct"
    policy["rules"][0]["params"]["args"] = {
        "retrieval_llm": {"query": "unused"},
        "source_link_retrieval": {"passage_set_id": "ps_7", "style": "vancouver"},
    }

    result = check([retrieve()], contracts, policy)

    assert result["valid"] is True
    assert found(result) == [(None, "medical-plans-retrieve-and-cite", "corrected")]
    assert result["plan"][-1] == {
        "tool": "source_link_retrieval",
        "args": {"passage_set_id": "ps_7", "style": "vancouver"},
    }


def test_it_checks_an_appended_step_like_any_other(contracts, policy):
    policy["rules"][0]["action"] = "correct"
    policy["rules"][0]["params"]["args"] = {
        "retrieval_llm": {"query": "unused"},
        "source_link_retrieval": {"passage_set_id": "not-a-passage-set"},
    }

    result = check([retrieve()], contracts, policy)

    assert result["valid"] is False
    assert found(result) == [
        (None, "medical-plans-retrieve-and-cite", "corrected"),
        (None, "input_schema", "rejected"),
    ]
    assert result["violations"][1]["rule"].startswith(
        "the source_link_retrieval step the policy appended: args.passage_set_id: "
    )


@pytest.mark.parametrize(("action", "kept"), [("drop", 2), ("reject", 4)])
def test_it_enforces_max_steps_on_the_tail(contracts, action, kept):
    policy = {
        "rules": [
            {
                "id": "short",
                "rule": "At most two steps.",
                "kind": "max_steps",
                "params": {"max": 2},
                "action": action,
            }
        ]
    }
    plan = [retrieve("a b c"), retrieve("d e f"), cite(), cite("ps_2")]

    result = check(plan, contracts, policy)

    past = "dropped" if action == "drop" else "rejected"
    assert found(result) == [(2, "short", past), (3, "short", past)]
    assert len(result["plan"]) == kept
    assert result["valid"] is (action == "drop")


@pytest.mark.parametrize("action", ["drop", "reject"])
def test_it_enforces_never_after(contracts, action):
    policy = {
        "rules": [
            {
                "id": "cite-after-retrieving",
                "rule": "Never retrieve after looking up source links.",
                "kind": "never_after",
                "params": {"tool": "retrieval_llm", "after": "source_link_retrieval"},
                "action": action,
            }
        ]
    }
    plan = [retrieve("before"), cite(), retrieve("after one"), retrieve("after two")]

    result = check(plan, contracts, policy)

    past = "dropped" if action == "drop" else "rejected"
    assert found(result) == [(2, "cite-after-retrieving", past), (3, "cite-after-retrieving", past)]
    expected = ["retrieval_llm", "source_link_retrieval"]
    assert tools_of(result) == (expected if action == "drop" else [*expected, *expected[:1] * 2])


# --- combinations and the order in which corrections apply ---------------------------------


def test_it_corrects_before_it_rejects_within_a_step(contracts):
    step = retrieve(subquestion_id="q1", subquestion_ids=["q2"])

    result = check([step], contracts)

    assert found(result) == [
        (0, "subquestion-ids-need-web-search", "corrected"),
        (0, "subquestion-id-xor-ids", "rejected"),
    ]
    assert result["plan"][0]["args"]["web_search"] is True


def test_it_applies_corrections_before_dropping_duplicates(contracts):
    # The correction gives step 0 web_search=true, which makes step 1 its duplicate.
    plan = [retrieve("statins", subquestion_ids=["q1"]), retrieve("statins", web_search=True)]

    result = check(plan, contracts)

    assert found(result) == [
        (0, "subquestion-ids-need-web-search", "corrected"),
        (1, "no-duplicate-retrieval", "dropped"),
    ]
    assert len(result["plan"]) == 1


def test_it_applies_plan_wide_invariants_in_declared_order(contracts):
    plan = [
        retrieve("first", subquestion_ids=["q1"]),
        retrieve("second", subquestion_ids=["q2"]),
        retrieve("second", web_search=True),
    ]

    result = check(plan, contracts)

    # max_per_plan (declared first) drops step 1, so step 2 is no longer anyone's duplicate.
    assert found(result) == [
        (0, "subquestion-ids-need-web-search", "corrected"),
        (1, "subquestion-ids-need-web-search", "corrected"),
        (1, "one-multi-subquestion-step", "dropped"),
    ]
    assert [step["args"]["query"] for step in result["plan"]] == ["first", "second"]

    contracts["retrieval_llm"]["invariants"].reverse()
    reordered = check(plan, contracts)

    # unique_calls first: step 2 duplicates step 1, then max_per_plan drops step 1 as well.
    assert [step["args"]["query"] for step in reordered["plan"]] == ["first"]


def test_it_applies_policy_rules_after_invariants_in_declared_order(contracts, policy):
    policy["rules"].insert(
        0,
        {
            "id": "one-step",
            "rule": "Plans have one step.",
            "kind": "max_steps",
            "params": {"max": 1},
            "action": "drop",
        },
    )
    plan = [retrieve("statins"), retrieve("statins"), cite()]

    result = check(plan, contracts, policy)

    # unique_calls drops step 1 first; max_steps then cuts step 2, so must_include (declared
    # after it) finds no source_link_retrieval step left.
    assert found(result) == [
        (1, "no-duplicate-retrieval", "dropped"),
        (2, "one-step", "dropped"),
        (None, "medical-plans-retrieve-and-cite", "rejected"),
    ]
    assert tools_of(result) == ["retrieval_llm"]
    assert result["valid"] is False


def test_it_sorts_violations_by_step_with_plan_wide_ones_last(contracts, policy):
    plan = [
        retrieve("same", subquestion_ids=["q1"]),
        "not a step",
        retrieve("same", subquestion_id="q1", subquestion_ids=["q2"]),
    ]

    result = check(plan, contracts, policy, config={"max_sources": "lots"})

    assert [v["step"] for v in result["violations"]] == [0, 1, 2, 2, 2, None, None]
    assert found(result)[-2:] == [
        (None, "medical-plans-retrieve-and-cite", "rejected"),
        (None, "config_param", "rejected"),
    ]


# --- untrusted plans ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "rule"),
    [
        ("retrieval_llm", "step 0 must be an object with 'tool' and 'args'"),
        (None, "step 0 must be an object with 'tool' and 'args'"),
        ({"args": {}}, "step 0: 'tool' must be a tool name"),
        ({"tool": 7, "args": {}}, "step 0: 'tool' must be a tool name"),
        ({"tool": "retrieval_llm", "args": ["statins"]}, "step 0: 'args' must be an object"),
        ({"tool": "retrieval_llm", "args": None}, "step 0: 'args' must be an object"),
    ],
)
def test_it_rejects_a_malformed_step_without_raising(contracts, step, rule):
    result = check([step, cite()], contracts, state={"passage_set_id": "ps_1"})

    assert result["valid"] is False
    assert result["violations"] == [
        {"step": 0, "invariant": "malformed_step", "rule": rule, "action": "rejected"}
    ]
    assert tools_of(result) == ["source_link_retrieval"]


def test_it_rejects_a_plan_that_is_not_a_list(contracts):
    result = validate_plan(plan={"tool": "retrieval_llm"}, contracts=contracts, policy=None)

    assert found(result) == [(None, "malformed_plan", "rejected")]
    assert result["plan"] == []


def test_it_reads_missing_args_as_empty(contracts):
    result = check([{"tool": "retrieval_llm"}], contracts)

    assert result["plan"] == [{"tool": "retrieval_llm", "args": {}}]
    assert found(result) == [(0, "input_schema", "rejected")]
    assert result["violations"][0]["rule"] == "args: 'query' is a required property"


def test_it_rejects_a_tool_without_a_contract(contracts):
    result = check([{"tool": "payments.charge_card", "args": {"amount": 5}}], contracts)

    assert found(result) == [(0, "unknown_tool", "rejected")]
    assert "'payments.charge_card'" in result["violations"][0]["rule"]


def test_it_reports_schema_errors_with_their_path(contracts):
    step = retrieve(top_k="ten", subquestion_ids=[1], surprise=True)

    result = check([step], contracts)

    rules = [v["rule"] for v in result["violations"] if v["invariant"] == "input_schema"]
    assert rules == [
        "args: Additional properties are not allowed ('surprise' unexpected)",
        "args.subquestion_ids[0]: 1 is not of type 'string'",
        "args.top_k: 'ten' is not of type 'integer'",
    ]


def test_it_keeps_other_step_keys_and_never_changes_the_callers_plan(contracts):
    plan = [{"id": "s1", **retrieve(subquestion_ids=["q1"])}]
    before = copy.deepcopy(plan)

    result = check(plan, contracts)

    assert plan == before
    assert result["plan"][0]["id"] == "s1"
    assert result["plan"][0]["args"]["web_search"] is True


def test_it_rejects_a_malformed_invariant_instead_of_skipping_it(contracts):
    contracts["retrieval_llm"]["invariants"].append(
        {"id": "broken", "rule": "?", "kind": "max_per_plan", "params": {}, "action": "drop"}
    )

    result = check([retrieve("one"), retrieve("two")], contracts)

    assert found(result) == [(0, "broken", "rejected")]
    assert "params.max: must be a whole number" in result["violations"][0]["rule"]


def test_it_rejects_a_malformed_policy_rule_instead_of_skipping_it(contracts):
    policy = {"rules": [{"id": "x", "rule": "r", "kind": "must_include", "params": {}}]}

    result = check([retrieve()], contracts, policy)

    assert found(result) == [(None, "x", "rejected")]


# --- config params ------------------------------------------------------------------------


def test_it_resolves_config_from_request_then_state_then_default(contracts, policy):
    result = check(
        [retrieve(), cite()],
        contracts,
        policy,
        state={"max_sources": "3", "top_k": 20},
        config={"top_k": " 4 ", "library": None},
    )

    assert result["config"] == {"max_sources": 3, "top_k": 4, "library": "clinical-guidelines"}
    assert result["valid"] is True


def test_it_only_resolves_config_of_tools_in_the_plan(contracts, policy):
    result = check([cite()], contracts, policy)

    assert result["config"] == {"max_sources": 5}


def test_it_rejects_a_config_value_naming_its_key(contracts, policy):
    result = check([retrieve(), cite()], contracts, policy, state={"top_k": "plenty"})

    assert result["valid"] is False
    assert result["violations"] == [
        {
            "step": None,
            "invariant": "config_param",
            "rule": "config param 'top_k': state: expected a whole number, got 'plenty'",
            "action": "rejected",
        }
    ]
    assert result["config"]["top_k"] == 8


# --- hostile schemas ------------------------------------------------------------------------


def hostile(schema):
    return {"name": "hostile", "input_schema": schema, "requires": [], "produces": []}


CATASTROPHIC = "(a+)+"


def _refused(*args, **kwargs):
    raise AssertionError("a catastrophic pattern was matched on Python's re")


class _Refusing:
    """What ``re.compile`` gives for a catastrophic pattern: compiling is harmless (checking a
    schema does it), matching is not."""

    search = match = fullmatch = finditer = findall = staticmethod(_refused)


@pytest.fixture
def searches(monkeypatch):
    """The patterns searched on RE2 (linear time), and a backtracking ``re`` that refuses to
    match the catastrophic ones: a check that fell back to it would hang; this one fails."""
    searched = []
    search = jsonschema_re2._search

    def counted(pattern, text):
        searched.append(pattern)
        return search(pattern, text)

    monkeypatch.setattr(jsonschema_re2, "_search", counted)
    for name in ("compile", "search", "match", "fullmatch"):
        original = getattr(re, name)

        def guarded(pattern, *args, _name=name, _original=original, **kwargs):
            if CATASTROPHIC in str(pattern):
                return _Refusing() if _name == "compile" else _refused()
            return _original(pattern, *args, **kwargs)

        monkeypatch.setattr(re, name, guarded)
    return searched


def test_it_runs_a_catastrophic_pattern_in_linear_time(searches):
    contracts = {
        "hostile": hostile(
            {"type": "object", "properties": {"q": {"type": "string", "pattern": "(a+)+$"}}}
        )
    }

    result = check([{"tool": "hostile", "args": {"q": "a" * 50_000 + "!"}}], contracts)

    assert searches == ["(a+)+$"]  # once, on RE2
    assert found(result) == [(0, "input_schema", "rejected")]
    assert "does not match '(a+)+$'" in result["violations"][0]["rule"]
    assert len(result["violations"][0]["rule"]) <= 300


def test_it_runs_catastrophic_property_name_patterns_in_linear_time(searches):
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
        "unevaluatedProperties": False,
    }

    problems = schema_problems(schema, {"a" * 30_000 + "!": 1})

    assert searches and set(searches) == {"^(a+)+$"}  # on RE2 only
    assert problems and problems[0].startswith("args: Additional properties are not allowed")


def test_it_rejects_a_pattern_the_linear_engine_cannot_run():
    contracts = {"hostile": hostile({"type": "object", "properties": {"q": {"pattern": "(a)\\1"}}})}

    result = check([{"tool": "hostile", "args": {"q": "aa"}}], contracts)

    assert found(result) == [(0, "input_schema", "rejected")]
    assert "cannot run" in result["violations"][0]["rule"]


@pytest.fixture
def no_network(monkeypatch):
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError("a schema reference made a network call")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


@pytest.mark.parametrize(
    "ref",
    [
        "https://schemas.example.com/retrieval.json",
        "http://169.254.169.254/latest/meta-data",
        "file:///etc/passwd",
        "other.json",
        "#/$defs/missing",
    ],
)
def test_it_never_fetches_a_reference_outside_the_schema(no_network, ref):
    contracts = {
        "hostile": hostile({"type": "object", "properties": {"q": {"$ref": ref}}}),
    }

    result = check([{"tool": "hostile", "args": {"q": "x"}}], contracts)

    assert no_network == []
    assert found(result) == [(0, "input_schema", "rejected")]
    assert "does not resolve inside the schema" in result["violations"][0]["rule"]


def test_it_follows_references_inside_the_schema(no_network):
    schema = {
        "type": "object",
        "$defs": {"query": {"type": "string", "minLength": 3}},
        "properties": {"q": {"$ref": "#/$defs/query"}},
    }

    assert schema_problems(schema, {"q": "statins"}) == []
    assert schema_problems(schema, {"q": "x"}) == ["args.q: 'x' is too short"]


def test_it_stops_a_schema_that_refers_to_itself_without_end():
    contracts = {"hostile": hostile({"$ref": "#"})}

    result = check([{"tool": "hostile", "args": {}}], contracts)

    assert found(result) == [(0, "input_schema", "rejected")]
    assert result["violations"][0]["rule"] == "the tool's input schema refers to itself without end"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "objectish"}, "the tool's input schema is invalid at type"),
        ("a string", "the tool's input schema is not a JSON Schema object"),
        ({"type": "object", "minimum": float("nan")}, "the tool's input schema is not a JSON"),
    ],
)
def test_it_reports_an_unusable_schema_instead_of_raising(schema, message):
    result = check([{"tool": "hostile", "args": {}}], {"hostile": hostile(schema)})

    assert found(result) == [(0, "input_schema", "rejected")]
    assert result["violations"][0]["rule"].startswith(message)


def test_it_caps_the_number_of_schema_errors_per_step():
    schema = {"type": "object", "properties": {"ids": {"items": {"type": "integer"}}}}

    problems = schema_problems(schema, {"ids": ["x"] * 500})

    assert len(problems) == 21
    assert problems[-1] == "args: more errors not shown"


def test_it_checks_unique_items_in_linear_time(monkeypatch):
    schema = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}
    rows = [{"id": number} for number in range(30_000)]
    texts = Counter()
    canonical_json = jsonschema_re2.canonical_json

    def counted(value):
        texts["made"] += 1
        return canonical_json(value)

    monkeypatch.setattr(jsonschema_re2, "canonical_json", counted)

    distinct = schema_problems(schema, {"rows": rows})
    repeated = schema_problems(schema, {"rows": [*rows, {"id": 7.0}]})

    # One text per item, in one pass: 450 million comparisons pair by pair.
    assert texts["made"] == 30_000 + 30_001
    assert distinct == []
    assert len(repeated) == 1 and repeated[0].endswith("has non-unique elements")


@pytest.mark.parametrize(
    ("items", "unique"),
    [([1, 1.0], False), ([1, True], True), ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False)],
)
def test_it_compares_unique_items_as_json_values(items, unique):
    schema = {"type": "object", "properties": {"rows": {"uniqueItems": True}}}

    assert (schema_problems(schema, {"rows": items}) == []) is unique


def test_it_rejects_arguments_nested_deep_enough_to_exhaust_recursion(contracts):
    nested = "bottom"
    for _ in range(5_000):
        nested = [nested]

    result = check([retrieve(query=nested), cite()], contracts, state={"passage_set_id": "p"})

    assert found(result) == [(0, "malformed_step", "rejected")]
    assert result["violations"][0]["rule"] == "step 0 nests deeper than 64 levels"
    assert tools_of(result) == ["source_link_retrieval"]


def test_it_keeps_the_meaning_of_property_keywords_under_the_linear_engine():
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "patternProperties": {"^filter_[a-z]+$": {"type": "string"}},
        "allOf": [{"patternProperties": {"^opt_": {"type": "boolean"}}}],
        "unevaluatedProperties": False,
    }

    assert schema_problems(schema, {"query": "q", "filter_year": "2024", "opt_x": True}) == []
    assert schema_problems(schema, {"filter_year": 2024}) == [
        "args.filter_year: 2024 is not of type 'string'"
    ]
    assert schema_problems(schema, {"filter_2024": "x"}) == [
        "args: Unevaluated properties are not allowed ('filter_2024' was unexpected)"
    ]


def test_it_rejects_a_malformed_policy_state_or_config_without_raising(contracts):
    result = validate_plan(
        plan=[retrieve()], contracts=contracts, policy=["rules"], state="s", config=[1]
    )

    assert found(result) == [
        (0, "unmet_requires", "rejected"),  # a state that cannot be read holds nothing
        (None, "malformed_request", "rejected"),
        (None, "malformed_request", "rejected"),
        (None, "malformed_policy", "rejected"),
    ]
    assert result["mandate"] == ""
    assert result["config"] == {"top_k": 8, "library": "clinical-guidelines"}
