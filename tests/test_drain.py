"""The drain's measure of progress (pubsubguard.validation.progress.EvidenceTally): what is settled, and which
unsettled messages are provably stuck -- nothing recorded for one ack deadline (+ the retry backoff
after a nack) + a grace since their last event -- and which are still in play."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pubsubguard.validation.evidence import DELIVERY_SCHEMA, PUBLISH_SCHEMA
from pubsubguard.validation.progress import EvidenceTally

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
    from pubsubguard.validation.probe_setup import default_drain_timeout
    from pubsubguard.validation.isolation import TwinSpec

    eod = TwinSpec("p/s1", "p/t", "s1", exactly_once=True, ack_deadline_s=60, retry_max_backoff_s=10)
    push = TwinSpec("p/s2", "p/t", "s2", ack_deadline_s=20, push_endpoint="http://127.0.0.1:1/push")
    drain = TwinSpec("p/d", "p/dl", "d", ack_deadline_s=600, drain=True)  # not probed: no say
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
    from pubsubguard.validation.document import explanations

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
