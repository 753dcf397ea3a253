"""Data flow found in the values of one trace (learning.dataflow, pure)."""

from learning import dataflow
from learning.aggregates import aggregate_add, new_aggregate
from learning.dataflow import trace_reconstruct, trivial, value_key, variable_name
from learning.inference import infer_contract


def call(tool: str, args: dict, output=None, *, status: str = "success", **extra) -> dict:
    return {"tool": tool, "args": args, "output": output, "status": status, **extra}


def flows(reconstruction, step: int) -> list[tuple[str, str, str]]:
    return reconstruction.steps[step]["flows"]


def effects(reconstruction, step: int) -> list[tuple[str, str]]:
    return reconstruction.steps[step]["effects"]


def test_it_finds_a_value_nested_in_an_earlier_output():
    found = trace_reconstruct(
        [
            call("search_flights", {"origin": "JFK"}, {"flights": [{"flight_number": "HAT136"}]}),
            call("book", {"flights": [{"flight_number": "HAT136", "cabin": "economy"}]}),
        ]
    )
    assert flows(found, 1) == [
        (
            "flight_number",
            "flights[].flight_number",
            "search_flights output.flights[].flight_number",
        )
    ]
    assert effects(found, 0) == [("flight_number", "output.flights[].flight_number")]
    assert found.steps[0]["present"] == [] and found.steps[1]["present"] == ["flight_number"]


def test_it_names_a_list_argument_by_its_item():
    found = trace_reconstruct(
        [
            call("get_order", {"order_id": "#W2378156"}, {"items": [{"item_id": "1008292230"}]}),
            call("return_items", {"itemIds": ["1008292230"]}),
        ]
    )
    assert flows(found, 1) == [("item_id", "itemIds[]", "get_order output.items[].item_id")]
    assert effects(found, 0) == [("item_id", "output.items[].item_id")]


def test_it_finds_a_bare_string_answer():
    found = trace_reconstruct(
        [
            call("find_user_id_by_email", {"email": "mia@example.com"}, "mia_li_3668"),
            call("get_user_details", {"user_id": "mia_li_3668"}, {"name": "Mia Li"}),
        ]
    )
    assert flows(found, 1) == [("user_id", "user_id", "find_user_id_by_email output")]
    assert effects(found, 0) == [("user_id", "output")]


def test_it_finds_an_identifier_inside_text():
    found = trace_reconstruct(
        [
            call("place_order", {"item": "1008292230"}, "Order #W2378156 was placed for you."),
            call("cancel_order", {"order_id": "#W2378156", "reason": "no longer needed"}),
        ]
    )
    assert flows(found, 1) == [("order_id", "order_id", "place_order output (in text)")]
    assert effects(found, 0) == [("order_id", "output (in text)")]


def test_it_finds_values_only_the_user_typed():
    said = ["Hi, I am Mia Garcia, zip code 80237. My reservation is NO6JO3."]
    found = trace_reconstruct(
        [
            call("find_user", {"first_name": "Mia", "last_name": "Garcia", "zip": "80237"},
                 user_texts=said),
            call("get_reservation", {"reservation_id": "NO6JO3"}, user_texts=said),
        ]
    )  # fmt: skip
    assert sorted(flows(found, 0)) == [
        ("first_name", "first_name", "user message"),
        ("last_name", "last_name", "user message"),
        ("zip", "zip", "user message"),
    ]
    assert flows(found, 1) == [("reservation_id", "reservation_id", "user message")]
    assert "reservation_id" in found.steps[0]["present"]  # said before the first call
    assert effects(found, 0) == effects(found, 1) == []


def test_it_finds_a_phrase_the_user_typed():
    found = trace_reconstruct(
        [call("search_events", {"q": "Dentist Appointment"}, user_texts=["Move my dentist "
                                                                        "appointment to 3 PM"])]
    )  # fmt: skip
    assert flows(found, 0) == [("q", "q", "user message")]


