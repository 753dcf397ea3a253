"""Synthetic execution traces of agent runs over the demo registry (pure: stdlib only).

``demo_traces(registry)`` simulates a few thousand short agent runs (find an event then move it,
search mail then reply, look up a user then grant a role, retrieve then cite, ...) and yields one
trace per tool call in the documented trace format. The generator reads each tool's contract from
the registry it is given, so the traces follow the contracts by construction:

- A tool's ``requires`` are exactly the state variables whose values flow into its arguments
  (sometimes nested, e.g. ``attendees: [{"email": ...}]``), and ``produces`` are exactly the
  variables its successful calls add to the state. Every state value is a distinctive string
  (``evt_1042``, ``alex.1043@partner.example``), unique within a run, and literal arguments never
  repeat a state value, so data flow is unambiguous.
- Some runs come from runtimes that write state keys with an alias (``eventId``, ``evt_id``) as
  other runtimes do; ingest resolves them through the vocabulary.
- Now and then the agent skips the step that would have produced a precondition and calls the
  next tool anyway: that call fails with the variable absent from its state (at about the tool's
  declared ``error_rate``).
- Durations are log-normal around each tool's declared ``cost`` (median p50, 95th percentile p95).
- ``crm.lookup_account`` is called by a runtime although no contract exists for it: inference
  should propose it as a new tool (requires ``customer_email``, produces ``account_id``).

The one drift, on purpose: ``payments.refund_charge`` (high risk) changed behind its contract.
Its contract says requires ``[charge_id]``, produces ``[refund_id]``, args ``charge_id`` and
``reason``. The traces show the payment provider's new approval step:

- it also requires ``approval_code``: the code flows from the state into a new ``approval_code``
  argument the input schema does not declare, and runs without one fail;
- it also produces ``refund_receipt_url`` (returned in the output and added to the state).

Every other registered tool behaves exactly as its contract says, with at least 30 successful
calls each, so a correct drift check opens one ticket: for ``payments.refund_charge``.
Output is deterministic for a given ``seed``, ``runs`` and ``start``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

DRIFTED_TOOL = "payments.refund_charge"
UNREGISTERED_TOOL = "crm.lookup_account"
DEFAULT_RUNS = 2100
# Traces spread over the days before ``start``; the last run ends at least this long before it,
# so no trace is ever in the future of the moment it was generated for.
SPAN = timedelta(days=4)
END_MARGIN = timedelta(minutes=10)


@dataclass(frozen=True)
class Behaviour:
    """What a tool really does in the simulation (the contract, or the drift away from it)."""

    requires: tuple[str, ...]
    produces: tuple[str, ...]
    # argument name -> state variable whose value the tool now also takes there
    extra_args: Mapping[str, str] = field(default_factory=dict)
    latency_ms: tuple[float, float] = (150.0, 400.0)  # p50, p95


# The drift is the difference between this and the contract in the registry file.
DRIFT: dict[str, dict[str, Any]] = {
    DRIFTED_TOOL: {
        "requires": ("approval_code",),
        "produces": ("refund_receipt_url",),
        "extra_args": {"approval_code": "approval_code"},
    },
}
UNREGISTERED: dict[str, Behaviour] = {
    UNREGISTERED_TOOL: Behaviour(
        requires=("customer_email",), produces=("account_id",), latency_ms=(130.0, 360.0)
    ),
}


# ------------------------------------------------------------------------------------ values
def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


FIRST_NAMES = ["alex", "priya", "jonas", "mei", "sam", "fatima", "lucas", "ines", "kofi", "ana"]
COMPANIES = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"]
EVENT_TOPICS = [
    "team sync", "quarterly planning", "design review", "1:1 with Priya", "board prep",
    "vendor call", "sprint retro", "hiring panel", "customer onboarding", "budget review",
]  # fmt: skip
MAIL_TOPICS = [
    "invoice from Acme", "contract renewal", "travel booking", "offsite agenda",
    "security alert", "candidate feedback", "shipping delay", "press inquiry",
]  # fmt: skip
DOC_TOPICS = [
    "Q3 budget", "onboarding checklist", "API design notes", "board deck", "pricing memo",
    "incident postmortem", "roadmap 2027", "vendor comparison",
]  # fmt: skip
WEB_TOPICS = [
    "EU AI Act obligations", "postgres 17 release notes", "best ergonomic chairs",
    "train strikes france", "typescript 6 features", "heat pump subsidies",
]  # fmt: skip
QUESTIONS = [
    "first-line treatment for community-acquired pneumonia in adults",
    "anticoagulation after a TIA with atrial fibrillation",
    "target HbA1c for older adults with type 2 diabetes",
    "paediatric amoxicillin dosing for otitis media",
    "when to start statins for primary prevention",
    "managing hyperkalaemia in chronic kidney disease",
]  # fmt: skip
ROLES = [
    "billing-viewer", "calendar-admin", "prod-readonly", "hr-records", "finance-approver",
    "support-agent", "repo-maintainer", "data-analyst",
]  # fmt: skip
CITIES = [
    ("Paris", 48.8566, 2.3522), ("Berlin", 52.52, 13.405), ("Lisbon", 38.7223, -9.1393),
    ("Oslo", 59.9139, 10.7522), ("Madrid", 40.4168, -3.7038), ("Vienna", 48.2082, 16.3738),
]  # fmt: skip
STREETS = ["Rue de Rivoli", "Unter den Linden", "Rua Augusta", "Karl Johans gate", "Gran Via"]
SITES = ["news.example.com", "docs.example.org", "blog.example.net", "wiki.example.org"]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Values:
    """Makes state values: ids carry a global counter, and nothing repeats within a run.

    Uniqueness within a run is what makes data flow unambiguous: a value in the arguments can
    have come from one state variable only.
    """

    def __init__(self, rng: random.Random, base: datetime):
        self.rng = rng
        self.base = base
        self.counter = 1000
        self.used: set[Any] = set()

    def new_run(self) -> None:
        self.used = set()

    def new(self, variable: str) -> Any:
        make = VALUE_MAKERS.get(variable, _generic_value)
        while True:
            self.counter += 1
            value = make(self, self.counter, variable)
            leaves = set(_leaves(value))
            if not leaves & self.used:
                self.used |= leaves
                return value

    def literal(self, make: Callable[[], Any]) -> Any:
        """A literal argument value that cannot be mistaken for a state value."""
        while True:
            value = make()
            if value not in self.used:
                self.used.add(value)
                return value

    def time(self) -> str:
        # Meetings in the coming two weeks, on the quarter hour, in working hours.
        day = self.rng.randrange(1, 15)
        minutes = self.rng.randrange(8 * 4, 18 * 4) * 15
        return _iso(self.base + timedelta(days=day, minutes=minutes))

    def date(self) -> str:
        return (self.base + timedelta(days=self.rng.randrange(-30, 60))).date().isoformat()

    def email(self, n: int, domain: str) -> str:
        return f"{self.rng.choice(FIRST_NAMES)}.{n}@{domain}"


def _generic_value(values: Values, n: int, variable: str) -> str:
    return f"{variable}_{n}"


def _event_details(values: Values, n: int, variable: str) -> dict[str, Any]:
    start = values.time()
    end = _iso(datetime.fromisoformat(start.replace("Z", "+00:00")) + timedelta(minutes=30))
    return {
        "title": f"{values.rng.choice(EVENT_TOPICS).title()} ({n})",
        "start": start,
        "end": end,
        "organizer": values.email(n, "example.com"),
    }


def _free_slots(values: Values, n: int, variable: str) -> list[str]:
    return sorted({values.time() for _ in range(values.rng.randrange(2, 5))})


def _location(values: Values, n: int, variable: str) -> str:
    _, lat, lon = values.rng.choice(CITIES)
    jitter = (n % 997) / 100000
    return f"geo:{lat + jitter:.5f},{lon - jitter:.5f}"


VALUE_MAKERS: dict[str, Callable[[Values, int, str], Any]] = {
    "event_query": lambda v, n, _: f"{v.rng.choice(EVENT_TOPICS)} #{n}",
    "event_id": lambda v, n, _: f"evt_{n}",
    "event_details": _event_details,
    "event_title": lambda v, n, _: f"{v.rng.choice(EVENT_TOPICS).capitalize()} kickoff #{n}",
    "event_start": lambda v, n, _: v.time(),
    "new_start_time": lambda v, n, _: v.time(),
    "event_revision": lambda v, n, _: f"rev_{n}",
    "cancellation_id": lambda v, n, _: f"cxl_{n}",
    "attendee_email": lambda v, n, _: v.email(n, "partner.example"),
    "invitation_id": lambda v, n, _: f"invt_{n}",
    "free_slots": _free_slots,
    "mail_query": lambda v, n, _: f"{v.rng.choice(MAIL_TOPICS)} #{n}",
    "message_id": lambda v, n, _: f"msg_{n}",
    "message_body": lambda v, n, _: (
        f"Hello, following up on ticket {n}: could you confirm by Friday?"
    ),
    "sender_email": lambda v, n, _: v.email(n, f"{v.rng.choice(COMPANIES)}.example"),
    "reply_text": lambda v, n, _: f"Thanks, confirmed for Friday (ref {n}).",
    "draft_id": lambda v, n, _: f"drf_{n}",
    "sent_message_id": lambda v, n, _: f"sent_{n}",
    "recipient_email": lambda v, n, _: v.email(n, "example.org"),
    "forwarded_message_id": lambda v, n, _: f"fwd_{n}",
    "doc_query": lambda v, n, _: f"{v.rng.choice(DOC_TOPICS)} #{n}",
    "document_id": lambda v, n, _: f"doc_{n}",
    "document_text": lambda v, n, _: f"Section 1. Scope of document {n}. Section 2. Decisions.",
    "summary_text": lambda v, n, _: f"Document {n} proposes three decisions and one open risk.",
    "share_link": lambda v, n, _: f"https://docs.example.com/s/{n:x}",
    "document_title": lambda v, n, _: f"{v.rng.choice(DOC_TOPICS).capitalize()} draft {n}",
    "export_url": lambda v, n, _: f"https://docs.example.com/export/{n}.pdf",
    "customer_id": lambda v, n, _: f"cus_{n}",
    "customer_email": lambda v, n, _: f"billing.{n}@{v.rng.choice(COMPANIES)}.example",
    "invoice_amount": lambda v, n, _: f"EUR {v.rng.randrange(50, 9000)}.{n % 100:02d}",
    "invoice_id": lambda v, n, _: f"inv_{n}",
    "invoice_delivery_id": lambda v, n, _: f"dlv_{n}",
    "charge_id": lambda v, n, _: f"ch_{n}",
    "refund_id": lambda v, n, _: f"re_{n}",
    "approval_code": lambda v, n, _: f"APR-{n}-{v.rng.choice('KMNPRTX')}",
    "refund_receipt_url": lambda v, n, _: f"https://pay.example.com/receipts/{n}",
    "balance_snapshot": lambda v, n, _: {
        "available": f"EUR {v.rng.randrange(0, 50000)}.{n % 100:02d}",
        "as_of": _iso(v.base - timedelta(seconds=n)),
    },
    "web_query": lambda v, n, _: f"{v.rng.choice(WEB_TOPICS)} {n}",
    "result_url": lambda v, n, _: f"https://{v.rng.choice(SITES)}/articles/{n}",
    "page_text": lambda v, n, _: f"Article {n}. The main points are summarised below.",
    "address": lambda v, n, _: f"{n % 300 + 1} {v.rng.choice(STREETS)}, {v.rng.choice(CITIES)[0]}",
    "location": _location,
    "forecast": lambda v, n, _: {
        "summary": f"{v.rng.randrange(4, 25)}-{v.rng.randrange(25, 33)} C, showers (run {n})",
        "issued_at": _iso(v.base - timedelta(minutes=n % 600)),
    },
    "user_email": lambda v, n, _: v.email(n, "example.com"),
    "user_id": lambda v, n, _: f"usr_{n}",
    "role_name": lambda v, n, _: v.rng.choice(ROLES),
    "role_list": lambda v, n, _: sorted(v.rng.sample(ROLES, v.rng.randrange(1, 4))),
    "role_grant_id": lambda v, n, _: f"grt_{n}",
    "role_revocation_id": lambda v, n, _: f"rvk_{n}",
    "password_reset_ticket": lambda v, n, _: f"pwr_{n}",
    "research_question": lambda v, n, _: f"{v.rng.choice(QUESTIONS)} (case {n})",
    "passage_set_id": lambda v, n, _: f"ps_{n}",
    "source_links": lambda v, n, _: [
        f"https://guidelines.example.org/{n}/{index}" for index in range(v.rng.randrange(1, 4))
    ],
    "task_title": lambda v, n, _: f"Follow up with {v.rng.choice(COMPANIES).title()} #{n}",
    "task_id": lambda v, n, _: f"tsk_{n}",
    "task_completion_id": lambda v, n, _: f"done_{n}",
    "channel_id": lambda v, n, _: f"C0{n}",
    "message_text": lambda v, n, _: f"Standup moved to 10:30 today (note {n}).",
    "chat_message_id": lambda v, n, _: f"cm_{n}",
    "account_id": lambda v, n, _: f"acct_{n}",
}


# ------------------------------------------------------------------------------------- args
class Args:
    """Helpers for argument builders: optional arguments and literals that are never state."""

    def __init__(self, values: Values):
        self.values = values
        self.rng = values.rng

    def maybe(self, probability: float) -> bool:
        return self.rng.random() < probability

    def pick(self, options: Sequence[Any]) -> Any:
        return self.rng.choice(options)

    def time(self) -> str:
        return self.values.literal(self.values.time)

    def date(self) -> str:
        return self.values.literal(self.values.date)


Builder = Callable[[Mapping[str, Any], Args], dict[str, Any]]


def _opt(
    args: dict[str, Any], a: Args, probability: float, **candidates: Callable[[], Any]
) -> dict[str, Any]:
    for name, make in candidates.items():
        if a.maybe(probability):
            args[name] = make()
    return args


def _retrieval_args(s: Mapping[str, Any], a: Args) -> dict[str, Any]:
    # The four shapes a planner sends; each satisfies retrieval_llm's invariants.
    args: dict[str, Any] = {"query": s["research_question"]}
    shape = a.rng.random()
    if shape < 0.25:
        args["subquestion_id"] = f"sq-{a.rng.randrange(1, 5)}"
    elif shape < 0.45:
        args["subquestion_ids"] = [f"sq-{i}" for i in range(1, a.rng.randrange(3, 5))]
        args["web_search"] = True
    elif shape < 0.7:
        args["web_search"] = a.maybe(0.5)
    return _opt(args, a, 0.3, top_k=lambda: a.pick([5, 8, 12]))


ARGS: dict[str, Builder] = {
    "calendar.find_events": lambda s, a: _opt(
        {"event_query": s["event_query"]}, a, 0.25,
        time_min=a.time, max_results=lambda: a.pick([5, 10, 20]),
    ),
    "calendar.get_event": lambda s, a: _opt(
        {"event_id": s["event_id"]}, a, 0.4, include_attendees=lambda: a.maybe(0.5)
    ),
    "calendar.create_event": lambda s, a: _opt(
        {
            "event_title": s["event_title"],
            "event_start": s["event_start"],
            "duration_minutes": a.pick([15, 30, 45, 60, 90]),
        },
        a, 0.3,
        room=lambda: a.pick(["Room 4B", "Atlas (3rd floor)", "video call"]),
        visibility=lambda: a.pick(["default", "private"]),
    ),
    "calendar.update_event": lambda s, a: _opt(
        {"event_id": s["event_id"], "new_start_time": s["new_start_time"]},
        a, 0.35,
        notify_attendees=lambda: a.maybe(0.8),
        reason=lambda: a.pick(["Conflict with a customer call", "Organizer travelling"]),
    ),
    "calendar.delete_event": lambda s, a: _opt(
        {"event_id": s["event_id"]}, a, 0.3,
        notify_attendees=lambda: a.maybe(0.9),
        cancellation_message=lambda: a.pick(["Sorry, we need to cancel.", "No longer needed."]),
    ),
    "calendar.invite_attendee": lambda s, a: _opt(
        {
            "event_id": s["event_id"],
            "attendees": [
                {"email": s["attendee_email"], **({"optional": True} if a.maybe(0.2) else {})}
            ],
        },
        a, 0.3, send_updates=lambda: a.pick(["all", "external_only"]),
    ),
    "calendar.find_free_slots": lambda s, a: _opt(
        {"attendee_email": s["attendee_email"], "duration_minutes": a.pick([30, 45, 60])},
        a, 0.4, within_days=lambda: a.pick([3, 7, 14]),
    ),
    "mail.search_messages": lambda s, a: _opt(
        {"mail_query": s["mail_query"]}, a, 0.3,
        folder=lambda: a.pick(["inbox", "archive"]), max_results=lambda: a.pick([5, 10]),
    ),
    "mail.read_message": lambda s, a: _opt(
        {"message_id": s["message_id"]}, a, 0.2, format=lambda: a.pick(["text", "html"])
    ),
    "mail.draft_reply": lambda s, a: _opt(
        {"message_id": s["message_id"], "reply_text": s["reply_text"]},
        a, 0.4, tone=lambda: a.pick(["neutral", "friendly", "formal"]),
    ),
    "mail.send_message": lambda s, a: _opt(
        {"draft_id": s["draft_id"]}, a, 0.15, schedule_at=a.time
    ),
    "mail.forward_message": lambda s, a: _opt(
        {"message_id": s["message_id"], "recipients": [{"address": s["recipient_email"]}]},
        a, 0.5, note=lambda: a.pick(["FYI", "Can you take this one?", "See below."]),
    ),
    "documents.search": lambda s, a: _opt(
        {"doc_query": s["doc_query"]}, a, 0.25,
        folder=lambda: a.pick(["/Finance", "/Engineering", "/Board"]),
        max_results=lambda: a.pick([5, 10]),
    ),
    "documents.read": lambda s, a: _opt(
        {"document_id": s["document_id"]}, a, 0.3, page_range=lambda: a.pick(["1-3", "2", "1-10"])
    ),
    "documents.summarize": lambda s, a: _opt(
        {"document_id": s["document_id"]}, a, 0.4,
        length=lambda: a.pick(["short", "medium", "long"]),
        focus=lambda: a.pick(["risks", "decisions", "costs"]),
    ),
    "documents.share": lambda s, a: _opt(
        {
            "document_id": s["document_id"],
            "share_with": [
                {"email": s["recipient_email"], "role": a.pick(["viewer", "commenter", "editor"])}
            ],
        },
        a, 0.3, message=lambda: a.pick(["Here is the doc we discussed.", "For review."]),
    ),
    "documents.create": lambda s, a: _opt(
        {"document_title": s["document_title"]}, a, 0.5,
        template=lambda: a.pick(["blank", "meeting_notes", "memo", "report"]),
        folder=lambda: a.pick(["/Projects", "/Drafts"]),
    ),
    "documents.export_pdf": lambda s, a: _opt(
        {"document_id": s["document_id"]}, a, 0.3, include_comments=lambda: a.maybe(0.5)
    ),
    "payments.get_balance": lambda s, a: _opt(
        {"customer_id": s["customer_id"]}, a, 0.3, currency=lambda: a.pick(["EUR", "USD"])
    ),
    "payments.list_charges": lambda s, a: _opt(
        {"customer_id": s["customer_id"]}, a, 0.3,
        since=a.date, charge_status=lambda: a.pick(["succeeded", "pending"]),
    ),
    "payments.create_invoice": lambda s, a: _opt(
        {
            "customer_id": s["customer_id"],
            "line_items": [
                {
                    "description": a.pick(["Consulting, October", "Annual licence"]),
                    "amount": s["invoice_amount"],
                }
            ],
        },
        a, 0.35,
        due_in_days=lambda: a.pick([14, 30, 45]), memo=lambda: "Thank you for your business.",
    ),
    "payments.send_invoice": lambda s, a: _opt(
        {"invoice_id": s["invoice_id"], "customer_email": s["customer_email"]},
        a, 0.3, attach_pdf=lambda: a.maybe(0.8),
    ),
    "payments.charge_card": lambda s, a: {
        "customer_id": s["customer_id"],
        "invoice_id": s["invoice_id"],
        "idempotency_key": a.values.literal(lambda: f"idem-{a.rng.getrandbits(48):012x}"),
    },
    "payments.refund_charge": lambda s, a: {
        "charge_id": s["charge_id"],
        "reason": a.pick(["duplicate", "requested_by_customer", "fraudulent"]),
    },
    "web.search": lambda s, a: _opt(
        {"web_query": s["web_query"]}, a, 0.3,
        max_results=lambda: a.pick([3, 5, 10]), region=lambda: a.pick(["FR", "DE", "US"]),
    ),
    "web.fetch_page": lambda s, a: _opt(
        {"result_url": s["result_url"]}, a, 0.3, max_chars=lambda: a.pick([5000, 20000])
    ),
    "maps.geocode": lambda s, a: _opt(
        {"address": s["address"]}, a, 0.3, country_hint=lambda: a.pick(["FR", "DE", "PT"])
    ),
    "weather.forecast": lambda s, a: _opt(
        {"location": s["location"]}, a, 0.4,
        days=lambda: a.pick([1, 3, 5]), units=lambda: a.pick(["metric", "imperial"]),
    ),
    "access.lookup_user": lambda s, a: {"user_email": s["user_email"]},
    "access.list_roles": lambda s, a: _opt(
        {"user_id": s["user_id"]}, a, 0.2, include_expired=lambda: a.maybe(0.5)
    ),
    "access.grant_role": lambda s, a: _opt(
        {"user_id": s["user_id"], "role_name": s["role_name"]}, a, 0.5,
        expires_at=a.time,
        justification=lambda: a.pick(["Quarter-end close", "On-call rotation", "New team"]),
    ),
    "access.revoke_role": lambda s, a: _opt(
        {"user_id": s["user_id"], "role_name": s["role_name"]}, a, 0.5,
        justification=lambda: a.pick(["Left the team", "Access review", "Temporary need ended"]),
    ),
    "access.reset_password": lambda s, a: _opt(
        {"user_id": s["user_id"]}, a, 0.3, notify_manager=lambda: a.maybe(0.5)
    ),
    "retrieval_llm": _retrieval_args,
    "source_link_retrieval": lambda s, a: _opt(
        {"passage_set_id": s["passage_set_id"]}, a, 0.35,
        max_links=lambda: a.pick([3, 5]), style=lambda: a.pick(["vancouver", "apa"]),
    ),
    "tasks.create_task": lambda s, a: _opt(
        {"task_title": s["task_title"]}, a, 0.4,
        due_date=a.date, priority=lambda: a.pick(["low", "normal", "high"]),
    ),
    "tasks.complete_task": lambda s, a: _opt(
        {"task_id": s["task_id"]}, a, 0.3, note=lambda: a.pick(["Done", "Handled by phone"])
    ),
    "chat.post_message": lambda s, a: _opt(
        {"channel_id": s["channel_id"], "message_text": s["message_text"]},
        a, 0.2, silent=lambda: a.maybe(0.5),
    ),
    UNREGISTERED_TOOL: lambda s, a: _opt(
        {"customer_email": s["customer_email"]}, a, 0.3, include_contacts=lambda: a.maybe(0.5)
    ),
}  # fmt: skip

# Output fields besides the produced variables, as the output schemas declare them.
OUTPUT_EXTRAS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "calendar.find_events": lambda r: {"match_count": r.randrange(1, 8)},
    "mail.search_messages": lambda r: {"match_count": r.randrange(1, 15)},
    "documents.search": lambda r: {"match_count": r.randrange(1, 6)},
    "payments.list_charges": lambda r: {"charge_count": r.randrange(1, 12)},
    "payments.charge_card": lambda r: {"charge_status": "succeeded"},
    "payments.refund_charge": lambda r: {"refund_status": r.choice(["succeeded", "pending"])},
    "retrieval_llm": lambda r: {"passage_count": r.randrange(3, 20)},
}


# -------------------------------------------------------------------------------- scenarios
@dataclass(frozen=True)
class Scenario:
    name: str
    weight: float
    initial: tuple[str, ...]  # variables the user's request puts in the state
    steps: tuple[str, ...]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("look up an event", 4, ("event_query",),
             ("calendar.find_events", "calendar.get_event")),
    Scenario("move an event", 4, ("event_query", "new_start_time"),
             ("calendar.find_events", "calendar.update_event")),
    Scenario("check then move an event", 2, ("event_query", "new_start_time"),
             ("calendar.find_events", "calendar.get_event", "calendar.update_event")),
    Scenario("cancel an event", 3, ("event_query",),
             ("calendar.find_events", "calendar.delete_event")),
    Scenario("create a meeting", 3, ("event_title", "event_start", "attendee_email"),
             ("calendar.create_event", "calendar.invite_attendee")),
    Scenario("schedule with someone", 2, ("attendee_email", "event_title", "event_start"),
             ("calendar.find_free_slots", "calendar.create_event", "calendar.invite_attendee")),
    Scenario("invite to an event", 2, ("event_query", "attendee_email"),
             ("calendar.find_events", "calendar.invite_attendee")),
    Scenario("read a message", 4, ("mail_query",), ("mail.search_messages", "mail.read_message")),
    Scenario("reply after reading", 3, ("mail_query", "reply_text"),
             ("mail.search_messages", "mail.read_message", "mail.draft_reply",
              "mail.send_message")),
    Scenario("quick reply", 2, ("mail_query", "reply_text"),
             ("mail.search_messages", "mail.draft_reply", "mail.send_message")),
    Scenario("forward a message", 3, ("mail_query", "recipient_email"),
             ("mail.search_messages", "mail.forward_message")),
    Scenario("read a document", 3, ("doc_query",), ("documents.search", "documents.read")),
    Scenario("summarize a document", 3, ("doc_query",),
             ("documents.search", "documents.summarize")),
    Scenario("share a document", 2, ("doc_query", "recipient_email"),
             ("documents.search", "documents.share")),
    Scenario("create and share a document", 2, ("document_title", "recipient_email"),
             ("documents.create", "documents.share")),
    Scenario("export a document", 2.5, ("doc_query",),
             ("documents.search", "documents.export_pdf")),
    Scenario("check a balance", 2.5, ("customer_id",), ("payments.get_balance",)),
    Scenario("invoice a customer", 2.5, ("customer_id", "invoice_amount", "customer_email"),
             ("payments.create_invoice", "payments.send_invoice")),
    Scenario("invoice and charge", 2.5, ("customer_id", "invoice_amount"),
             ("payments.create_invoice", "payments.charge_card")),
    # The refund runs: the approver's code is in the state because the payment provider now
    # demands it (the drift). A few runs lack it and their refunds fail.
    Scenario("refund a charge", 5, ("customer_id", "approval_code"),
             ("payments.list_charges", "payments.refund_charge")),
    Scenario("refund without approval", 0.5, ("customer_id",),
             ("payments.list_charges", "payments.refund_charge")),
    Scenario("research the web", 3, ("web_query",), ("web.search", "web.fetch_page")),
    Scenario("weather here", 2, ("location",), ("weather.forecast",)),
    Scenario("weather there", 2.5, ("address",), ("maps.geocode", "weather.forecast")),
    Scenario("audit access", 2.5, ("user_email",), ("access.lookup_user", "access.list_roles")),
    Scenario("grant a role", 2.5, ("user_email", "role_name"),
             ("access.lookup_user", "access.grant_role")),
    Scenario("revoke a role", 2, ("user_email", "role_name"),
             ("access.lookup_user", "access.revoke_role")),
    Scenario("reset a password", 2.5, ("user_email",),
             ("access.lookup_user", "access.reset_password")),
    Scenario("answer with sources", 4, ("research_question",),
             ("retrieval_llm", "source_link_retrieval")),
    Scenario("add a to-do", 1.5, ("task_title",), ("tasks.create_task",)),
    Scenario("add and finish a to-do", 2.5, ("task_title",),
             ("tasks.create_task", "tasks.complete_task")),
    Scenario("post in chat", 2.5, ("channel_id", "message_text"), ("chat.post_message",)),
    Scenario("look up a CRM account", 0.6, ("customer_email",), (UNREGISTERED_TOOL,)),
)  # fmt: skip


# ------------------------------------------------------------------------------- generation
def behaviours(registry: Mapping[str, Any]) -> dict[str, Behaviour]:
    """How each tool behaves in the simulation: its contract, with the drift applied."""
    result = dict(UNREGISTERED)
    for contract in registry.get("tools", []):
        drift = DRIFT.get(contract["name"], {})
        cost = contract.get("cost") or {}
        p50 = float(cost.get("latency_ms_p50", 150))
        result[contract["name"]] = Behaviour(
            requires=(*contract.get("requires", []), *drift.get("requires", ())),
            produces=(*contract.get("produces", []), *drift.get("produces", ())),
            extra_args=drift.get("extra_args", {}),
            latency_ms=(p50, float(cost.get("latency_ms_p95", p50 * 2.5))),
        )
    return result


def demo_traces(
    registry: Mapping[str, Any],
    *,
    seed: int = 7,
    runs: int = DEFAULT_RUNS,
    start: datetime | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield synthetic traces of ``runs`` agent runs ending before ``start`` (default: now, UTC).

    Deterministic for a given ``seed``, ``runs`` and ``start``; trace ids depend on ``seed`` and
    the run number only, so loading the same demo twice is idempotent whatever ``start`` was.
    """
    start = (start or datetime.now(UTC)).astimezone(UTC)
    rng = random.Random(seed)
    tools = behaviours(registry)
    error_rates = {
        contract["name"]: float((contract.get("cost") or {}).get("error_rate", 0.0))
        for contract in registry.get("tools", [])
    }
    aliases = {
        variable["name"]: variable["aliases"]
        for variable in registry.get("state_variables", [])
        if variable.get("aliases")
    }
    scenarios = [s for s in SCENARIOS if all(step in tools for step in s.steps)]
    weights = [s.weight for s in scenarios]
    values = Values(rng, base=start)
    arg_helpers = Args(values)

    for run in range(runs):
        scenario = rng.choices(scenarios, weights)[0]
        values.new_run()
        # Most runtimes speak canonical names; some write another runtime's aliases.
        runtime = rng.choices(["canonical", "first_alias", "last_alias"], [0.75, 0.18, 0.07])[0]
        moment = start - END_MARGIN - timedelta(seconds=rng.uniform(0, SPAN.total_seconds()))
        state: dict[str, Any] = {name: values.new(name) for name in scenario.initial}
        steps = scenario.steps
        index = 0
        step_number = 0
        while index < len(steps):
            tool = steps[index]
            following = steps[index + 1] if index + 1 < len(steps) else None
            if (
                following is not None
                and _skippable(tools[tool], tools[following])
                and rng.random() < error_rates.get(following, 0.0)
            ):
                # The agent skipped this step and called the next tool without its
                # precondition: the call fails, and the run ends there.
                tool, steps = following, ()
            trace, state, duration = _call(
                tool=tool,
                behaviour=tools[tool],
                state=state,
                values=values,
                args=arg_helpers,
                rng=rng,
            )
            yield {
                "trace_id": f"demo-{seed}-{run:05d}",
                "step": step_number,
                "tool": tool,
                "args": trace["args"],
                "status": trace["status"],
                "state_before": _render(trace["state_before"], aliases, runtime),
                "state_after": _render(trace["state_after"], aliases, runtime),
                "output": trace["output"],
                "error": trace["error"],
                "duration_ms": duration,
                "occurred_at": _iso_ms(moment),
            }
            if trace["status"] == "error":
                break
            moment += timedelta(milliseconds=duration + rng.uniform(400, 6000))
            step_number += 1
            index += 1


