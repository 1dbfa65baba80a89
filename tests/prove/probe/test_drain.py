"""The drain's measure of progress (pubsubguard.validation.probe.drain.EvidenceTally): what is settled, and which
unsettled messages are provably stuck -- nothing recorded for one ack deadline (+ the retry backoff
after a nack) + a grace since their last event -- and which are still in play."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pubsubguard.validation.driver import ProbeDriver
from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA
from pubsubguard.core.errors import VerifyError
from pubsubguard.validation.probe.clients import PUBLISHING_PREFIX
from pubsubguard.validation.probe.drain import EvidenceTally

S = 1_000_000
T = 1_700_000_000 * S
RUN = "run1"


def publish(seq: int) -> dict:
    return {"run_id": RUN, "topic": "t", "key": "k", "seq": seq, "message_id": f"m{seq}", "poison": False, "status": "ok",
            "error": None, "publish_time_us": T, "publisher_task": "p", "result_time_us": T + 1000}


def delivery(seq: int, at: int, action: str, result: str = "success") -> dict:
    return {"run_id": RUN, "subscription": "s", "kind": "delivery", "message_id": f"m{seq}", "key": "k", "seq": seq,
            "probe_run": RUN, "delivery_attempt": None, "receive_time_us": at, "publish_time_us": T,
            "subscriber_task": "sub-0", "ack_id": "a", "ack_deadline_s": 10, "action": action, "ack_result": result,
            "ack_time_us": at + 1000, "dl_source_delivery_count": None, "dl_source_subscription": None}


def evidence(directory, published: int, rows: list[dict]) -> None:
    """`published` messages seq 0.. and the delivery rows, in the probe's layout."""
    (directory / "publishes").mkdir()
    (directory / "deliveries").mkdir()
    pq.write_table(pa.Table.from_pylist([publish(s) for s in range(published)], schema=PUBLISH_SCHEMA),
                   directory / "publishes" / "part-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=DELIVERY_SCHEMA), directory / "deliveries" / "part-0.parquet")


def test_stuck_only_after_a_deadline_and_backoff_without_news(tmp_path):
    evidence(tmp_path, 4, [delivery(0, T + 1 * S, "ack"),  # settled
                           delivery(1, T + 1 * S, "nack"),  # nacked: redelivery may wait for the 20 s backoff
                           delivery(2, T + 1 * S, "ack", "other")])  # ack failed: redelivery after the 10 s deadline
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 20.0})
    tally.refresh()
    assert tally.done() == 1 and tally.unsettled() == {"s": 3}
    deadline = {"s": 10 * S}
    grace = 5 * S
    # seq 3 never delivered: counted from its publish; seq 2 from its failed ack; seq 1: deadline + backoff
    assert tally.stuck(T + 14 * S, grace, deadline) == {}
    assert tally.stuck(T + 17 * S, grace, deadline) == {"s": 2}  # seqs 2 and 3
    assert tally.stuck(T + 33 * S, grace, deadline) == {"s": 2}  # seq 1 is still within 1 + 10 + 20 + 5 s
    assert tally.stuck(T + 37 * S, grace, deadline) == {"s": 3}
    # news of seq 2 (a redelivery at 20 s) puts it back in play until 20 + 10 + 5 s
    pq.write_table(pa.Table.from_pylist([delivery(2, T + 20 * S, "ack", "other")], schema=DELIVERY_SCHEMA),
                   tmp_path / "deliveries" / "part-1.parquet")
    tally.refresh()
    assert tally.stuck(T + 33 * S, grace, deadline) == {"s": 1}  # seq 3 only


def test_unsettled_outcomes_say_how_the_latest_delivery_ended(tmp_path):
    evidence(tmp_path, 4, [delivery(0, T + 1 * S, "ack"),  # settled
                           delivery(1, T + 1 * S, "ack", "invalid_ack_id"), delivery(1, T + 2 * S, "ack", "other"),
                           delivery(2, T + 1 * S, "expire", "none")])  # 3: no row
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    assert tally.unsettled_outcomes("s") == {"ack: other": 1, "expire: none": 1, "no row yet": 1}


def test_default_drain_timeout_waits_for_the_fault_deadline_not_the_declared_one():
    from pubsubguard.validation.run_setup import default_drain_timeout
    from pubsubguard.validation.probe.twins import TwinSpec

    eod = TwinSpec("p/s1", "p/t", "s1", exactly_once=True, ack_deadline_s=60, retry_max_backoff_s=10)
    push = TwinSpec("p/s2", "p/t", "s2", ack_deadline_s=20, push_endpoint="http://127.0.0.1:1/push")
    drain = TwinSpec("p/d", "p/dl", "d", ack_deadline_s=600, is_dead_letter_drain=True)  # not probed: no say
    # held 10 s (fault deadline) + 2 s margin + 10 s backoff + 30 s slack
    assert default_drain_timeout([eod, drain]) == 52
    # a push twin's held answer waits its own deadline (no ack id to modify)
    assert default_drain_timeout([eod, push, drain]) == 20 + 2 + 10 + 30
    # --fault-deadline declared: the subscription's own
    assert default_drain_timeout([eod, drain], None) == 60 + 2 + 10 + 30