def test_it_keeps_every_value_a_variable_had_and_new_ones_are_effects():
    found = trace_reconstruct(
        [
            call("get_user", {"user_id": "mia_li_3668"},
                 {"reservations": ["NO6JO3", "AIXC49", "HKEG34"]}),
            call("get_reservation", {"reservation_id": "NO6JO3"}, {"status": "active"}),
            call("find_reservation", {"email": "mia@example.com"}, {"reservation_id": "ZFA04Y"}),
            call("get_reservation", {"reservation_id": "HKEG34"}, {"status": "active"}),
            call("get_reservation", {"reservation_id": "ZFA04Y"}, {"status": "active"}),
        ]
    )  # fmt: skip
    # Reading one more reservation kept the three read before: both are found later.
    assert flows(found, 3) == [
        ("reservation_id", "reservation_id", "get_user output.reservations[]")
    ]
    assert flows(found, 4) == [
        ("reservation_id", "reservation_id", "find_reservation output.reservation_id")
    ]
    # A call that brings a value the trace did not know produces the variable, known or not.
    assert effects(found, 0) == [("reservation_id", "output.reservations[]")]
    assert effects(found, 2) == [("reservation_id", "output.reservation_id")]
    assert "reservation_id" in found.steps[2]["present"]


def test_an_echo_of_the_calls_own_arguments_is_no_effect():
    found = trace_reconstruct(
        [
            call("get_user", {"user_id": "mia_li_3668"}, {"user_id": "mia_li_3668",
                                                          "email": "mia@example.com"}),
            call("update_user", {"user_id": "mia_li_3668"}),
        ]
    )  # fmt: skip
    assert effects(found, 0) == []
    assert flows(found, 1) == [("user_id", "user_id", "get_user argument user_id")]


def test_it_ignores_values_too_common_to_mean_anything():
    trivia = {"cabin": "economy", "count": 2, "refundable": True, "note": "", "gift": None,
              "amount": 42.5, "status": "pending", "id": "ab"}  # fmt: skip
    found = trace_reconstruct([call("first", {}, trivia), call("second", dict(trivia))])
    assert flows(found, 1) == [] and effects(found, 0) == []
    for value in ("economy", "pending", "the", 2, 999, True, None, "", "  ", "ab", 42.5):
        assert trivial(value_key(value)), value
    for value in ("HAT136", "mia_li_3668", "Mia", 12345, "2024-05-20", "#W2378156", 1234.5):
        assert not trivial(value_key(value)), value


def test_a_value_two_tools_returned_came_from_the_first():
    found = trace_reconstruct(
        [
            call("search_a", {"q": "sync meeting"}, {"event_id": "evt_9031"}),
            call("search_b", {"q": "team sync"}, {"event_id": "evt_9031"}),
            call("get_event", {"event_id": "evt_9031"}),
        ]
    )
    assert flows(found, 2) == [("event_id", "event_id", "search_a output.event_id")]
    assert effects(found, 0) == [("event_id", "output.event_id")]
    assert effects(found, 1) == []


def test_ids_used_as_keys_are_values_too():
    found = trace_reconstruct(
        [
            call("get_user", {"user_id": "mia_li_3668"},
                 {"payment_methods": {"credit_card_4421": {"brand": "visa"}}}),
            call("pay", {"payment_id": "credit_card_4421"}),
        ]
    )  # fmt: skip
    assert flows(found, 1) == [("payment_id", "payment_id", "get_user output.payment_methods{}")]


def test_a_failed_calls_output_brings_nothing():
    found = trace_reconstruct(
        [
            call("get_user", {"user_id": "x"}, {"reservation_id": "NO6JO3"}, status="error"),
            call("get_reservation", {"reservation_id": "NO6JO3"}),
        ]
    )
    assert flows(found, 1) == [] and effects(found, 0) == []


def test_a_state_the_runtime_sent_is_read_under_its_names():
    found = trace_reconstruct(
        [
            call("invite", {"recipients": [{"email": "ana@example.org"}]},
                 state_before={"attendee_email": "ana@example.org"},
                 state_after={"attendee_email": "ana@example.org", "invite_id": "inv-1"}),
        ]
    )  # fmt: skip
    assert flows(found, 0) == [("attendee_email", "recipients[].email", "state attendee_email")]
    assert effects(found, 0) == [("invite_id", "state.invite_id")]
    assert found.steps[0]["present"] == ["attendee_email"]