def _skippable(skipped: Behaviour, following: Behaviour) -> bool:
    # Only a step whose every product the next tool needs is skipped, so the failing call's
    # state differs from a successful one's by missing preconditions alone.
    return bool(skipped.produces) and set(skipped.produces) <= set(following.requires)


def _call(
    *,
    tool: str,
    behaviour: Behaviour,
    state: dict[str, Any],
    values: Values,
    args: Args,
    rng: random.Random,
) -> tuple[dict[str, Any], dict[str, Any], int]:
    missing = [name for name in behaviour.requires if name not in state]
    # Without the variable the agent guesses a value, which matches nothing in the state.
    sources = {
        name: state[name] if name in state else values.new(name) for name in behaviour.requires
    }
    call_args = ARGS[tool](sources, args)
    for arg, variable in behaviour.extra_args.items():
        call_args[arg] = sources[variable]
    p50, p95 = behaviour.latency_ms
    sigma = math.log(max(p95, p50 * 1.01) / p50) / 1.645
    duration = max(1, round(math.exp(rng.gauss(math.log(p50), sigma))))
    trace: dict[str, Any] = {"tool": tool, "args": call_args, "state_before": dict(state)}
    if missing:
        duration = max(1, round(duration * 0.3))  # a precondition failure returns early
        trace.update(
            status="error",
            output=None,
            error=_error_message(tool, missing[0]),
            state_after=dict(state),
        )
        return {**trace, "duration_ms": duration}, state, duration
    produced = {name: values.new(name) for name in behaviour.produces}
    extras = OUTPUT_EXTRAS.get(tool)
    output = {**produced, **(extras(rng) if extras else {})}
    after = {**state, **produced}
    trace.update(status="success", output=output, error=None, state_after=dict(after))
    return {**trace, "duration_ms": duration}, after, duration


def _error_message(tool: str, variable: str) -> str:
    if tool == DRIFTED_TOOL and variable == "approval_code":
        return "refund_rejected: an approval code is required for refunds (provider policy REF-2)"
    return f"PreconditionFailed: {tool} needs {variable!r}, which is not in the task state"


def _render(
    state: Mapping[str, Any], aliases: Mapping[str, list[str]], runtime: str
) -> dict[str, Any]:
    if runtime == "canonical":
        return dict(state)
    position = 0 if runtime == "first_alias" else -1
    return {
        (aliases[name][position] if name in aliases else name): value
        for name, value in state.items()
    }


def _iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
