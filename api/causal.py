"""Causal minimal tool filtering: show a runtime only the tools that move its state to the goal.

Semantics are STRIPS-style and delete-free: a tool is *applicable* when every variable in its
``requires`` is in the state, and calling it adds its ``produces``. ``filter_tools`` answers
"which tools should the model see now?" with the applicable tools that start one cheapest plan
from the state to the goal, and that plan.

Cost model
----------
A plan is compared by, in order: its number of steps (each step is an LLM round trip, which
dominates both tokens and time), then the sum of its tools' risk ranks (between equally short
plans, the safer one), then the sum of their latency (``cost.latency_ms_p50``, else
``latency_ms_p95``; a bare number, as in the benchmark registry, is taken as is; missing is 0),
then the registry position of its earliest first step, then of the tool itself. An unknown risk
label ranks above every known one. The same order picks among near-duplicates (applicable tools
with identical ``produces``): lowest risk rank, then lowest latency, then registered first.

Algorithm
---------
Finding a cheapest delete-free plan exactly is NP-hard (the paper's CMTF runs a breadth-first
search over sets of known variables, exponential in the plan's width), so this module uses a
relaxed planning graph, in three passes:

1. regression: the tools that could contribute to the goal, walking back from the goal through
   producers (tools that cannot matter are never looked at again);
2. a Dijkstra over variables on those tools (Knuth's generalisation to tools with several
   ``requires``): a tool's label is its step cost plus the labels of the preconditions the
   state lacks (the additive heuristic), and a variable's label is that of its cheapest
   producer;
3. extraction: from the goal back to the state, a producer for each missing variable (most
   expensive variable first; a producer that also provides other open variables wins, so one
   call replaces two), then removal of any step the rest of the plan does not need, then the
   call order (earliest-registered runnable step first).

The plan is exact when the needed variables come from separate chains, which is what the
benchmark and most registries look like; when branches share an intermediate variable the
additive costs count it twice, so a plan can be a step longer than the shortest (never
invalid: every step's ``requires`` are met when it runs). On the paper's benchmark the answer
equals CMTF's at every gold step; it also answers where CMTF is blind: two independent branches
expose the first step of each (CMTF shows one), ties break on risk before registry position,
and an unreachable goal names the variables nothing produces. Cycles in the tool graph are
harmless (a variable is settled once).

A ``ProducerIndex`` is built once per registry revision and shared between requests; it is
never modified after construction.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# (steps, risk rank sum, latency sum, registry position of the earliest first step, tool)
Label = tuple[int, int, float, int, int]


@dataclass(frozen=True)
class FilterResult:
    tools: list[str]  # the tools to show now, in plan order (alternatives after their peer)
    plan: list[str]  # one cheapest plan from the state to the goal, in call order
    unreachable: list[str]  # when there is no plan: the variables nothing can provide


class ProducerIndex:
    """Who produces and who requires each variable, with each tool's step cost, by position.

    ``documents`` are contract documents (``name``, ``requires``, ``produces``, ``risk``, and
    optionally ``cost``) in registry order: the order breaks the last ties.
    """

    def __init__(self, documents: Iterable[Mapping[str, Any]], *, risk_rank: Mapping[str, int]):
        unknown_rank = max(risk_rank.values(), default=0) + 1
        self.names: list[str] = []
        self.requires: list[tuple[str, ...]] = []
        self.produces: list[tuple[str, ...]] = []
        self.risk: list[int] = []
        self.latency: list[float] = []
        self.position: dict[str, int] = {}
        producers: dict[str, list[int]] = {}
        consumers: dict[str, list[int]] = {}
        same_produces: dict[frozenset[str], list[int]] = {}
        for tool, document in enumerate(documents):
            name = document.get("name")
            if not isinstance(name, str):
                raise ValueError(f"tool #{tool}: name must be text")
            if name in self.position:
                raise ValueError(f"tool {name!r} is listed twice")
            requires = _variables(document.get("requires"), name, "requires")
            produces = _variables(document.get("produces"), name, "produces")
            self.position[name] = tool
            self.names.append(name)
            self.requires.append(requires)
            self.produces.append(produces)
            risk = document.get("risk")
            rank = risk_rank.get(risk) if isinstance(risk, str) else None
            # An unknown or missing label is treated as riskier than any known one.
            self.risk.append(unknown_rank if rank is None else rank)
            self.latency.append(_latency(document.get("cost")))
            for variable in produces:
                producers.setdefault(variable, []).append(tool)
            for variable in requires:
                consumers.setdefault(variable, []).append(tool)
            if produces:
                same_produces.setdefault(frozenset(produces), []).append(tool)
        self.producers: dict[str, tuple[int, ...]] = {v: tuple(t) for v, t in producers.items()}
        self.consumers: dict[str, tuple[int, ...]] = {v: tuple(t) for v, t in consumers.items()}
        self.same_produces: dict[frozenset[str], tuple[int, ...]] = {
            effect: tuple(tools) for effect, tools in same_produces.items() if len(tools) > 1
        }

    def __len__(self) -> int:
        return len(self.names)

    def applicable(self, tool: int, state: set[str] | frozenset[str]) -> bool:
        return all(variable in state for variable in self.requires[tool])


def filter_tools(
    index: ProducerIndex,
    *,
    state: set[str],
    goal: set[str],
    max_tools: int | None = None,
    alternatives: bool = False,
) -> FilterResult:
    """The applicable tools that start one cheapest plan from ``state`` to ``goal``.

    With ``alternatives``, each shown tool is followed by its applicable near-duplicates
    (identical ``produces``), best first. ``max_tools`` caps the list (the plan is unchanged).
    A goal already met gives nothing to show; an unreachable goal gives no tools and lists in
    ``unreachable`` the variables on the way to it that no tool produces (or, when only a cycle
    blocks it, the goal variables themselves).
    """
    if max_tools is not None and max_tools < 1:
        raise ValueError("max_tools must be at least 1")
    known = frozenset(state)
    missing_goals = sorted(set(goal) - known)
    if not missing_goals:
        return FilterResult(tools=[], plan=[], unreachable=[])

    waiting = _relevant_tools(index, missing_goals, known)
    labels, tool_labels = _cheapest_labels(index, waiting, known, missing_goals)
    unreached = [variable for variable in missing_goals if variable not in labels]
    if unreached:
        return FilterResult(
            tools=[], plan=[], unreachable=_unprovided(index, unreached, known, labels)
        )

    chosen = _extract_plan(index, missing_goals, known, labels, tool_labels)
    chosen = _without_redundant_steps(index, chosen, known, missing_goals)
    plan, _ = _schedule(index, chosen, known)

    shown: list[int] = []
    for tool in plan:
        if not index.applicable(tool, known):
            continue
        shown.append(tool)
        if alternatives:
            shown.extend(_near_duplicates(index, tool, known))
    shown = list(dict.fromkeys(shown))
    if max_tools is not None:
        shown = shown[:max_tools]
    return FilterResult(
        tools=[index.names[tool] for tool in shown],
        plan=[index.names[tool] for tool in plan],
        unreachable=[],
    )


def _relevant_tools(
    index: ProducerIndex, goals: list[str], known: frozenset[str]
) -> dict[int, int]:
    """The tools that could help: producers of a goal or of a relevant tool's missing requires.

    Each is mapped to how many of its ``requires`` the state lacks (the Dijkstra counts them
    down), so this one walk is all the per-query setup there is.
    """
    producers, requires = index.producers, index.requires
    waiting: dict[int, int] = {}
    seen = set(goals)
    pending = list(goals)
    while pending:
        for tool in producers.get(pending.pop(), ()):
            if tool in waiting:
                continue
            missing = 0
            for required in requires[tool]:
                if required not in known:
                    missing += 1
                    if required not in seen:
                        seen.add(required)
                        pending.append(required)
            waiting[tool] = missing
    return waiting


def _cheapest_labels(
    index: ProducerIndex, waiting: dict[int, int], known: frozenset[str], goals: list[str]
) -> tuple[dict[str, Label], dict[int, Label]]:
    """Dijkstra over variables: the cost of each reachable variable, and of each usable tool.

    A variable's label is the label of its cheapest producer; a tool's label is its own step
    cost plus the labels of the preconditions the state lacks.

    ``waiting`` (relevant tool -> unsettled requires) is counted down in place: a tool's label
    is computed once, when its last precondition settles, and every precondition costs less
    than what the tool produces, so settling in label order is final.
    """
    requires, produces, risk, latency = index.requires, index.produces, index.risk, index.latency
    consumers = index.consumers
    no_first_step = len(index.names)
    queue: list[tuple[Label, str, int]] = []
    tool_labels: dict[int, Label] = {}
    for tool, unsettled in waiting.items():
        if not unsettled:
            label = tool_labels[tool] = (1, risk[tool], latency[tool], tool, tool)
            queue.extend((label, variable, tool) for variable in produces[tool])
    heapq.heapify(queue)

    labels: dict[str, Label] = {}
    goals_left = set(goals)
    while queue:
        label, variable, _ = heapq.heappop(queue)
        if variable in labels or variable in known:
            continue
        labels[variable] = label
        if variable in goals_left:
            goals_left.discard(variable)
            if not goals_left:
                # Everything extraction will look at is settled: preconditions cost less.
                break
        for consumer in consumers.get(variable, ()):
            missing = waiting.get(consumer)
            if missing is None:  # not relevant to this goal
                continue
            if missing > 1:
                waiting[consumer] = missing - 1
                continue
            waiting[consumer] = 0
            steps, risk_sum, latency_sum = 1, risk[consumer], latency[consumer]
            first = no_first_step
            for required in requires[consumer]:
                if required in known:
                    continue
                cost = labels[required]
                steps += cost[0]
                risk_sum += cost[1]
                latency_sum += cost[2]
                if cost[3] < first:
                    first = cost[3]
            consumer_label = tool_labels[consumer] = (steps, risk_sum, latency_sum, first, consumer)
            for produced in produces[consumer]:
                if produced not in labels and produced not in known:
                    heapq.heappush(queue, (consumer_label, produced, consumer))
    return labels, tool_labels


def _extract_plan(
    index: ProducerIndex,
    goals: list[str],
    known: frozenset[str],
    labels: dict[str, Label],
    tool_labels: dict[int, Label],
) -> set[int]:
    """Pick a producer for each missing variable, from the goal back to the state.

    A variable may be provided by any labelled producer whose step count does not exceed the
    variable's own: every precondition of such a tool then costs strictly fewer steps, so the
    chosen tools never depend on each other in a cycle. Among those producers, the one that
    also provides the most still-open variables wins (one call instead of two), then the
    cheapest label. Variables are handled most expensive first, so the tools that cover several
    of them are met before the cheap single producers.
    """
    chosen: set[int] = set()
    provided_steps: dict[str, int] = {}  # variable -> fewest steps of a chosen tool providing it
    open_variables: set[str] = set(goals)
    agenda = [(_descending(labels[variable]), variable) for variable in goals]
    heapq.heapify(agenda)

    def provided(variable: str) -> bool:
        return provided_steps.get(variable, labels[variable][0] + 1) <= labels[variable][0]

    def also_covers(tool: int, variable: str) -> int:
        steps = tool_labels[tool][0]
        return sum(
            1
            for other in index.produces[tool]
            if other != variable
            and other in open_variables
            and not provided(other)
            and steps <= labels[other][0]
        )

    while agenda:
        _, variable = heapq.heappop(agenda)
        open_variables.discard(variable)
        if provided(variable):
            continue
        budget = labels[variable][0]
        candidates = [
            tool
            for tool in index.producers[variable]
            if tool in tool_labels and tool_labels[tool][0] <= budget
        ]
        tool = min(candidates, key=lambda t: (-also_covers(t, variable), tool_labels[t]))
        chosen.add(tool)
        steps = tool_labels[tool][0]
        for produced in index.produces[tool]:
            if produced not in known and steps < provided_steps.get(produced, steps + 1):
                provided_steps[produced] = steps
        for required in index.requires[tool]:
            if required not in known and required not in open_variables and not provided(required):
                open_variables.add(required)
                heapq.heappush(agenda, (_descending(labels[required]), required))
    return chosen


def _descending(label: Label) -> tuple[float, ...]:
    return tuple(-part for part in label)


def _without_redundant_steps(
    index: ProducerIndex, chosen: set[int], known: frozenset[str], goals: list[str]
) -> set[int]:
    """Remove steps the rest of the plan does not need, one at a time, until none is left.

    Only a step whose every used variable has another chosen producer can go (the others are
    the sole source of something a step or the goal needs), which keeps this linear in
    practice; among those, the riskiest, slowest, latest-registered is tried first.
    """
    while True:
        producers_of: dict[str, int] = {}
        for tool in chosen:
            for produced in index.produces[tool]:
                producers_of[produced] = producers_of.get(produced, 0) + 1
        used = set(goals)
        for tool in chosen:
            used.update(index.requires[tool])
        candidates = [
            tool
            for tool in chosen
            if all(
                producers_of[v] > 1 for v in index.produces[tool] if v in used and v not in known
            )
        ]
        for tool in sorted(candidates, key=lambda t: (-index.risk[t], -index.latency[t], -t)):
            runnable, provided = _schedule(index, chosen - {tool}, known)
            if all(variable in provided for variable in goals):
                # Steps that needed the removed one cannot run and go with it.
                chosen = set(runnable)
                break
        else:
            return chosen


def _schedule(
    index: ProducerIndex, tools: set[int], known: frozenset[str]
) -> tuple[list[int], set[str]]:
    """The tools that can run from ``known`` in call order, and what they provide.

    At each point the earliest-registered tool whose requires are met runs next, so the order
    is deterministic; tools that can never run are left out.
    """
    provided = set(known)
    waiting: dict[int, int] = {}
    users: dict[str, list[int]] = {}
    ready: list[int] = []
    for tool in tools:
        missing = [variable for variable in index.requires[tool] if variable not in provided]
        if missing:
            waiting[tool] = len(missing)
            for variable in missing:
                users.setdefault(variable, []).append(tool)
        else:
            ready.append(tool)
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        tool = heapq.heappop(ready)
        order.append(tool)
        for produced in index.produces[tool]:
            if produced in provided:
                continue
            provided.add(produced)
            for user in users.get(produced, ()):
                waiting[user] -= 1
                if not waiting[user]:
                    heapq.heappush(ready, user)
    return order, provided


def _near_duplicates(index: ProducerIndex, tool: int, known: frozenset[str]) -> list[int]:
    peers = index.same_produces.get(frozenset(index.produces[tool]), ())
    candidates = [peer for peer in peers if peer != tool and index.applicable(peer, known)]
    return sorted(candidates, key=lambda t: (index.risk[t], index.latency[t], t))


def _unprovided(
    index: ProducerIndex, unreached: list[str], known: frozenset[str], labels: dict[str, Label]
) -> list[str]:
    """The variables on the way to ``unreached`` that no tool produces at all.

    Reachable variables are not followed: one of their producers may need something missing,
    but another already provides them. (The search ran to completion, so ``labels`` holds every
    reachable variable that matters.)
    """
    nothing_produces: set[str] = set()
    seen = set(unreached)
    pending = list(unreached)
    while pending:
        variable = pending.pop()
        producers = index.producers.get(variable, ())
        if not producers:
            nothing_produces.add(variable)
        for tool in producers:
            for required in index.requires[tool]:
                if required not in known and required not in labels and required not in seen:
                    seen.add(required)
                    pending.append(required)
    return sorted(nothing_produces or unreached)


def _variables(value: Any, tool: str, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"tool {tool!r}: {field} must be a list of variable names")
    return tuple(dict.fromkeys(value))


def _latency(cost: Any) -> float:
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        return float(cost)
    if isinstance(cost, Mapping):
        for key in ("latency_ms_p50", "latency_ms_p95"):
            value = cost.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return 0.0
