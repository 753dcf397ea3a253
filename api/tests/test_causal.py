"""Causal minimal tool filtering (pure: no database)."""

import random
from collections import Counter, deque

import pytest

from api.causal import FilterResult, ProducerIndex, filter_tools
from benchmarks.contract2tool_filter import paper_cmtf, run_filter_benchmark
from benchmarks.filter_speed import queries, synthetic_registry
from registry.risk_order import DEFAULT_RISK_RANK


def tool(name, requires=(), produces=(), risk="low", latency=None):
    document = {"name": name, "requires": list(requires), "produces": list(produces), "risk": risk}
    if latency is not None:
        document["cost"] = {"latency_ms_p50": latency, "latency_ms_p95": latency * 3}
    return document


# A slice of the paper's registry, in its order (cost as the benchmark gives it: 1-3).
CALENDAR = [
    {**tool("search_events", ["date", "event_description"], ["event_id"]), "cost": 1},
    {**tool("read_event", ["event_id"], ["event_details"]), "cost": 1},
    {**tool("update_event", ["event_id", "new_time"], ["event_updated"], "high"), "cost": 2},
    {**tool("delete_event", ["event_id"], ["event_deleted"], "high"), "cost": 3},
    {
        **tool("invite_attendee", ["event_id", "attendee"], ["attendee_invited"], "medium"),
        "cost": 2,
    },
    {**tool("find_event_by_attendee", ["attendee"], ["event_id"]), "cost": 1},
    {**tool("summarize_event", ["event_details"], ["event_summary"]), "cost": 1},
    {**tool("search_emails", ["sender", "topic"], ["message_id"]), "cost": 1},
    {**tool("search_email_ids", ["sender", "topic"], ["message_id"]), "cost": 1},
    {**tool("read_email", ["message_id"], ["email_body"], "medium"), "cost": 1},
]


def run(documents, state, goal, **options):
    index = ProducerIndex(documents, risk_rank=DEFAULT_RISK_RANK)
    return filter_tools(index, state=set(state), goal=set(goal), **options)


def assert_runs(documents, state, goal, plan):
    """Every step's requires hold when it runs, and the plan ends at the goal."""
    by_name = {document["name"]: document for document in documents}
    known = set(state)
    for name in plan:
        assert set(by_name[name]["requires"]) <= known, f"{name} runs before its requires"
        known |= set(by_name[name]["produces"])
    assert set(goal) <= known


# --- where the paper's CMTF has an answer, the same one ----------------------------------


@pytest.mark.parametrize(
    ("state", "goal", "shown", "plan"),
    [
        (
            {"date", "event_description", "new_time"},
            {"event_updated"},
            ["search_events"],
            ["search_events", "update_event"],
        ),
        (
            {"date", "event_description", "new_time", "event_id"},
            {"event_updated"},
            ["update_event"],
            ["update_event"],
        ),
        (
            {"date", "event_description"},
            {"event_summary"},
            ["search_events"],
            ["search_events", "read_event", "summarize_event"],
        ),
        (
            # find_event_by_attendee is applicable too, and as cheap: registered first wins.
            {"attendee", "date", "event_description"},
            {"attendee_invited"},
            ["search_events"],
            ["search_events", "invite_attendee"],
        ),
        ({"attendee"}, {"event_details"}, ["find_event_by_attendee"], None),
        ({"sender", "topic"}, {"email_body"}, ["search_emails"], ["search_emails", "read_email"]),
    ],
)
def test_it_shows_what_the_papers_cmtf_shows(state, goal, shown, plan):
    result = run(CALENDAR, state, goal)

    assert result.tools == shown
    assert result.tools == paper_cmtf(CALENDAR, state=set(state), goal=set(goal))
    if plan is not None:
        assert result.plan == plan
    assert_runs(CALENDAR, state, goal, result.plan)
    assert result.unreachable == []


def test_it_exposes_exactly_the_gold_tool_at_every_benchmark_step():
    result = run_filter_benchmark()

    assert result["gold_steps"] == 283
    assert result["causal_filter"]["gold_exposure_rate"] == 1.0
    assert result["causal_filter"]["mean_visible_tools"] == 1.0
    assert result["causal_filter"]["no_visible_steps"] == 0
    assert result["same_tools_shown"] == 283


