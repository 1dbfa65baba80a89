"""What explains the messages the drain left unsettled (pubsubguard.validation.conformance.explains): each form the
drain told apart (poison, stalled, after a stall, silent keys, stopped redeliveries, cut at the ceiling, held by
the probe's client) is a cause of its own, explained only by the scenario violated in the same run."""

from __future__ import annotations

from support.drain_evidence import T


def test_unsettled_poison_is_a_cause_of_its_own_explained_like_dead_letter_missing():
    from pubsubguard.validation.conformance.explains import explanations

    def result(scenario_result: str) -> dict:
        return {"target": "emulator", "parameters": {"drain": {"ended": "stuck", "unsettled": {"o": 5},
                                                               "unsettled_poison": {"o": 4}}},
                "conformance": {"scenarios": [{"id": "dead-letter-ordered-after-max-attempts",
                                               "result": scenario_result}]},
                "subscriptions": {"o": {"declared": {"ordering": True}, "figures": {},
                                        "guarantees": {"completeness": "inconclusive"}}}}

    causes = explanations(result("violated"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
        (4, {"poison": 4}, ["dead-letter-ordered-after-max-attempts"]), (1, {}, [])]
    causes = explanations(result("holds"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["explained_by"]) for c in causes] == [(4, []), (1, [])]


def test_stalled_messages_are_a_cause_of_their_own_explained_only_by_the_violated_scenario():
    from pubsubguard.validation.conformance.explains import explanations

    def result(scenario_result: str, stalled: dict) -> dict:
        return {"target": "emulator",
                "parameters": {"drain": {"ended": "stuck", "unsettled": {"o": 7}, "unsettled_poison": {"o": 4},
                                         "stalled": stalled}},
                "conformance": {"scenarios": [{"id": "dead-letter-ordered-after-max-attempts", "result": "violated"},
                                              {"id": "ordered-dead-letter-keeps-delivering", "result": scenario_result}]},
                "subscriptions": {"o": {"declared": {"ordering": True}, "figures": {},
                                        "guarantees": {"completeness": "inconclusive"}}}}

    stall = {"o": {"since_us": T, "key": "k", "seq": 1, "attempt": 5, "max_delivery_attempts": 5,
                   "last_delivery_us": T, "unsettled": 2}}
    causes = explanations(result("violated", stall), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
        (4, {"poison": 4}, ["dead-letter-ordered-after-max-attempts"]),
        (2, {"stalled": 2}, ["ordered-dead-letter-keeps-delivering"]), (1, {}, [])]
    causes = explanations(result("holds", stall), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
        (4, {"poison": 4}, ["dead-letter-ordered-after-max-attempts"]), (2, {"stalled": 2}, []), (1, {}, [])]
    causes = explanations(result("violated", {}), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["explained_by"]) for c in causes] == [(4, ["dead-letter-ordered-after-max-attempts"]),
                                                                 (3, [])]