class Text(str):
    """A string of another type: read by ``value_key``, not the quick path for ``str``."""


def test_a_states_strings_are_keyed_as_value_key_keys_them():
    long = "x" * (dataflow.MAX_STRING - 3) + "  ABCDEF"  # cut inside its tail
    for value, argument in [
        ("  INV-123  ", "inv-123"),
        ("Stra\u00dfe 12", "STRASSE 12"),
        (long, long[: dataflow.MAX_STRING].strip().casefold()),
        ("   ", "   "),
        ("", ""),
    ]:
        found = [
            trace_reconstruct(
                [
                    call(
                        "open",
                        {"ref": argument},
                        {"ok": True},
                        state_before={"ticket_ref": state},
                        state_after={"ticket_ref": state, "copy": state},
                    ),
                ]
            )
            for state in (value, Text(value))
        ]
        assert found[0].steps == found[1].steps, value


def test_names_are_canonical():
    assert variable_name("userId", listed=False, aliases={}) == "user_id"
    assert variable_name("item_ids", listed=True, aliases={}) == "item_id"
    assert variable_name("categories", listed=True, aliases={}) == "category"
    assert variable_name("eventID", listed=False, aliases={}) == "event_id"
    assert variable_name("evtId", listed=False, aliases={"evtId": "event_id"}) == "event_id"
    assert variable_name("evt_id", listed=False, aliases={"evt_id": "event_id"}) == "event_id"


def test_an_output_field_that_fed_another_name_is_a_candidate_alias():
    found = trace_reconstruct(
        [
            call("get_user", {"user_id": "mia_li_3668"}, {"reservations": ["NO6JO3", "AIXC49"]}),
            call("get_reservation", {"reservation_id": "NO6JO3"}),
        ]
    )
    assert found.candidates == [(0, "get_user", "reservations", "reservation_id", "no6jo3")]


def test_declared_aliases_name_variables_and_fields():
    aliases = {"reservation_id": "reservation_id", "reservations": "reservation_id"}
    found = trace_reconstruct(
        [call("get_user", {"user_id": "mia_li_3668"}, {"reservations": ["NO6JO3"]})],
        aliases=aliases,
    )
    # No later call read it: the vocabulary says what the field holds.
    assert effects(found, 0) == [("reservation_id", "output.reservations[]")]


def test_caps_bound_the_work_on_a_hostile_trace(monkeypatch):
    big = {f"k{n}": f"value-{n:06d}" for n in range(dataflow.MAX_VALUES + 500)}
    found = trace_reconstruct([call("dump", {}, big), call("use", {"x": "value-000001"})])
    assert "values" in found.capped
    assert flows(found, 1) == [("x", "x", "dump output.k1")]

    deep: dict = {"id": "deep-value-1"}
    for _ in range(dataflow.MAX_DEPTH + 5):
        deep = {"inner": deep}
    assert "depth" in trace_reconstruct([call("deep", {}, deep)]).capped

    monkeypatch.setattr(dataflow, "MAX_LEAVES", 100)
    wide = trace_reconstruct([call("wide", {}, [f"item-{n:05d}" for n in range(10_000)])])
    assert "leaves" in wide.capped


def test_a_variable_present_before_failures_and_successes_alike_is_no_precondition():
    aggregate = new_aggregate()
    for run in range(12):
        steps = [
            call("get_user", {"user_id": f"usr_{run:04d}"}, {"plan_id": f"plan_{run:04d}"}),
            call("upgrade", {"user_id": f"usr_{run:04d}", "tier": "gold"},
                 status="error" if run % 3 == 0 else "success"),
        ]  # fmt: skip
        for step, flow in zip(steps, trace_reconstruct(steps).steps, strict=True):
            if step["tool"] == "upgrade":
                aggregate_add(aggregate, {**step, "trace_id": f"r{run}", "dataflow": flow})
    inferred = infer_contract(
        name="upgrade", description="", input_schema=None, aggregate=aggregate
    )
    # user_id flows into every successful call: a requirement; plan_id is there before the
    # failures too, and never flows: not a precondition.
    assert inferred["requires"] == ["user_id"]
    assert inferred["evidence"]["gated"] == []