# --- where CMTF is blind ----------------------------------------------------------------


def test_it_exposes_the_first_step_of_every_independent_branch():
    documents = [
        tool("lookup_flight", ["trip"], ["flight_id"]),
        tool("book_flight", ["flight_id"], ["flight_booked"]),
        tool("lookup_hotel", ["trip"], ["hotel_id"]),
        tool("book_hotel", ["hotel_id"], ["hotel_booked"]),
        tool("unrelated", ["trip"], ["weather"]),
    ]
    goal = {"flight_booked", "hotel_booked"}

    result = run(documents, {"trip"}, goal)

    assert result.tools == ["lookup_flight", "lookup_hotel"]
    assert result.plan == ["lookup_flight", "book_flight", "lookup_hotel", "book_hotel"]
    assert paper_cmtf(documents, state={"trip"}, goal=goal) == ["lookup_flight"]


def test_it_prefers_the_safer_of_two_equally_short_routes():
    documents = [
        tool("wipe_and_rebuild", ["doc"], ["doc_clean"], risk="high"),
        tool("lint", ["doc"], ["doc_clean"], risk="low"),
    ]

    result = run(documents, {"doc"}, {"doc_clean"})

    assert result.tools == ["lint"]
    # CMTF is blind to risk: the first registered tool wins.
    assert paper_cmtf(documents, state={"doc"}, goal={"doc_clean"}) == ["wipe_and_rebuild"]


def test_it_breaks_ties_on_risk_then_latency_then_registry_order():
    def route(prefix, risk, latency):
        return [
            tool(f"{prefix}_start", ["q"], [f"{prefix}_mid"], risk, latency),
            tool(f"{prefix}_finish", [f"{prefix}_mid"], ["answer"], "low", 100),
        ]

    slow = route("slow", "low", 900)
    fast = route("fast", "low", 100)
    risky = route("risky", "medium", 10)
    same = route("same", "low", 100)

    assert run([*risky, *slow, *fast], {"q"}, {"answer"}).tools == ["fast_start"]
    assert run([*risky, *slow], {"q"}, {"answer"}).tools == ["slow_start"]
    assert run([*same, *fast], {"q"}, {"answer"}).tools == ["same_start"]
    assert run([*fast, *same], {"q"}, {"answer"}).tools == ["fast_start"]


def test_it_answers_the_same_whatever_order_the_sets_come_in():
    goal = ["attendee_invited", "event_summary", "message_id"]
    state = ["date", "event_description", "attendee", "sender", "topic"]
    answers = set()
    for seed in range(20):
        random.Random(seed).shuffle(goal)
        random.Random(seed + 1).shuffle(state)
        answers.add(repr(run(CALENDAR, list(state), list(goal))))

    assert len(answers) == 1


def test_it_prefers_one_tool_producing_both_goals_over_two():
    documents = [
        tool("get_title", ["doc_id"], ["title"]),
        tool("get_author", ["doc_id"], ["author"]),
        tool("get_metadata", ["doc_id"], ["author", "title"]),
    ]

    result = run(documents, {"doc_id"}, {"title", "author"})

    assert result.tools == ["get_metadata"]
    assert result.plan == ["get_metadata"]


def test_it_names_the_variables_nothing_produces_when_the_goal_is_unreachable():
    result = run(CALENDAR, {"date", "event_description"}, {"event_updated"})

    assert result == FilterResult(tools=[], plan=[], unreachable=["new_time"])


def test_it_names_every_missing_input_on_every_route():
    result = run(CALENDAR, set(), {"event_details"})

    # event_id comes from search_events (date, event_description) or by attendee.
    assert result.unreachable == ["attendee", "date", "event_description"]
    assert result.tools == []


def test_it_names_a_goal_no_tool_produces():
    result = run(CALENDAR, {"date", "event_description"}, {"event_id", "teleported"})

    assert result == FilterResult(tools=[], plan=[], unreachable=["teleported"])


def test_it_names_the_goal_when_only_a_cycle_blocks_it():
    documents = [tool("a", ["x"], ["y"]), tool("b", ["y"], ["x"]), tool("c", ["y"], ["goal"])]

    result = run(documents, set(), {"goal"})

    assert result == FilterResult(tools=[], plan=[], unreachable=["goal"])