def test_unsettled_poison_counts_only_dead_lettering_subscriptions(tmp_path):
    """Issue 35: the poison messages an ordered dead-lettering subscription never forwarded are told apart from
    the other unsettled ones (only forwarding settles them: the probe nacks them on every delivery)."""
    (tmp_path / "publishes").mkdir()
    (tmp_path / "deliveries").mkdir()
    rows = [{**publish(s), "poison": s in (1, 2)} for s in range(4)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA), tmp_path / "publishes" / "part-0.parquet")
    settled = [delivery(0, T + S, "ack"), delivery(2, T + S, "ack")]  # poison 2 acked (settled), 1 and 3 not
    pq.write_table(pa.Table.from_pylist(settled, schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-0.parquet")
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    assert tally.unsettled() == {"s": 2}
    assert tally.unsettled_poison({"s"}) == {"s": 1}
    assert tally.unsettled_poison(set()) == {}


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


def _stall_evidence(directory, later_delivery_at: int | None, attempts: int = 5) -> EvidenceTally:
    """seq 0 acked; seq 1 poison, nacked on attempts 1..`attempts` (the last at +2 s); seq 2 nacked once at
    +1.5 s and never redelivered; seq 3 never delivered; optionally a delivery of seq 3 at `later_delivery_at`."""
    (directory / "publishes").mkdir()
    (directory / "deliveries").mkdir()
    rows = [{**publish(s), "poison": s == 1} for s in range(4)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA), directory / "publishes" / "part-0.parquet")
    deliveries = [delivery(0, T + S // 2, "ack"), delivery(2, T + 3 * S // 2, "nack")]
    for attempt in range(1, attempts + 1):
        at = T + 2 * S - (attempts - attempt) * S // 10
        deliveries.append({**delivery(1, at - 1000, "nack"), "delivery_attempt": attempt})
    if later_delivery_at is not None:
        deliveries.append(delivery(3, later_delivery_at, "expire", "none"))
    pq.write_table(pa.Table.from_pylist(deliveries, schema=DELIVERY_SCHEMA), directory / "deliveries" / "part-0.parquet")
    tally = EvidenceTally(directory, {"s": "t"}, RUN)
    tally.refresh()
    return tally


def test_a_subscription_silent_after_a_poison_messages_last_attempt_is_stalled(tmp_path):
    """Issue 35: the emulator's ordered dead-lettering subscription delivers nothing more once a message reached
    max_delivery_attempts; the drain tells that apart (the nack, the last delivery, the other unsettled ones)."""
    tally = _stall_evidence(tmp_path, None)
    assert tally.unsettled() == {"s": 3} and tally.unsettled_poison({"s"}) == {"s": 1}
    stalled = tally.stalls({"s": 5}, S)
    assert stalled == {"s": {"since_us": T + 2 * S, "key": "k", "seq": 1, "attempt": 5, "max_delivery_attempts": 5,
                             "last_delivery_us": T + 2 * S - 1000, "on_way_us": 16 * S // 10 - 1000,
                             "target_failures": 0, "unsettled": 2}}  # on its way: the poison's own first delivery took 1.6 s
    assert tally.stalls({}, S) == {}  # not dead-lettering: no poison message's last attempt to stop at


def test_no_stall_when_the_subscription_delivered_afterwards_or_the_poison_had_attempts_left(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    assert _stall_evidence(tmp_path / "a", T + 4 * S).stalls({"s": 5}, S) == {}  # a delivery 2 s after the nack
    assert _stall_evidence(tmp_path / "b", T + 2 * S + S // 2).stalls({"s": 5}, S) != {}  # within the slack
    assert _stall_evidence(tmp_path / "c", None, attempts=4).stalls({"s": 5}, S) == {}  # 4 of 5 attempts


def test_what_was_on_its_way_at_the_last_nack_is_as_long_as_the_latency_just_before(tmp_path):
    """Issue 44: at 50x the emulator's stalled subscription delivered once more 1.2 s after the poison's 5th nack, its
    messages just before having taken 1.24-1.78 s from publish to delivery; a fixed 1 s called it still delivering,
    and its 9,214 unsettled messages were judged lost. What was on its way is bounded by that latency, not a clock."""
    def tally_with(directory, latency: int, later: int) -> EvidenceTally:
        """seq 1 poison, published at +6 s, nacked 5 times from +7 s to +11 s; seq 0, 2, 3 delivered at +8 s, `latency`
        after their publish; seq 4 (published at T) first delivered `later` after the last nack; seq 5 never."""
        directory.mkdir()
        (directory / "publishes").mkdir()
        (directory / "deliveries").mkdir()
        publish_at = {0: 8 * S - latency, 1: 6 * S, 2: 8 * S - latency, 3: 8 * S - latency}
        rows = [{**publish(s), "poison": s == 1, "publish_time_us": T + publish_at.get(s, 0)} for s in range(6)]
        pq.write_table(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA), directory / "publishes" / "part-0.parquet")
        deliveries = [delivery(s, T + 8 * S, "ack") for s in (0, 2, 3)]
        deliveries += [{**delivery(1, T + (6 + attempt) * S - 1000, "nack"), "delivery_attempt": attempt}
                       for attempt in range(1, 6)]
        deliveries.append(delivery(4, T + 11 * S - 1000 + later, "ack"))
        pq.write_table(pa.Table.from_pylist(deliveries, schema=DELIVERY_SCHEMA), directory / "deliveries" / "part-0.parquet")
        tally = EvidenceTally(directory, {"s": "t"}, RUN)
        tally.refresh()
        return tally

    nack = T + 11 * S
    slow = tally_with(tmp_path / "slow", 1_780_000, 1_200_000)  # the 50x run's figures
    assert slow.latency_before_us("s", nack) == 1_780_000
    stall = slow.stalls({"s": 5}, S)["s"]
    assert (stall["since_us"], stall["on_way_us"], stall["unsettled"]) == (nack, 1_780_000, 1)
    # a delivery later than the latency just before was no longer on its way: the subscription still delivered
    assert tally_with(tmp_path / "later", 1_780_000, 2_500_000).stalls({"s": 5}, S) == {}
    # with a fast target the floor stands: 1.2 s after the nack is a delivery the target sent afterwards
    assert tally_with(tmp_path / "fast", 200_000, 1_200_000).stalls({"s": 5}, S) == {}
    # the target's own sign decides where the latency does not: it failed the streams 3 times after the nack and
    # the latest delivery (the emulator's stalled subscription, docs/emulator.md); 2, or failures before that
    # delivery, say nothing
    later = tally_with(tmp_path / "failed", 200_000, 2_500_000)
    assert later.stalls({"s": 5}, S) == {}
    after_last = [nack + 2_500_000 + i * S // 2 for i in (1, 2, 3)]
    stall = later.stalls({"s": 5}, S, {"s": after_last})["s"]
    assert (stall["since_us"], stall["target_failures"]) == (nack, 3)
    assert later.stalls({"s": 5}, S, {"s": after_last[:2]}) == {}
    assert later.stalls({"s": 5}, S, {"s": [nack + S // 2, nack + S, *after_last[:2]]}) == {}
    assert later.stalls({"s": 5}, S, {"other": after_last}) == {}
    # only first deliveries up to the nack count, and only those of the window before it
    assert slow.latency_before_us("s", T + 8 * S - 1) == S - 1000  # the poison's first delivery
    assert slow.latency_before_us("s", T + 30 * S) == 0


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


def test_after_a_stall_other_subscriptions_unsettled_messages_with_later_events_are_told_apart(tmp_path):
    """Issue 35: once one subscription stalled, the emulator serves the others only every 10 s; their unsettled
    messages whose latest event came after the stall are counted apart (poison ones among them)."""
    (tmp_path / "publishes").mkdir()
    (tmp_path / "deliveries").mkdir()
    rows = [{**publish(s), "poison": s == 1} for s in range(5)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA), tmp_path / "publishes" / "part-0.parquet")
    other = [{**delivery(s, at, action), "subscription": "e"} for s, at, action in (
        (0, T + S, "ack"), (1, T + 12 * S, "nack"), (2, T + 12 * S, "nack"), (3, T + S, "nack"), (4, T + 22 * S, "ack"))]
    pq.write_table(pa.Table.from_pylist(other, schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-0.parquet")
    tally = EvidenceTally(tmp_path, {"e": "t", "s": "t"}, RUN)
    tally.refresh()
    assert tally.unsettled()["e"] == 3  # seqs 1, 2 (latest at +12 s) and 3 (latest at +1 s)
    assert tally.after_stall(T + 12 * S, {"s"}) == {"e": {"since_us": T + 12 * S, "until_us": None, "messages": 2,
                                                          "owed_later": 0, "poison": 1, "deliveries": 3,
                                                          "last_delivery_us": T + 22 * S}}
    # seq 3, nacked at +1 s, was owed its next row until +11 s (its 10 s deadline: the expire fault may hold that
    # delivery): after a stall at +2 s
    assert tally.after_stall(T + 2 * S, {"s"})["e"]["messages"] == 3
    assert tally.after_stall(T + 30 * S, {"s"}) == {}  # nothing of theirs came after, nothing was owed after


def test_what_the_target_owed_once_nothing_slowed_it_any_more_is_not_the_stalls(tmp_path):
    """Issue 44: at 50x and 100x the emulator left 234 and 505 messages of orders-exactly-once unsettled, most after
    2 delivery attempts, their redeliveries owed from one to seven minutes after the drain had closed the stalled
    subscription's streams; the stall's slowing (every 10 s while it is read) explained them all. The slowing delays:
    only what the reading could not have seen once the target was no longer slowed -- one serving period (+ grace)
    after the close -- is the stall's; what was owed before the reading ended, and never came, is not."""
    (tmp_path / "publishes").mkdir()
    (tmp_path / "deliveries").mkdir()
    pq.write_table(pa.Table.from_pylist([{**publish(s), "poison": s == 1} for s in range(4)], schema=PUBLISH_SCHEMA),
                   tmp_path / "publishes" / "part-0.parquet")
    # owed (10 s deadline after the nack): seq 1 (poison) and 2 at +22 s, seq 3 at +11 s
    other = [{**delivery(s, at, "nack"), "subscription": "e"} for s, at in ((1, T + 12 * S), (2, T + 12 * S), (3, T + S))]
    pq.write_table(pa.Table.from_pylist(other, schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-0.parquet")
    tally = EvidenceTally(tmp_path, {"e": "t", "s": "t"}, RUN)
    tally.refresh()
    # slowed until +15 s, the reading went on until +40 s: every one was owed, and could have come, before it ended
    late = tally.after_stall(T + 2 * S, {"s"}, T + 15 * S, T + 40 * S)["e"]
    assert (late["until_us"], late["messages"], late["poison"], late["owed_later"]) == (T + 15 * S, 0, 0, 3)
    # the reading ended at +20 s: seq 1 and 2, owed at +22 s, it could not have seen; seq 3 (owed +11 s, slowed to +15 s) it could
    late = tally.after_stall(T + 2 * S, {"s"}, T + 15 * S, T + 20 * S)["e"]
    assert (late["messages"], late["poison"], late["owed_later"]) == (2, 1, 1)
    # a stall whose streams were never closed slowed the target to the end: all three are its
    assert tally.after_stall(T + 2 * S, {"s"}, None, T + 40 * S)["e"]["messages"] == 3
    assert tally.after_stall(T + 12 * S, {"s"}, T + 15 * S, T + 40 * S)["e"] == {
        "since_us": T + 12 * S, "until_us": T + 15 * S, "messages": 0, "owed_later": 2, "poison": 0, "deliveries": 2,
        "last_delivery_us": T + 12 * S}


def test_a_poison_message_nacked_on_a_dead_lettering_subscription_is_owed_one_backoff_later(tmp_path):
    """The probe nacks a poison message at once on every delivery of a dead-lettering subscription, before any
    fault: its next row is owed one retry backoff after the nack, not one ack deadline (+ backoff) -- the drain
    then waited 60 s + 10 s on orders-exactly-once for poison messages the emulator no longer redelivered (main-job
    runs of 130-138 s). Any other nack (or a poison one elsewhere) keeps the deadline: the expire fault may hold
    the next delivery that long before its row is written; a delivery held by the crashing task keeps its own."""
    (tmp_path / "publishes").mkdir()
    (tmp_path / "deliveries").mkdir()
    pq.write_table(pa.Table.from_pylist([{**publish(s), "poison": s in (0, 2)} for s in range(3)], schema=PUBLISH_SCHEMA),
                   tmp_path / "publishes" / "part-0.parquet")
    rows = [delivery(0, T + 1 * S, "nack"),  # poison: owed 1 s + 10 s backoff (+ the nack's 1 ms)
            delivery(1, T + 1 * S, "nack"),  # not poison: the deadline too
            delivery(2, T + 1 * S, "nack"), {**delivery(2, T + 3 * S, "crash", "none"), "ack_time_us": None}]
    pq.write_table(pa.Table.from_pylist(rows, schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-0.parquet")
    deadline = {"s": 10 * S}
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 10.0}, frozenset({"s"}))
    tally.refresh()
    grace = 5 * S
    assert tally.stuck(T + 16 * S, grace, deadline) == {}
    assert tally.stuck(T + 17 * S, grace, deadline) == {"s": 1}  # seq 0 only
    assert tally.stuck(T + 19 * S, grace, deadline) == {"s": 2}  # seq 2: held by the crash at +3 s, its 10 s deadline
    assert tally.stuck(T + 26 * S, grace, deadline) == {"s": 2}
    assert tally.stuck(T + 27 * S, grace, deadline) == {"s": 3}  # seq 1: 1 s + 10 s deadline + 10 s backoff + grace
    # the same rows where the subscription does not dead-letter: every nack keeps the deadline
    elsewhere = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 10.0})
    elsewhere.refresh()
    assert elsewhere.stuck(T + 26 * S, grace, deadline) == {}  # seqs 0 and 2 too: their nack at +1 s
    assert elsewhere.stuck(T + 27 * S, grace, deadline) == {"s": 3}
    # a rejected nack leaves the message leased until its deadline, poison or not
    (tmp_path / "deliveries" / "part-1.parquet").unlink(missing_ok=True)
    pq.write_table(pa.Table.from_pylist([delivery(0, T + 2 * S, "nack", "invalid_ack_id")], schema=DELIVERY_SCHEMA),
                   tmp_path / "deliveries" / "part-1.parquet")
    tally.refresh()
    assert tally.latest_due_us(["s"], deadline) == T + 2 * S + 1000 + 10 * S + 10 * S


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


def test_the_terminal_says_each_unsettled_cause_once_with_what_explains_it():
    from pubsubguard.validation.conformance.explains import explanations
    from pubsubguard.validation.report.terminal import explanation_lines

    result = {"target": "emulator",
              "parameters": {"drain": {"ended": "timeout", "unsettled": {"e": 3}, "unsettled_poison": {},
                                       "stalled": {}, "after_stall": {"e": {"since_us": T, "messages": 2, "poison": 0,
                                                                            "deliveries": 0, "last_delivery_us": None}}}},
              "conformance": {"run_id": "r", "summary": {"violated": 1},
                              "scenarios": [{"id": "ordered-dead-letter-spares-other-subscriptions", "result": "violated"}]},
              "subscriptions": {"e": {"declared": {"ordering": False}, "figures": {}, "findings": {},
                                      "guarantees": {"completeness": "inconclusive", "exactly_once": "inconclusive"}}}}
    result["explanations"] = explanations(result, [])
    lines = explanation_lines(result)
    assert lines[1:] == ["  e: 2 never settled (after_stall): explained by ordered-dead-letter-spares-other-subscriptions",
                         "  e: 1 never settled: no scenario explains it"]


def _two_keys_around_a_reset(tmp_path) -> EvidenceTally:
    """Keys a (seqs 0, 1, 3: 0 acked at +1 s, 3 poison) and b (seqs 2, 4: 2 nacked at +9 s) of topic t, read by s."""
    (tmp_path / "publishes").mkdir()
    (tmp_path / "deliveries").mkdir()
    rows = [{**publish(s), "key": key, "poison": s == 3} for s, key in ((0, "a"), (1, "a"), (2, "b"), (3, "a"), (4, "b"))]
    pq.write_table(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA), tmp_path / "publishes" / "part-0.parquet")
    deliveries = [{**delivery(0, T + S, "ack"), "key": "a"}, {**delivery(2, T + 9 * S, "nack"), "key": "b"}]
    pq.write_table(pa.Table.from_pylist(deliveries, schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-0.parquet")
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    return tally


def test_keys_silent_since_the_last_stream_reset_are_told_apart(tmp_path):
    """A stream the fault layer reset (kill_stream): the emulator keeps the reset stream as a member and never
    again delivers the keys it hashes there. Only unsettled messages (not poison) of keys with no delivery
    after the last reset count; a key delivered after it does not."""
    tally = _two_keys_around_a_reset(tmp_path)
    # unsettled: a/1, a/3 (poison), b/2, b/4; key a silent after the reset at +5 s, key b delivered at +9 s
    assert tally.silent_keys({"s": T + 5 * S}) == {"s": {"reset_us": T + 5 * S, "keys": ["a"], "messages": 1}}
    assert tally.silent_keys({"s": T + 10 * S})["s"]["keys"] == ["a", "b"]
    assert tally.silent_keys({}) == {} and tally.silent_keys({"other": T}) == {}


def test_on_an_unordered_subscription_a_reset_counts_every_stuck_message_not_only_silent_keys(tmp_path):
    """An unordered subscription's reset stream may hold any message (the emulator still dispatches to it), so a
    key delivered after the reset counts too; poison messages never do, and an ordered one keeps the key rule."""
    tally = _two_keys_around_a_reset(tmp_path)
    # unsettled: a/1, a/3 (poison), b/2 (delivered after the reset), b/4
    assert tally.silent_keys({"s": T + 5 * S}, frozenset({"s"})) == {
        "s": {"reset_us": T + 5 * S, "keys": ["a", "b"], "messages": 3, "unordered": True}}
    assert tally.silent_keys({"s": T + 5 * S}, frozenset({"other"}))["s"]["keys"] == ["a"]
    assert tally.silent_keys({}, frozenset({"s"})) == {}


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


def attempt(row: dict, delivery_attempt: int) -> dict:
    return {**row, "delivery_attempt": delivery_attempt}


def test_unsettled_redeliveries_are_told_apart_on_an_unordered_retry_policy_subscription(tmp_path):
    # seq 0: delivered twice (attempt 2 nacked), never again: the emulator's stopped timer; seq 1: nacked at its first
    # attempt, never again: not this form (the emulator puts a first attempt back at once); seq 2: redelivered, then
    # settled; seq 3: one delivery at attempt 4, held by the crashed task; seq 4: a poison message nacked at attempt 5
    evidence(tmp_path, 5, [attempt(delivery(0, T + 1 * S, "expire", "none"), 1), attempt(delivery(0, T + 4 * S, "nack"), 2),
                           attempt(delivery(1, T + 1 * S, "nack"), 1),
                           attempt(delivery(2, T + 1 * S, "nack"), 1), attempt(delivery(2, T + 2 * S, "ack"), 2),
                           attempt(delivery(3, T + 1 * S, "crash", "none"), 4),
                           attempt(delivery(4, T + 3 * S, "nack"), 5)])
    publishes = pq.read_table(tmp_path / "publishes" / "part-0.parquet").to_pylist()
    publishes[4]["poison"] = True
    pq.write_table(pa.Table.from_pylist(publishes, schema=PUBLISH_SCHEMA), tmp_path / "publishes" / "part-0.parquet")
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 10.0}, frozenset({"s"}))
    tally.refresh()
    stop = tally.after_backoff_stop(frozenset({"s"}))
    assert stop == {"s": {"messages": 3, "poison": 1, "poison_messages": [["k", 4]],
                          "owed_us": T + 1 * S + 1000 + 10 * S, "timer_ran_after": 0}}  # seq 3's: its deadline
    assert tally.after_backoff_stop(frozenset()) == {}  # an ordered subscription: not this form
    without = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 0.0})  # no retry policy: the scenarios hold there
    without.refresh()
    assert without.after_backoff_stop(frozenset({"s"})) == {}


def test_a_redelivery_after_the_backoff_later_than_an_unsettled_message_was_owed_leaves_it_to_other_forms(tmp_path):
    # seq 0 nacked at attempt 2 at +1 s (owed by +12 s with its 10 s backoff); seq 1 delivered at attempt 3 at +30 s:
    # the target's backoff redelivery still ran after seq 0 was owed, so that does not explain seq 0
    evidence(tmp_path, 2, [attempt(delivery(0, T + 1 * S, "nack"), 2),
                           attempt(delivery(1, T + 30 * S, "nack"), 3)])
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 10.0})
    tally.refresh()
    assert tally.after_backoff_stop(frozenset({"s"}))["s"] == {
        "messages": 1, "poison": 0, "poison_messages": [], "owed_us": T + 30 * S + 1000 + 20 * S, "timer_ran_after": 1}


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


# -- the drain clock (validation/probe/drain_clock.py): progress, not a clock alone ---------------------------------------
class _Tally:
    """What the clock reads of an EvidenceTally: per-subscription progress, settled and expected counts."""

    def __init__(self, published: int, settled: int, progress: dict[str, int]):
        self.published = {"t": set(range(published))}
        self._settled, self._expected, self.progress = settled, published, dict(progress)

    def done(self) -> int:
        return self._settled

    def expected(self) -> int:
        return self._expected

    def progress_of(self, name: str) -> int:
        return self.progress[name]


def test_the_ceiling_grows_with_what_is_left_and_shrinks_with_the_measured_rate():
    from pubsubguard.validation.probe.drain_clock import CEILING_FACTOR, CEILING_MAX_S, ceiling_s

    assert ceiling_s(52, 0, 500) == 52  # everything settled while publishing: the faults' timing alone
    assert ceiling_s(52, 24_438, 200) == round(52 + CEILING_FACTOR * 24_438 / 200, 1)
    assert ceiling_s(52, 24_438, 400) < ceiling_s(52, 24_438, 200)
    assert ceiling_s(52, 10_000, 0) == CEILING_MAX_S  # nothing settled yet: the bound, not an endless wait


def test_a_subscription_still_progressing_is_never_stopped_however_late_its_messages():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=52)
    tally = _Tally(1000, 100, {"s": 10, "u": 10})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.rates["settled_per_s"] == 10.0 and clock.ceiling == round(52 + 3 * 900 / 10, 1)
    for second in range(1, 60):  # `s` delivers something new every second, `u` nothing after the start
        tally.progress["s"] += 1
        clock.observe(tally, float(second))
    assert not clock.stopped("s", 59.5)
    assert clock.stopped("u", 59.5) and not clock.stopped("u", 19.0)
    assert not clock.past_ceiling(100.0) and clock.past_ceiling(clock.ceiling + 1)


def test_past_the_ceiling_stopped_subscriptions_end_stuck_and_moving_ones_are_cut():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=30, floor_s=0.0)
    tally = _Tally(1000, 990, {"s": 0, "u": 0})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.ceiling == 30.3  # 30 + 3 x 10 left / 99 settled per second
    unsettled = {"s": 4, "u": 6}
    # both stopped (no progress for 20 s), some messages not stuck yet: before the ceiling the drain goes on
    assert clock.end(25.0, unsettled, {"s": 4, "u": 2}) is None
    assert clock.end(25.0, unsettled, dict(unsettled)) == "stuck"  # each message stuck: no need to wait
    # past the ceiling a target that stopped on every unsettled subscription ends stuck (the final read decides)
    assert clock.end(34.0, unsettled, {"s": 4, "u": 2}) == "stuck"
    # ... while one that still makes progress is cut there
    tally.progress["u"] += 1
    clock.observe(tally, 30.0)
    assert clock.end(34.0, unsettled, {"s": 4, "u": 2}) == "ceiling"
    assert clock.end(34.0, unsettled, dict(unsettled)) == "ceiling"


def test_latest_due_is_when_the_target_owes_the_last_unsettled_message(tmp_path):
    evidence(tmp_path, 4, [delivery(0, T + 1 * S, "ack"),  # settled: owed nothing
                           delivery(1, T + 1 * S, "nack"),  # owed after deadline + 20 s backoff
                           delivery(2, T + 1 * S, "ack", "other")])  # ack rejected: owed after the deadline
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN, {"s": 20.0})
    tally.refresh()
    deadline = {"s": 10 * S}
    assert tally.latest_due_us(["s"], deadline) == T + 1 * S + 1000 + 10 * S + 20 * S  # seq 1, after its nack
    assert tally.latest_due_us(["other"], deadline) is None
    # seq 1 settled: the rejected ack (seq 2) and the never-delivered seq 3 (its publish + deadline) remain
    pq.write_table(pa.Table.from_pylist([delivery(1, T + 2 * S, "ack")], schema=DELIVERY_SCHEMA),
                   tmp_path / "deliveries" / "part-1.parquet")
    tally.refresh()
    assert tally.latest_due_us(["s"], deadline) == T + 1 * S + 1000 + 10 * S


def test_the_ceiling_follows_the_rate_the_drain_itself_measures():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0}, base_s=30)
    tally = _Tally(1000, 900, {"s": 0})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.ceiling == 33.3  # 30 + 3 x 100 left / 90 settled per second while publishing
    tally._settled, tally.progress["s"] = 905, 5  # the tail: 5 settled in 10 s
    clock.observe(tally, 10.0)
    assert clock.ceiling == round(10 + 3 * 95 * 10 / 5, 1) and clock.extended["drain_settled_per_s"] == 0.5
    assert not clock.past_ceiling(100.0)
    tally._settled, tally.progress["s"] = 1000, 100  # it sped up: the ceiling never moves earlier
    clock.observe(tally, 20.0)
    assert clock.ceiling == round(10 + 3 * 95 * 10 / 5, 1)
    fixed = DrainClock({"s": 20.0}, base_s=30, override_s=40.0)  # --drain-timeout: never extended
    fixed.begin(_Tally(1000, 900, {"s": 0}), now=0.0, first_publish_us=T, now_us=T + 10 * S)
    fixed.observe(tally, 15.0)
    assert fixed.ceiling == 40.0 and fixed.extended is None


