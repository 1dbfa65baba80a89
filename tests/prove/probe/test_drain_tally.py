"""The drain's measure of progress (pubsubguard.validation.probe.drain.EvidenceTally): what is settled, and which
unsettled messages are provably stuck -- nothing recorded for one ack deadline (+ the retry backoff
after a nack) + a grace since their last event -- and which are still in play; and the forms of what stays
unsettled (a stalled subscription, after a stall, silent keys after a stream reset, stopped redeliveries)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA
from pubsubguard.validation.probe.drain import EvidenceTally
from support.drain_evidence import RUN, S, T, delivery, evidence, publish


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


def test_progress_counts_first_deliveries_and_settlements_never_redeliveries(tmp_path):
    evidence(tmp_path, 3, [delivery(0, T + 1 * S, "nack"), delivery(0, T + 2 * S, "nack"),
                           delivery(0, T + 3 * S, "nack"), delivery(1, T + 1 * S, "ack")])
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    # seq 0 delivered (three times: one first delivery), seq 1 delivered and settled, seq 2 never delivered
    assert tally.progress_of("s") == 2 + 1
    assert tally.never_delivered("s") == 1 and tally.deliveries["s"] == 4


def test_the_targets_last_act_is_a_rows_receive_time_never_a_late_ack(tmp_path):
    """`last_activity_us`: when the target last delivered or dead-lettered anything on a subscription. A delivery the
    expire fault held is written with its late ack, a hold later; its receive time counts, not the ack's."""
    held = dict(delivery(1, T + 1 * S, "late_ack"), ack_time_us=T + 13 * S)
    dead = dict(delivery(2, T + 5 * S, "none", "none"), kind="dead_letter", ack_time_us=None)
    evidence(tmp_path, 3, [delivery(0, T + 3 * S, "ack"), held])
    tally = EvidenceTally(tmp_path, {"s": "t"}, RUN)
    tally.refresh()
    assert tally.done() == 2 and tally.last_activity_us("s") == T + 3 * S
    pq.write_table(pa.Table.from_pylist([dead], schema=DELIVERY_SCHEMA), tmp_path / "deliveries" / "part-1.parquet")
    tally.refresh()
    assert tally.done() == 3 and tally.last_activity_us("s") == T + 5 * S  # a dead-lettered message: the target's act