def test_it_shows_nothing_when_the_goal_is_already_met():
    result = run(CALENDAR, {"event_id", "new_time", "event_updated"}, {"event_updated"})

    assert result == FilterResult(tools=[], plan=[], unreachable=[])


def test_it_finds_its_way_through_cycles_in_the_tool_graph():
    documents = [
        tool("to_pdf", ["docx"], ["pdf"]),
        tool("to_docx", ["pdf"], ["docx"]),
        tool("ocr", ["pdf"], ["text"]),
        tool("summarize", ["text"], ["summary"]),
    ]

    result = run(documents, {"docx"}, {"summary"})

    assert result.tools == ["to_pdf"]
    assert result.plan == ["to_pdf", "ocr", "summarize"]


# --- near-duplicates --------------------------------------------------------------------


def test_it_shows_one_of_several_near_duplicates():
    result = run(CALENDAR, {"sender", "topic"}, {"message_id"})

    assert result.tools == ["search_emails"]


def test_it_shows_near_duplicates_when_alternatives_are_asked_for():
    result = run(CALENDAR, {"sender", "topic"}, {"message_id"}, alternatives=True)

    assert result.tools == ["search_emails", "search_email_ids"]
    assert result.plan == ["search_emails"]


def test_it_counts_near_duplicates_by_identical_produces_and_met_requires():
    state = {"attendee", "date", "event_description"}

    with_alternatives = run(CALENDAR, state, {"event_id"}, alternatives=True)
    fewer_inputs = run(CALENDAR, {"attendee"}, {"event_id"}, alternatives=True)

    assert with_alternatives.tools == ["search_events", "find_event_by_attendee"]
    # search_events needs inputs the state lacks: not an alternative here.
    assert fewer_inputs.tools == ["find_event_by_attendee"]


def test_it_picks_the_lowest_risk_then_fastest_near_duplicate():
    documents = [
        tool("search_v1", ["q"], ["hits"], "medium", 10),
        tool("search_v2", ["q"], ["hits"], "low", 500),
        tool("search_v3", ["q"], ["hits"], "low", 50),
        tool("search_v4", ["q"], ["hits"], "low", 50),
    ]

    assert run(documents, {"q"}, {"hits"}).tools == ["search_v3"]
    assert run(documents, {"q"}, {"hits"}, alternatives=True).tools == [
        "search_v3",
        "search_v4",
        "search_v2",
        "search_v1",
    ]


def test_it_caps_the_tools_shown_but_not_the_plan():
    result = run(CALENDAR, {"sender", "topic"}, {"message_id"}, alternatives=True, max_tools=1)

    assert result.tools == ["search_emails"]
    assert result.plan == ["search_emails"]
    with pytest.raises(ValueError, match="max_tools"):
        run(CALENDAR, set(), {"x"}, max_tools=0)


def test_it_ranks_an_unknown_risk_label_above_known_ones():
    documents = [tool("mystery", ["q"], ["hits"], "catastrophic"), tool("known", ["q"], ["hits"])]

    assert run(documents, {"q"}, {"hits"}).tools == ["known"]


# --- the index ------------------------------------------------------------------------------


def test_it_refuses_a_registry_that_lists_a_tool_twice():
    with pytest.raises(ValueError, match="'search_events' is listed twice"):
        ProducerIndex([CALENDAR[0], CALENDAR[0]], risk_rank=DEFAULT_RISK_RANK)


def test_it_refuses_requires_that_are_not_a_list_of_names():
    with pytest.raises(ValueError, match="requires must be a list of variable names"):
        ProducerIndex(
            [{"name": "t", "requires": "date", "produces": []}], risk_rank=DEFAULT_RISK_RANK
        )


def test_it_serves_many_queries_from_one_index_without_changing_it():
    index = ProducerIndex(CALENDAR, risk_rank=DEFAULT_RISK_RANK)
    before = (list(index.requires), dict(index.producers), dict(index.consumers))

    first = filter_tools(index, state={"date", "event_description"}, goal={"event_summary"})
    filter_tools(index, state={"attendee"}, goal={"attendee_invited"})
    again = filter_tools(index, state={"date", "event_description"}, goal={"event_summary"})

    assert first == again
    assert (list(index.requires), dict(index.producers), dict(index.consumers)) == before