def test_the_publishers_allowance_counts_only_what_progressing_subscriptions_still_owe():
    from pubsubguard.validation.probe.drain_clock import DrainClock, allowed_per_task

    class Tally(_Tally):
        def __init__(self):
            super().__init__(1000, 0, {"s": 0, "u": 0})
            self.owed = {"s": 600, "u": 300}

        def unsettled_of(self, name):
            return set(range(self.owed[name]))

    tally = Tally()
    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=30)
    clock.observe(tally, 0.0)
    # 900 pairs unsettled on progressing subscriptions: (1000 expected - 900 + 2000) / 2 pairs a message / 2 tasks
    assert allowed_per_task(tally, clock, 1.0, 2.0, 2) == 525
    # 500 of `s` overdue (past their due + grace) no longer hold the publishers back
    assert allowed_per_task(tally, clock, 1.0, 2.0, 2, overdue={"s": 500}) == 650
    # `u` stopped (no progress for its window): its 300 do not either
    tally.progress["s"] += 1
    clock.observe(tally, 25.0)
    assert allowed_per_task(tally, clock, 25.0, 2.0, 2, overdue={"s": 500}) == 725


def test_drain_timeout_replaces_the_derived_ceiling():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0}, base_s=52, override_s=42.0)
    clock.begin(_Tally(1000, 0, {"s": 0}), now=5.0, first_publish_us=T, now_us=T + S)
    assert clock.ceiling == 42.0 and clock.past_ceiling(47.5) and not clock.past_ceiling(46.0)
    assert clock.record(50.0, "ceiling", _Tally(1000, 0, {"s": 0}))["ceiling_from"] == "--drain-timeout"