def test_failures_that_lack_a_variable_still_gate_it():
    aggregate = new_aggregate()
    for run in range(12):
        logged_in = run % 3 != 0
        token = f"tok-{run:04d}"
        steps = [
            call("login", {"account": f"acct-{run:04d}"}, {"session_token": token} if logged_in
                 else None, status="success" if logged_in else "error"),
            *([call("read_inbox", {"session_token": token}, {"unread": 3})] if logged_in else []),
            call("send", {"body": f"message number {run}"},
                 status="success" if logged_in else "error"),
        ]  # fmt: skip
        for step, flow in zip(steps, trace_reconstruct(steps).steps, strict=True):
            if step["tool"] == "send":
                aggregate_add(aggregate, {**step, "trace_id": f"r{run}", "dataflow": flow})
    # The token never flows into send's arguments, but every failure lacked it.
    inferred = infer_contract(name="send", description="", input_schema=None, aggregate=aggregate)
    assert inferred["evidence"]["gated"] == ["session_token"]
    assert inferred["requires"] == ["session_token"]


def test_a_small_id_flows_between_id_named_fields_only():
    found = trace_reconstruct(
        [
            call("post_tweet", {"content": "Tires checked!"}, {"id": 10, "likes": 3}),
            call("comment", {"tweet_id": 10, "count": 3}),
            call("set_volume", {"level": 10}),
        ]
    )
    assert flows(found, 1) == [("tweet_id", "tweet_id", "post_tweet output.id")]
    assert effects(found, 0) == [("tweet_id", "output.id")]
    assert flows(found, 2) == []  # 10 in a field not named as an id is just a number


def test_an_everyday_word_the_user_quoted_flows_and_an_unquoted_one_does_not():
    said = ["Move 'final_report.pdf' within document directory to 'temp' in document."]
    found = trace_reconstruct(
        [
            call("cd", {"folder": "document"}, {"cwd": "document"}, user_texts=said),
            call("mkdir", {"dir_name": "temp"}, user_texts=said),
            call("mv", {"source": "final_report.pdf", "destination": "temp"}, user_texts=said),
        ]
    )
    assert flows(found, 0) == []
    assert flows(found, 1) == [("dir_name", "dir_name", "user message")]
    assert ("source", "source", "user message") in flows(found, 2)
    # An apostrophe inside a word opens no quote.
    kelly = trace_reconstruct(
        [
            call(
                "cat",
                {"file_name": "report"},
                user_texts=["Find Kelly's test report now, it's late"],
            )
        ]
    )
    assert flows(kelly, 0) == []


def test_a_name_the_user_capitalised_inside_a_sentence_flows_however_everyday():
    said = ["Please verify me, my first name is Michael and my last name Thompson. Fly soon."]
    found = trace_reconstruct(
        [
            call("verify", {"first_name": "Michael", "last_name": "Thompson"}, user_texts=said),
            call("pick", {"first": "Please", "mode": "START", "day": "fly"}, user_texts=said),
        ]
    )
    assert flows(found, 0) == [
        ("first_name", "first_name", "user message"),
        ("last_name", "last_name", "user message"),
    ]
    # A capital that starts a sentence says nothing; nor do capitals (a setting as often as a
    # code) or a lowercase word.
    assert flows(found, 1) == []
    assert (
        trace_reconstruct(
            [call("pick", {"mode": "START"}, user_texts=["Start it in START mode"])]
        ).steps[0]["flows"]
        == []
    )