# --- against exhaustive search on small random registries ----------------------------------


def shortest_plan_length(documents, state, goal):
    start = frozenset(state)
    queue, seen = deque([(start, 0)]), {start}
    while queue:
        known, steps = queue.popleft()
        if goal <= known:
            return steps
        for document in documents:
            if set(document["requires"]) <= known:
                after = known | frozenset(document["produces"])
                if after not in seen:
                    seen.add(after)
                    queue.append((after, steps + 1))
    return None


def test_it_finds_a_valid_plan_exactly_when_one_exists_and_almost_always_a_shortest():
    rng = random.Random(2606)
    reachable = shortest = 0
    for case in range(400):
        variables = [f"v{i}" for i in range(rng.randint(3, 8))]
        documents = [
            tool(
                f"t{case}_{i}",
                rng.sample(variables, rng.randint(0, 2)),
                rng.sample(variables, rng.randint(1, 2)),
                rng.choice(["low", "medium"]),
            )
            for i in range(rng.randint(2, 8))
        ]
        state = set(rng.sample(variables, rng.randint(0, 2)))
        goal = set(rng.sample(variables, rng.randint(1, 2)))

        result = run(documents, state, goal)
        optimum = shortest_plan_length(documents, state, goal)

        if optimum is None:
            assert result.plan == [] and result.unreachable
            continue
        assert_runs(documents, state, goal, result.plan)
        assert set(result.tools) == {
            name
            for name in result.plan
            if set(next(d for d in documents if d["name"] == name)["requires"]) <= state
        }
        if optimum:
            reachable += 1
            shortest += len(result.plan) == optimum

    assert reachable > 150
    assert shortest / reachable > 0.97


def counted_reads(index: ProducerIndex) -> Counter:
    """Counts every read of the index's per-tool lists and per-variable maps from now on: the
    work a query does, whatever the machine's speed (``benchmarks/filter_speed.py`` times it)."""
    reads: Counter = Counter()

    class Tools(list):
        def __getitem__(self, item):
            reads["tool"] += 1
            return super().__getitem__(item)

        def __iter__(self):
            reads["tool"] += len(self)
            return super().__iter__()

    class Variables(dict):
        def get(self, key, default=None):
            reads["variable"] += 1
            return super().get(key, default)

        def __getitem__(self, key):
            reads["variable"] += 1
            return super().__getitem__(key)

        def __iter__(self):
            reads["variable"] += len(self)
            return super().__iter__()

    for name in ("names", "requires", "produces", "risk", "latency"):
        setattr(index, name, Tools(getattr(index, name)))
    for name in ("producers", "consumers", "same_produces"):
        setattr(index, name, Variables(getattr(index, name)))
    return reads


def test_its_work_per_query_is_linear_in_the_registry():
    documents = synthetic_registry(1000)
    index = ProducerIndex(documents, risk_rank=DEFAULT_RISK_RANK)
    # One unit per tool, requires and produces: what one pass over the whole index reads.
    size = sum(1 + len(d["requires"]) + len(d["produces"]) for d in documents)
    reads = counted_reads(index)
    for state, goal in queries(60):
        before = reads.total()
        filter_tools(index, state=state, goal=goal)
        # The regression reaches most of this registry; each tool it reaches is read a few
        # times (about 1.4 passes at most, measured), never once per pair of tools.
        assert reads.total() - before <= 2 * size


def test_tools_that_cannot_help_cost_a_query_nothing():
    documents = synthetic_registry(1000)
    # Nine unrelated tools before each of the 1,000, chained among themselves.
    crowded = []
    for number, document in enumerate(documents):
        chain = range(9 * number, 9 * number + 9)
        crowded += [tool(f"other_{n:05d}", [f"u{n}"], [f"u{n + 1}"]) for n in chain]
        crowded.append(document)
    small = ProducerIndex(documents, risk_rank=DEFAULT_RISK_RANK)
    large = ProducerIndex(crowded, risk_rank=DEFAULT_RISK_RANK)
    assert len(large) == 10 * len(small)
    small_reads, large_reads = counted_reads(small), counted_reads(large)
    for state, goal in queries(60):
        assert filter_tools(large, state=state, goal=goal) == filter_tools(
            small, state=state, goal=goal
        )
    assert large_reads == small_reads