def test_progress_counts_first_deliveries_and_settlements_never_redeliveries(tmp_path):
    evidence(tmp_path, 3, [delivery(0, T + 1 * S, "nack"), delivery(0, T + 2 * S, "nack"),
                           delivery(0, T + 3 * S, "nack"), delivery(1, T + 1 * S, "ack")])
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    # seq 0 delivered (three times: one first delivery), seq 1 delivered and settled, seq 2 never delivered
    assert tally.progress_of("s") == 2 + 1
    assert tally.never_delivered("s") == 1 and tally.deliveries["s"] == 4


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


def test_the_driver_footprint_is_sampled_from_start_to_end_and_said_in_one_line():
    import time as clock

    from pubsubguard.validation.footprint import Footprint, sentence

    samples = Footprint(interval_s=0.1).start()
    held = [b"x" * (8 * 1024 * 1024)]  # 8 MiB more (written, so resident) while it samples
    clock.sleep(0.35)
    samples = samples.stop()
    assert len(samples) >= 4 and samples[0]["t_s"] == 0.0 and samples[-1]["t_s"] >= 0.35
    assert all(s["rss_mib"] > 0 and s["threads"] >= 1 and s["open_files"] > 0 for s in samples)
    assert max(s["rss_mib"] for s in samples) >= samples[0]["rss_mib"] + 7
    said = sentence(samples)
    assert said.startswith("the driver while probing: resident memory ") and f"{len(samples)} samples" in said
    assert sentence(samples[:1]) is None
    del held


