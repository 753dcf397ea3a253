"""A harder synthetic world than Contract2Tool's, kept in the tests (stdlib only, seeded).

What it throws at inference: state names written with aliases by some runtimes, arguments
nested in lists of objects, optional arguments, a precondition that never flows into the
arguments and shows only through failures, effects that happen only some of the time,
incidental variables that appear rarely, variables that are always around (user, locale), and
one tool whose behaviour drifts half-way through its traces.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

ALIASES = {"eventId": "event_id", "evtId": "event_id", "msgId": "message_id", "userId": "user_id"}
AMBIENT = {"user_id": "usr_4242", "locale": "en-GB"}
DRIFTED = "payments.refund"

# name: (requires flowing into args, hidden requires, produces always, produces sometimes)
TOOLS = {
    "calendar.find": (["event_query"], [], [], ["event_id"]),
    "calendar.get": (["event_id"], [], ["event_details"], []),
    "calendar.invite": (["event_id", "attendee_email"], [], ["invite_id"], []),
    "calendar.move": (["event_id", "new_time"], ["calendar_lock"], ["event_moved"], []),
    "calendar.lock": (["event_id"], [], ["calendar_lock"], []),
    "mail.search": (["mail_query"], [], [], ["message_id"]),
    "mail.read": (["message_id"], [], ["message_body"], []),
    "mail.summarize": (["message_body"], [], ["message_summary"], []),
    "mail.reply": (["message_id", "reply_text"], ["mail_session"], ["reply_id"], []),
    "mail.login": (["mail_account"], [], ["mail_session"], []),
    "files.search": (["file_query"], [], [], ["file_id"]),
    "files.read": (["file_id"], [], ["file_text"], []),
    "files.share": (["file_id", "share_email"], [], ["share_id"], []),
    "payments.charge": (["customer_id", "amount_due"], [], ["charge_id"], []),
    DRIFTED: (["charge_id"], [], ["refund_id"], []),
    "crm.lookup": (["person_name"], [], ["customer_id"], []),
    "web.search": (["web_query"], [], ["search_results"], []),
    "web.open": (["page_url"], [], ["page_text"], []),
    "tasks.create": (["task_title"], [], ["task_id"], []),
    "tasks.close": (["task_id"], ["task_owner"], ["task_closed"], []),
}
NESTED = {"calendar.invite": "attendee_email", "files.share": "share_email"}
OPTIONAL = {"calendar.find": "time_zone", "mail.search": "mail_folder"}


def gold_contracts() -> dict[str, dict[str, Any]]:
    return {
        name: {"requires": sorted(flow + hidden), "produces": sorted(always + sometimes)}
        for name, (flow, hidden, always, sometimes) in TOOLS.items()
    }


def drifted_contract() -> dict[str, Any]:
    """What the drifted tool does in the second half: it also wants an approval code."""
    return {"requires": ["approval_code", "charge_id"], "produces": ["receipt_url", "refund_id"]}


def generate(seed: int = 11, n_traces: int = 4000) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    names = list(TOOLS)
    calls = {name: 0 for name in names}
    for index in range(n_traces):
        name = names[index % len(names)]
        calls[name] += 1
        flow, hidden, always, sometimes = TOOLS[name]
        drifting = name == DRIFTED and calls[name] > n_traces // len(names) // 2
        if drifting:
            flow, always = [*flow, "approval_code"], [*always, "receipt_url"]
        state = dict(AMBIENT)
        for var in flow + hidden:
            state[var] = f"{var}-{seed}-{index}-{rng.randrange(10**6)}"
        fails = hidden and rng.random() < 0.15
        if fails:
            del state[hidden[0]]  # the hidden precondition is missing: the call fails
        args: dict[str, Any] = {}
        for var in flow:
            if NESTED.get(name) == var:
                args["recipients"] = [{"email": state[var], "notify": True}]
            else:
                args[var.replace("_", "")] = state[var]
        if name in OPTIONAL and rng.random() < 0.4:
            args[OPTIONAL[name]] = "Europe/London"
        after = dict(state)
        if not fails:
            for var in always:
                after[var] = f"{var}-out-{index}"
            for var in sometimes:
                if rng.random() < 0.65:  # a search that sometimes finds nothing
                    after[var] = f"{var}-out-{index}"
            if rng.random() < 0.03:
                after["debug_trace"] = f"dbg-{index}"  # incidental, rare
        yield {
            "trace_id": f"syn-{seed}-{index}",
            "step": 0,
            "tool": name,
            "args": args,
            "status": "error" if fails else "success",
            "state_before": _aliased(state, rng),
            "state_after": _aliased(after, rng),
            "duration_ms": 20 + rng.randrange(200),
        }


def _aliased(state: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Some runtimes write eventId for event_id: aliases must be resolved before aggregation."""
    reverse = {canonical: alias for alias, canonical in ALIASES.items()}
    if rng.random() < 0.3:
        return {reverse.get(name, name): value for name, value in state.items()}
    return state