def test_a_small_number_flows_only_from_the_users_words():
    said = ["Convert 30 gallons to liters, then buy 150 shares at priority 5."]
    found = trace_reconstruct(
        [
            call("gallon_to_liter", {"gallon": 30.0}, {"liter": 113.56}, user_texts=said),
            call("place_order", {"amount": 150, "priority": 5, "price": 113}, user_texts=said),
            call("fill", {"fuel_amount": 30}, {"level": 150}),
        ]
    )
    assert flows(found, 0) == [("gallon", "gallon", "user message")]
    # One digit says nothing; a number an output showed, or another call took, flows nowhere.
    assert flows(found, 1) == [("amount", "amount", "user message")]
    assert flows(found, 2) == [("fuel_amount", "fuel_amount", "user message")]
    assert effects(found, 0) == [] and effects(found, 2) == []
    unsaid = trace_reconstruct([call("get", {}, {"count": 30}), call("fill", {"fuel_amount": 30})])
    assert flows(unsaid, 1) == []


def test_a_sentence_is_not_a_value_of_a_variable_that_only_flowed_by_its_fields_name():
    found = trace_reconstruct(
        [
            call("send", {"message": "See you at the Q3 review"},
                 user_texts=["Send 'See you at the Q3 review' to Ann"]),
            call("login", {"user_id": "USR001"}, {"message": "User USR001 logged in today."}),
        ]
    )  # fmt: skip
    assert flows(found, 0) == [("message", "message", "user message")]
    assert effects(found, 1) == []


def test_an_output_field_named_as_one_of_the_calls_arguments_is_a_report_not_an_effect():
    vocabulary = {"amount": "amount", "price": "price", "order_id": "order_id"}
    found = trace_reconstruct(
        [
            call("place_order", {"amount": 100, "price": 700, "symbol": "TSLA"},
                 {"amount": 100, "price": 700.0, "order_id": 12446, "status": "Pending"}),
        ],
        aliases=vocabulary,
    )  # fmt: skip
    assert effects(found, 0) == [("order_id", "output.order_id")]


def test_an_everyday_word_listed_in_an_output_names_something():
    found = trace_reconstruct(
        [
            call("ls", {}, {"current_directory_content": ["document", "notes.txt"]}),
            call("cd", {"folder": "document"}, {"cwd": "document"}),
        ]
    )
    assert flows(found, 1) == [("folder", "folder", "ls output.current_directory_content[]")]
    assert effects(found, 0) == [("folder", "output.current_directory_content[]")]
    # The same word in a field that is not a listing still says nothing by itself.
    status = trace_reconstruct(
        [call("get", {}, {"status": "document"}), call("cd", {"folder": "document"})]
    )
    assert flows(status, 1) == []


# By its field's name alone (no value of it flowed), an output value is an effect only where a
# name can say so; a declared vocabulary and an empty one then learn the same.
def both(steps: list[dict], vocabulary: dict[str, str]) -> tuple:
    """The reconstruction with the vocabulary declared, and with none."""
    return trace_reconstruct(steps, aliases=vocabulary), trace_reconstruct(steps)


def test_an_objects_keys_are_not_values_of_the_field_it_is_under():
    vocabulary = {"message": "message", "receiver_id": "receiver_id"}
    steps = [
        call("send_message", {"receiver_id": "USR002", "message": "See you at the Q3 review"},
             user_texts=["Send 'See you at the Q3 review' to USR002"]),
        call("view_messages_sent", {}, {"messages": {"USR003": ["Please review the document."],
                                                     "USR004": [["Got the snacks!"]]}}),
    ]  # fmt: skip
    for found in both(steps, vocabulary):
        assert effects(found, 1) == []
    # A key that a later call uses is still found by its value.
    used = trace_reconstruct([*steps, call("delete_message", {"receiver_id": "USR003"})])
    assert effects(used, 1) == [("receiver_id", "output.messages{}")]


