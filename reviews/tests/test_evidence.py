"""The evidence summary at the top of a ticket. Pure: runs without Django or a database."""

from reviews.evidence import evidence_summary

EVIDENCE = {
    "base_version": 1,
    "traces_since_version": 121,
    "support": 121,
    "applications": {"operator": 21, "assistant": 100},
    "drift": [
        {
            "field": "requires",
            "added": ["approval_code"],
            "removed": [],
            "detail": "requires was ['charge_id']",
            "counts": {"approval_code": 109},
            "total": 109,
            "total_of": "successful calls",
            "example_trace_ids": ["run-1", "run-2"],
            "example_runs": [{"trace_id": "run-1", "application_id": 7}],
        },
        {"field": "produces", "added": [], "removed": ["refund_id"], "detail": "gone"},
        {
            "field": "latency_p95",
            "detail": "p95 grew",
            "baseline": 1100,
            "observed": 2400,
            "window_days": 7,
        },
    ],  # fmt: skip
    "inferred": {"cost": {"error_rate": 0.099, "latency_ms_p50": 380, "latency_ms_p95": 1336}},
    "unknown_variables": {"produces": ["refund_receipt_url"]},
    "risk_evidence": [{"kind": "verb", "word": "refund"}],
}


def test_it_says_what_changed_in_words():
    items = evidence_summary(EVIDENCE)["items"]
    assert items[0]["headline"] == "Now needs approval_code in the state before it runs"
    assert items[1]["headline"] == "No longer adds refund_id"
    # A field it has no words for still reads: its detail.
    assert items[2]["headline"] == "latency_p95: p95 grew"


def test_it_counts_in_how_many_of_how_many_traces():
    item = evidence_summary(EVIDENCE)["items"][0]
    assert item["counts"] == [
        {"name": "approval_code", "count": 109, "total": 109, "share": "100 %"}
    ]
    assert item["total_of"] == "successful calls"


def test_it_prefers_resolved_runs_and_falls_back_to_bare_trace_ids():
    items = evidence_summary(EVIDENCE)["items"]
    assert items[0]["examples"] == [{"trace_id": "run-1", "application_id": 7, "resolved": True}]
    bare = evidence_summary({"drift": [{"field": "requires", "example_trace_ids": ["r9"]}]})
    assert bare["items"][0]["examples"] == [
        {"trace_id": "r9", "application_id": None, "resolved": False}
    ]


def test_it_puts_the_approved_figures_against_the_observed_ones():
    figures = evidence_summary(
        EVIDENCE, base_cost={"error_rate": 0.02, "latency_ms_p50": 380, "latency_ms_p95": 1100}
    )["figures"]
    assert [(f["label"], f["baseline"], f["now"], f["worse"]) for f in figures] == [
        ("error rate", "2.0 %", "9.9 %", True),
        ("latency p50", "380 ms", "380 ms", False),
        ("latency p95", "1,100 ms", "1,336 ms", True),
    ]


def test_it_shows_keys_it_does_not_know_instead_of_hiding_them():
    summary = evidence_summary(EVIDENCE)
    assert summary["items"][2]["extra"] == [("window_days", "7")]
    assert summary["items"][2]["baseline"] == "1,100" and summary["items"][2]["observed"] == "2,400"
    assert summary["other"] == [("risk_evidence", '[{"kind": "verb", "word": "refund"}]')]
    assert summary["unknown_variables"] == [("produces", "refund_receipt_url")]


def test_it_orders_applications_by_traces_and_survives_junk():
    assert evidence_summary(EVIDENCE)["applications"] == [("assistant", 100), ("operator", 21)]
    junk = evidence_summary({"drift": ["nope", {"field": 3, "counts": "x", "total": True}],
                             "applications": [1], "inferred": "x"})  # fmt: skip
    assert junk["items"][0]["counts"] == [] and junk["items"][0]["total"] is None
    assert junk["applications"] == [] and junk["figures"] == []


def test_it_bounds_long_values():
    summary = evidence_summary({"note": "x" * 10_000})
    assert len(summary["other"][0][1]) == 300


def test_a_figure_measured_again_within_noise_is_not_worse():
    evidence = {"inferred": {"cost": {"latency_ms_p50": 379.9, "error_rate": 0.021}}}
    figures = evidence_summary(evidence, base_cost={"latency_ms_p50": 380, "error_rate": 0.02})
    assert [figure["worse"] for figure in figures["figures"]] == [False, False]
    slower = {"inferred": {"cost": {"latency_ms_p50": 500}}}
    assert evidence_summary(slower, base_cost={"latency_ms_p50": 380})["figures"][0]["worse"]


def test_it_reads_when_the_calls_were_first_and_last_seen():
    seen = {
        "calls_seen": {"first": "2026-11-18T09:30:00+00:00", "last": "2026-11-23T14:02:00+00:00"}
    }
    summary = evidence_summary(seen)
    assert (summary["first_seen"].day, summary["last_seen"].day) == (18, 23)
    assert all(key != "calls_seen" for key, _ in summary["other"])
    for broken in ({"first": "yesterday"}, {"first": 5}, "x", {"first": "2026-11-18T09:30:00"}):
        assert evidence_summary({"calls_seen": broken})["first_seen"] is None


def test_an_effects_route_shows_the_calls_that_brought_new_values_there():
    dataflow = {"produces": {"ticket_id": [
        {"route": "output.ticket", "traces": 3, "new_values": 12, "examples": ["run-0"]}
    ]}}  # fmt: skip
    rows = evidence_summary({"dataflow": dataflow})["dataflow"]
    assert [(row["route"], row["traces"], row["new_values"]) for row in rows] == [
        ("output.ticket", 3, 12)
    ]
