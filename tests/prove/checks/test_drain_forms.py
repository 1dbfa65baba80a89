"""The form of a finding from what the drain saw of its subscription (pubsubguard.validation.checks.verdict.drain_forms),
and the scenario that explains a finding of that form."""

from __future__ import annotations

from support.drain_evidence import T


def test_a_dead_letter_missing_message_of_a_stopped_backoff_takes_its_form_and_is_explained_by_the_dead_letter_scenario():
    from pubsubguard.validation.conformance.explains import explained_by
    from pubsubguard.validation.checks.verdict import drain_forms

    drain = {"after_backoff_stop": {"e": {"messages": 3, "poison": 1, "poison_messages": [["k", 4]], "owed_us": T,
                                          "timer_ran_after": 0}}}
    findings = [{"kind": "dead_letter_missing", "subscription": "e", "key": "k", "seq": 4},
                {"kind": "dead_letter_missing", "subscription": "e", "key": "k", "seq": 5},
                {"kind": "dead_letter_missing", "subscription": "o", "key": "k", "seq": 4},
                {"kind": "lost", "subscription": "e", "key": "k", "seq": 4}]
    assert [f.get("form") for f in drain_forms(findings, drain)] == ["after_backoff_stop", None, None, None]
    stopped = drain_forms(findings, drain)[0]
    assert explained_by(stopped, {"dead-letter-after-late-ack": "violated"}) == ["dead-letter-after-late-ack"]
    assert explained_by(stopped, {"dead-letter-after-late-ack": "holds"}) == []
    assert explained_by(stopped, {"redelivery-after-late-ack": "violated"}) == []
    assert explained_by(findings[1], {"dead-letter-after-late-ack": "violated"}) == []


def test_a_lost_message_takes_the_form_of_what_the_drain_saw_of_its_subscription():
    from pubsubguard.validation.conformance.explains import explained_by
    from pubsubguard.validation.checks.verdict import drain_forms

    drain = {"stalled": {"o": {"since_us": 100}}, "after_stream_reset": {"e": {"keys": ["k1"], "reset_us": 50}}}
    findings = [
        {"kind": "lost", "subscription": "o", "key": "k0", "times": {"published_us": 150}},  # after the stall
        {"kind": "lost", "subscription": "o", "key": "k0", "times": {"published_us": 90}},  # before it: still there
        {"kind": "lost", "subscription": "e", "key": "k1", "times": {"published_us": 10}},  # a silent key
        {"kind": "lost", "subscription": "e", "key": "k2", "times": {"published_us": 10}},
        {"kind": "out_of_order", "subscription": "o", "key": "k0", "form": "skip", "times": {"published_us": 150}},
    ]
    forms = [f.get("form") for f in drain_forms(findings, drain)]
    assert forms == ["stalled", "stalled", "after_stream_reset", None, "skip"]
    assert all(f.get("severity") is None for f in drain_forms(findings, drain))  # nothing else is touched
    violated = {"ordered-dead-letter-keeps-delivering": "violated", "ordered-stream-reset-keeps-delivering": "violated"}
    assert explained_by({"kind": "lost", "form": "stalled"}, violated, True) == ["ordered-dead-letter-keeps-delivering"]
    assert explained_by({"kind": "lost", "form": None}, violated, True) == []
    assert explained_by({"kind": "lost", "form": "stalled"}, {"ordered-dead-letter-keeps-delivering": "holds"}, True) == []