def test_after_stall_messages_are_their_own_cause_before_the_poison_ones():
    from pubsubguard.validation.conformance.explains import explanations

    def result(scenario_result: str) -> dict:
        return {"target": "emulator",
                "parameters": {"drain": {"ended": "timeout", "unsettled": {"e": 7}, "unsettled_poison": {"e": 5},
                                         "stalled": {}, "after_stall": {"e": {"since_us": T, "messages": 6, "poison": 4,
                                                                              "deliveries": 2, "last_delivery_us": T}}}},
                "conformance": {"scenarios": [{"id": "ordered-dead-letter-spares-other-subscriptions",
                                               "result": scenario_result},
                                              {"id": "dead-letter-after-max-attempts", "result": "holds"}]},
                "subscriptions": {"e": {"declared": {"ordering": False}, "figures": {},
                                        "guarantees": {"completeness": "inconclusive"}}}}

    causes = explanations(result("violated"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
        (6, {"after_stall": 6}, ["ordered-dead-letter-spares-other-subscriptions"]), (1, {"poison": 1}, [])]
    causes = explanations(result("holds"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["explained_by"]) for c in causes] == [(6, []), (1, [])]


def test_an_unordered_subscription_is_explained_by_the_unordered_reset_scenario_only():
    from pubsubguard.validation.conformance.explains import explained_by

    finding = {"kind": "lost", "form": "after_stream_reset", "subscription": "o"}
    both = {"ordered-stream-reset-keeps-delivering": "violated", "stream-reset-keeps-delivering": "violated"}
    assert explained_by(finding, both, ordered=False) == ["stream-reset-keeps-delivering"]
    assert explained_by(finding, both, ordered=True) == ["ordered-stream-reset-keeps-delivering",
                                                         "stream-reset-keeps-delivering"]
    assert explained_by(finding, {**both, "stream-reset-keeps-delivering": "holds"}, ordered=False) == []
    assert explained_by({**finding, "form": None}, both, ordered=False) == []


def test_messages_on_silent_keys_are_explained_only_by_the_violated_reset_scenario():
    from pubsubguard.validation.conformance.explains import explanations

    def result(scenario_result: str) -> dict:
        return {"target": "emulator",
                "parameters": {"drain": {"ended": "timeout", "unsettled": {"o": 90}, "unsettled_poison": {},
                                         "stalled": {}, "after_stall": {},
                                         "after_stream_reset": {"o": {"reset_us": T, "keys": ["a"], "messages": 88}}}},
                "conformance": {"scenarios": [{"id": "ordered-stream-reset-keeps-delivering", "result": scenario_result}]},
                "subscriptions": {"o": {"declared": {"ordering": True}, "figures": {},
                                        "guarantees": {"completeness": "inconclusive"}}}}

    causes = explanations(result("violated"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
        (88, {"after_stream_reset": 88}, ["ordered-stream-reset-keeps-delivering"]), (2, {}, [])]
    causes = explanations(result("holds"), [])["guarantees"][0]["causes"]
    assert [(c["count"], c["explained_by"]) for c in causes] == [(88, []), (2, [])]


def test_redeliveries_the_target_stopped_are_explained_only_by_a_violated_backoff_scenario_on_unordered_ones():
    from pubsubguard.validation.conformance.explains import explanations

    def result(scenario: str, scenario_result: str, ordering: bool = False) -> dict:
        return {"target": "emulator",
                "parameters": {"drain": {"ended": "stuck", "unsettled": {"e": 30}, "unsettled_poison": {"e": 6},
                                         "stalled": {}, "after_stall": {}, "after_stream_reset": {},
                                         "after_backoff_stop": {"e": {"messages": 25, "poison": 2,
                                                                      "poison_messages": [["k", 1], ["k", 2]],
                                                                      "owed_us": T, "timer_ran_after": 0}}}},
                "conformance": {"scenarios": [{"id": scenario, "result": scenario_result}]},
                "subscriptions": {"e": {"declared": {"ordering": ordering}, "figures": {},
                                        "guarantees": {"completeness": "inconclusive"}}}}

    for scenario in ("redelivery-after-repeated-expiry", "redelivery-after-late-ack"):
        causes = explanations(result(scenario, "violated"), [])["guarantees"][0]["causes"]
        # the poison ones among the 25 are not counted again as poison
        assert [(c["count"], c["forms"], c["explained_by"]) for c in causes] == [
            (25, {"after_backoff_stop": 25}, [scenario]), (4, {"poison": 4}, []), (1, {}, [])]
        causes = explanations(result(scenario, "holds"), [])["guarantees"][0]["causes"]
        assert [(c["count"], c["explained_by"]) for c in causes] == [(25, []), (4, []), (1, [])]
        causes = explanations(result(scenario, "violated", ordering=True), [])["guarantees"][0]["causes"]
        assert causes[0]["explained_by"] == []
    # the dead-letter scenario governs dead_letter_missing, not unsettled messages
    causes = explanations(result("dead-letter-after-late-ack", "violated"), [])["guarantees"][0]["causes"]
    assert causes[0]["explained_by"] == []


def test_never_delivered_messages_at_the_ceiling_are_an_unsettled_cause_never_lost():
    from pubsubguard.validation.conformance.explains import explanations

    result = {"target": "emulator", "conformance": None,
              "parameters": {"drain": {"ended": "ceiling", "unsettled": {"s": 120}, "unsettled_poison": {},
                                       "stalled": {}, "after_stall": {}, "after_stream_reset": {},
                                       "unproven": ["s"], "cut": {"s": 100}}},
              "subscriptions": {"s": {"declared": {"ordering": False}, "guarantees": {"completeness": "inconclusive"},
                                      "figures": {"published": 1000, "settled": 880}}}}
    causes = explanations(result, [])["guarantees"][0]["causes"]
    assert [(c["kind"], c["forms"], c["count"]) for c in causes] == [("unsettled", {"cut": 100}, 100),
                                                                      ("unsettled", {}, 20)]
    assert "--drain-timeout" in causes[0]["action"] and "lost" in causes[0]["action"]


def test_what_the_probes_client_held_on_a_kept_stream_is_caused_by_the_client_never_lost():
    from pubsubguard.validation.conformance.explains import explanations

    held = {"leased": 1809, "on_hold": 676, "paused_tasks": ["sub-1"], "tasks": ["sub-1", "sub-2"]}
    result = {"target": "emulator", "conformance": None,
              "parameters": {"drain": {"ended": "stuck", "unsettled": {"s": 300}, "unsettled_poison": {},
                                       "stalled": {}, "after_stream_reset": {}, "unproven": ["s"], "cut": {},
                                       "after_stall": {"s": {"messages": 100, "poison": 0}},
                                       "held_in_client": {"s": held}}},
              "subscriptions": {"s": {"declared": {"ordering": True}, "guarantees": {"completeness": "inconclusive"},
                                      "figures": {"published": 1000, "settled": 700}}}}
    causes = explanations(result, [])["guarantees"][0]["causes"]
    # the earlier form takes its share first; the rest is the client's, caused by it, not explained by the target
    assert [(c["forms"], c["count"]) for c in causes] == [({"after_stall": 100}, 100), ({"held_in_client": 200}, 200)]
    assert causes[1]["caused_by"] == ["the probe's client library (1,809 messages leased, 676 behind their ordering "
                                      "key, the stream paused by its flow control)"]
    assert causes[1]["explained_by"] == []