def test_subscriber_tasks_share_every_twin_up_to_the_bound_and_split_them_beyond():
    """Up to STREAMS_PER_TASK twins every subscriber task streams all of them (competing clients on every
    subscription, the main job's shape); beyond, each twin is read by exactly one task, the shares differing
    by one at most, and a replacement task is given the share of the task it replaces (driver)."""
    from pubsubguard.validation.driver import STREAMS_PER_TASK, twins_of_task

    few = [{"path": f"t{i}"} for i in range(STREAMS_PER_TASK)]
    assert all(twins_of_task(few, index, 2) == few for index in range(2))
    many = [{"path": f"t{i}"} for i in range(300)]
    shares = [twins_of_task(many, index, 2) for index in range(2)]
    paths = [[t["path"] for t in share] for share in shares]
    assert sorted(paths[0] + paths[1]) == sorted(t["path"] for t in many)  # every twin read, none twice
    assert not set(paths[0]) & set(paths[1]) and {len(p) for p in paths} == {150}
    three = [len(twins_of_task(many[:100], index, 3)) for index in range(3)]
    assert sum(three) == 100 and max(three) - min(three) <= 1
    assert twins_of_task(many, 0, 1) == many  # one task reads everything


def test_the_subscribers_wait_for_the_publishers_marker_not_for_sparks_status_store(tmp_path):
    """The driver submits the subscriber tasks once a publisher task says it runs (`_publishing-<task>`), as soon
    as it does: Spark's status tracker showed a task that started at once up to an executor heartbeat (10 s) late.
    No Spark context is given: a wait that asked the tracker fails here."""
    state = SimpleNamespace(evidence_dir=tmp_path, publish_done=threading.Event(),
                            sc=SimpleNamespace(master="local[3]", defaultParallelism=3))
    marker = tmp_path / f"{PUBLISHING_PREFIX}pub-key-000-1"
    threading.Timer(0.3, marker.touch).start()
    started = time.monotonic()
    ProbeDriver._wait_for_publisher_slot(state, timeout_s=30)
    assert marker.exists() and time.monotonic() - started < 5

    marker.unlink()
    with pytest.raises(VerifyError, match="got no Spark slot within"):
        ProbeDriver._wait_for_publisher_slot(state, timeout_s=0.2)
    state.publish_done.set()  # the publisher ended (or failed) before any marker: nothing to wait for
    ProbeDriver._wait_for_publisher_slot(state, timeout_s=0.2)