def test_a_number_is_a_variables_value_by_its_fields_name_only_in_an_id_named_field():
    vocabulary = {"liter": "liter", "gallon": "gallon", "order_id": "order_id"}
    steps = [
        call("gallon_to_liter", {"gallon": 30}, {"liter": 113.5623}),
        call("liter_to_gallon", {"liter": 20}, {"gallon": 5.28}),
        call("distance", {"city_a": "94016"}, {"distance": 980.0}),
        call("place_order", {"symbol": "TSLA"}, {"order_id": 12446}),
    ]
    declared, empty = both(steps, vocabulary)
    assert [effects(declared, n) for n in range(3)] == [[], [], []]
    assert effects(declared, 3) == [("order_id", "output.order_id")]
    assert [effects(empty, n) for n in range(4)] == [[], [], [], []]
    # A number that a later call takes is found by its value whatever its field: a
    # requirement of the taker; the producer's effect only under its own field's name.
    flowing = trace_reconstruct([steps[0], call("fill_tank", {"fuel_amount": 113.5623})])
    assert flows(flowing, 1) == [("fuel_amount", "fuel_amount", "gallon_to_liter output.liter")]
    assert effects(flowing, 0) == []
    same = trace_reconstruct([steps[0], call("pour", {"liter": 113.5623})])
    assert effects(same, 0) == [("liter", "output.liter")]


def test_a_quantity_passed_on_under_another_name_is_no_effect_and_a_code_is():
    found = trace_reconstruct(
        [
            call("compute_exchange_rate", {"value": 15400.0}, {"exchanged_value": 22000.0}),
            call("set_budget_limit", {"budget_limit": 22000.0}),
            call("get_zipcode", {"city": "Rivermist"}, {"zipcode": "83214"}),
            call("estimate_distance", {"cityA": "83214"}),
            call("get_order", {"order_id": 12446}),
        ]
    )
    assert flows(found, 1) == [
        ("budget_limit", "budget_limit", "compute_exchange_rate output.exchanged_value")
    ]
    assert effects(found, 0) == []
    # A string of digits is a code (a zip code, a card number), not a quantity.
    assert effects(found, 2) == [("city_a", "output.zipcode")]


def test_a_small_number_flows_from_an_outputs_field_of_the_same_name():
    found = trace_reconstruct(
        [
            call("estimate_distance", {"cityA": "94016"}, {"distance": 980.0}),
            call("logarithm", {"value": 980.0, "base": 10}),
            call("estimate_drive_feasibility", {"distance": 980.0}),
            call("set_budget_limit", {"budget_limit": 500}, {"budget_limit": 500}),
            call("book", {"budget_limit": 500}),
        ]
    )
    assert flows(found, 1) == []  # another name: the number alone says nothing
    assert flows(found, 2) == [("distance", "distance", "estimate_distance output.distance")]
    assert effects(found, 0) == [("distance", "output.distance")]
    # An output repeating the call's own number (read back in its field) is an echo.
    assert effects(found, 3) == [] and flows(found, 4) == []


def test_a_status_message_beside_a_flag_is_no_effect_and_a_text_answer_is():
    vocabulary = {"message": "message", "email_summary": "email_summary"}
    steps = [
        call("message_login", {"user_id": "USR001"},
             {"login_status": True, "message": "User 'USR001' logged in successfully."}),
        call("summarize_email", {"email_body": "Invoice 77 is due on Friday, please pay."},
             {"email_summary": "An invoice due on Friday."}),
        call("view", {}, {"thread": {"notes": [{"message": "Meeting moved to noon."}]}}),
    ]  # fmt: skip
    found = trace_reconstruct(steps, aliases=vocabulary)
    assert effects(found, 0) == []
    # Text answering the call, in a field the vocabulary names: the answer is its value.
    assert effects(found, 1) == [("email_summary", "output.email_summary")]
    # Text deep in a record is not the answer.
    assert effects(found, 2) == []


def test_a_reports_fields_are_effects_only_for_names_that_flowed_in_the_trace():
    names = ("username", "flight_number", "reservation_id", "content", "order_updated")
    vocabulary = {name: name for name in names}
    post = call(
        "post_tweet",
        {"content": "Quarterly numbers are out"},
        {"id": 2, "content": "Quarterly numbers are out", "username": "tech_guru"},
    )
    declared, empty = both([post], vocabulary)
    # The tweet repeats what it was given: its author is a report, not a new username.
    assert effects(declared, 0) == effects(empty, 0) == []
    # A name that flowed in the trace still names a report's field: the flights of a
    # reservation read by its id are flight numbers.
    read = [
        call("get_reservation", {"reservation_id": "NO6JO3"},
             {"reservation_id": "NO6JO3", "flights": [{"flight_number": "HAT170"}]}),
        call("search", {"date": "2024-05-20"}, [{"flight_number": "HAT300"}]),
        call("update", {"reservation_id": "NO6JO3", "flights": [{"flight_number": "HAT300"}]}),
    ]  # fmt: skip
    for found in both(read, vocabulary):
        assert effects(found, 0) == [("flight_number", "output.flights[].flight_number")]
    # A flag the vocabulary names is a report's outcome.
    flagged = trace_reconstruct(
        [call("update_order", {"order_id": "#W2378156"},
              {"order_id": "#W2378156", "order_updated": True})],
        aliases=vocabulary,
    )  # fmt: skip
    assert effects(flagged, 0) == [("order_updated", "output.order_updated")]


def test_a_state_is_judged_by_values_an_echo_brings_nothing_and_a_new_variable_is_brought():
    found = trace_reconstruct(
        [
            call("set_budget_limit", {"budget_limit": 5000.0}, {"budget_limit": 5000.0},
                 state_before={}, state_after={"budget_limit": 5000.0}),
            call("remind", {"note": "call Ann"}, None, state_before={},
                 state_after={"budget_limit": 5000.0}),
            call("book", {"flight": "HAT170"}, None, state_before={"budget_limit": 5000.0},
                 state_after={"budget_limit": 5000.0, "booking_id": "BK-3426812"}),
        ]
    )  # fmt: skip
    # The call's own argument, repeated in its state: an echo.
    assert effects(found, 0) == []
    # Absent before this call and present after it: the runtime says it brought it.
    assert effects(found, 1) == [("budget_limit", "state.budget_limit")]
    assert effects(found, 2) == [("booking_id", "state.booking_id")]


def test_a_state_repeating_the_outputs_fields_says_no_more_than_their_names():
    # What the OTLP receiver assembles from a declared vocabulary: each result field the
    # vocabulary names is added to the state after.
    vocabulary = {"message": "message", "username": "username", "liter": "liter",
                  "event_details": "event_details"}  # fmt: skip
    outputs = [
        ("message_login", {"user_id": "USR001"},
         {"login_status": True, "message": "User 'USR001' logged in successfully."}),
        ("post_tweet", {"content": "Quarterly numbers are out"},
         {"content": "Quarterly numbers are out", "username": "tech_guru"}),
        ("gallon_to_liter", {"gallon": 30}, {"liter": 113.5623}),
        ("get_event", {"event_id": "evt_9"}, {"event_details": {"title": "Board prep"}}),
    ]  # fmt: skip
    steps, state = [], {}
    for tool, args, output in outputs:
        after = {**state, **{vocabulary[k]: v for k, v in output.items() if k in vocabulary}}
        steps.append(call(tool, args, output, state_before=state, state_after=after))
        state = after
    found = trace_reconstruct(steps, aliases=vocabulary)
    assert [effects(found, n) for n in range(3)] == [[], [], []]
    # What a name can say, the state still says: an object the vocabulary names.
    assert effects(found, 3) == [("event_details", "state.event_details")]


def test_a_step_names_the_output_paths_that_brought_values_new_to_its_trace():
    found = trace_reconstruct(
        [
            call("search", {"origin": "JFK"},
                 {"flights": [{"flight_number": "HAT136", "note": "a quiet evening flight"}]}),
            call("search", {"origin": "JFK"},
                 {"flights": [{"flight_number": "HAT136"}, {"flight_number": "HAT170"}]}),
            call("search", {"origin": "JFK"}, {"flights": [{"flight_number": "HAT170"}]}),
            call("get_flight", {"flight_number": "HAT170"}, {"flight_number": "HAT170"}),
        ]
    )  # fmt: skip
    # Text is no value that names something; a value known before, or an echo, is not new.
    assert [step["new_paths"] for step in found.steps] == [
        ["output.flights[].flight_number"],
        ["output.flights[].flight_number"],
        [],
        [],
    ]
