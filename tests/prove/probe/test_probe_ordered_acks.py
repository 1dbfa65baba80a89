"""An ordered key whose head delivery the probe holds, on the real emulator through the real client library (issue 64:
at 50x the probe's client held 1,261 messages of orders-ordered-exactly-once, 1,145 behind their key, through the whole
final read, and left completeness unjudged).

The probe's subscriber task runs as in a run (`ProbeSubscriber.run`, its streaming pull on an ordered exactly-once twin)
with the expire fault drawn for the key's first message only: the probe holds that delivery past its fault deadline.
While it is held the target refuses acks of the key's later messages (`TRANSIENT_FAILURE_UNORDERED_ACK_ID`: acks must
come in order); the client library retried such an ack in its background and kept every later message of the key
behind it, the head's own redelivery among them once it came."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

pytestmark = pytest.mark.emulator

PROJECT = "pubsubguard-dev"
ENDPOINT = "us-east1-pubsub.googleapis.com:443"
FAULT_DEADLINE_S = 10
MESSAGES = 5
TASK = "sub-t"


def _planted_name(run_id: str, message_ids: list[str], faults) -> str:
    """A declared name under which the fault draw holds the first delivery of the key's first message and acks the
    first deliveries of the others (the draw hashes the run, the declared subscription, the message id and the
    delivery's count in the task)."""
    from pubsubguard.validation.probe.faults import delivery_action

    for index in range(100_000):
        name = f"planted-{index}"
        draws = [delivery_action(faults, run_id, name, message_id, f"{TASK}:1") for message_id in message_ids]
        if draws == ["expire"] + ["ack"] * (len(message_ids) - 1):
            return name
    raise AssertionError("no declared name draws the planted faults")


def _rows(evidence) -> list[dict]:
    import pyarrow.parquet as pq

    parts = sorted((evidence / "deliveries").glob("part-*.parquet"))
    return [row for part in parts for row in pq.read_table(part).to_pylist()]


@pytest.fixture()
def ordered_eod(emulator):
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    name = f"held-head-{uuid.uuid4().hex[:8]}"
    topic, subscription = publisher.topic_path(PROJECT, name), subscriber.subscription_path(PROJECT, name)
    publisher.create_topic(name=topic)
    subscriber.create_subscription(request={"name": subscription, "topic": topic, "ack_deadline_seconds": 60,
                                            "enable_exactly_once_delivery": True, "enable_message_ordering": True})
    try:
        yield publisher, topic, subscription
    finally:
        subscriber.delete_subscription(subscription=subscription)
        publisher.delete_topic(topic=topic)


def test_a_key_whose_head_delivery_the_probe_holds_leaves_nothing_in_its_client(emulator, ordered_eod, tmp_path):
    from pubsubguard.core import probe_contract, storage
    from pubsubguard.validation.probe.clients import CLIENT_STATE_PREFIX, NOTES_PREFIX
    from pubsubguard.validation.probe.faults import Faults
    from pubsubguard.validation.probe.twins import TwinSpec
    from pubsubguard.validation.probe.subscriber import ProbeSubscriber, SubscriberSpec

    publisher, topic, subscription = ordered_eod
    run_id = uuid.uuid4().hex[:8]
    message_ids = [publisher.publish(topic, b"probe", ordering_key="key-000", key="key-000", seq=str(seq),
                                     **{probe_contract.PROBE_ATTRIBUTE: run_id}).result() for seq in range(MESSAGES)]
    faults = Faults(expire=0.5)
    declared = _planted_name(run_id, message_ids, faults)
    evidence = tmp_path / "evidence"
    twin = TwinSpec(subscription, topic, declared, ordering=True, exactly_once=True, ack_deadline_s=60,
                    consumer_endpoint=ENDPOINT)
    heal = storage.Marker(str(evidence / "_heal"))
    stop = storage.Marker(str(evidence / "_stop"))
    probe = ProbeSubscriber(SubscriberSpec(
        run_id=run_id, task_id=TASK, faults=faults, evidence_dir=str(evidence), twins=(twin,),
        twin_to_declared={subscription.rsplit("/", 1)[-1]: declared}, endpoints={ENDPOINT: emulator.host},
        emulator_host=emulator.host, fault_deadline_s=FAULT_DEADLINE_S, expire_margin_s=2.0,
        stop_file=stop.location, heal_file=heal.location, end_time=time.time() + 120))
    task = threading.Thread(target=probe.run, daemon=True)
    task.start()
    try:
        held_since = None
        while held_since is None or time.monotonic() - held_since < FAULT_DEADLINE_S / 2:
            assert task.is_alive() and (held_since is None or time.monotonic() - held_since < FAULT_DEADLINE_S), \
                "the planted hold was not applied"
            if held_since is None and probe.held:
                held_since = time.monotonic()
            if held_since is not None and probe.received >= MESSAGES:
                break
            time.sleep(0.1)
        # the head is held (its fault deadline has not passed): every later message of its key reached the probe,
        # none waits in the client behind an ack the target refuses while the head is out
        assert probe.held, "the head's hold ended before the key's later messages were handed over"
        assert probe.received == MESSAGES, (
            f"{MESSAGES - probe.received} of the key's later messages held in the probe's client behind an ack the "
            "target refuses while the probe holds the key's head")

        # the head comes back after its deadline: every message settles, and every ack the target refused for now
        # is answered for good (each later message's first delivery has its row)
        deadline = time.monotonic() + 4 * FAULT_DEADLINE_S
        settled: set[int] = set()
        answered: list[str] = []
        while (len(settled) < MESSAGES or any(answered.count(m) < 2 for m in message_ids[1:])) \
                and time.monotonic() < deadline:
            time.sleep(0.5)
            rows = _rows(evidence)
            settled = {row["seq"] for row in rows if row["action"] in ("ack", "late_ack") and row["ack_result"] == "success"}
            answered = [row["message_id"] for row in rows if row["action"] == "ack" and row["message_id"] in message_ids[1:]]
        assert settled == set(range(MESSAGES)), f"not settled: {sorted(set(range(MESSAGES)) - settled)}"
        assert all(answered.count(m) >= 2 for m in message_ids[1:]), answered  # the first delivery and a redelivery

        # the final read as a run begins it: the client holds nothing on the kept ordered stream
        heal.set()
        state_file = evidence / f"{CLIENT_STATE_PREFIX}{TASK}.json"
        deadline = time.monotonic() + 10
        while not state_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        state = json.loads(state_file.read_text())[declared]
        assert (state["leased"], state["on_hold"], state["paused"], state["reopened"]) == (0, 0, False, False), state
        # and it is the state as the final read goes on, written again each second: the driver judges by the last
        written = state_file.stat().st_mtime_ns
        deadline = time.monotonic() + 5
        while state_file.stat().st_mtime_ns == written and time.monotonic() < deadline:
            time.sleep(0.1)
        assert state_file.stat().st_mtime_ns != written, "the client's state is not written again during the final read"
        assert json.loads(state_file.read_text())[declared]["leased"] == 0
    finally:
        stop.set()
        task.join(timeout=30)
    assert not task.is_alive()
    # nor when the task ended (the final read's end): the task notes what its client still held then
    notes = (evidence / f"{NOTES_PREFIX}{TASK}.txt").read_text()
    assert "still leased" not in notes, notes
    rows = _rows(evidence)
    # the planted hold, once (`expire` when the task ended before its late ack)
    assert [row["ack_deadline_s"] for row in rows if row["seq"] == 0 and row["action"] in ("expire", "late_ack")] == [
        FAULT_DEADLINE_S], [row for row in rows if row["seq"] == 0]
    # every ack was answered for good (none left retried when the task ended), each key's later ack the target's own
    assert [(row["seq"], row["ack_result"]) for row in rows
            if row["action"] == "ack" and row["ack_result"] not in ("success", "invalid_ack_id")] == []


def test_one_acknowledge_answers_each_ack_id_final_or_not(ordered_eod):
    """The probe's batched ack on the real emulator: of `Acknowledge([seq 0, seq 2])` with seq 1 outstanding, seq 0 is
    applied (the target's ErrorInfo names only seq 2) and seq 2 is refused for now (not final); sent again once seq 1
    is acked, it is taken."""
    from google.api_core import exceptions
    from google.cloud import pubsub_v1

    from pubsubguard.validation.probe.acks import acknowledge_answers

    publisher, topic, subscription = ordered_eod
    subscriber = pubsub_v1.SubscriberClient()
    for seq in range(3):
        publisher.publish(topic, b"probe", ordering_key="key-000", seq=str(seq)).result()
    ack_ids: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while len(ack_ids) < 3 and time.monotonic() < deadline:
        response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10)
        ack_ids.update({m.message.attributes["seq"]: m.ack_id for m in response.received_messages})
    first, third = ack_ids["0"], ack_ids["2"]
    with pytest.raises(exceptions.InvalidArgument) as refused:
        subscriber.acknowledge(subscription=subscription, ack_ids=[first, third], retry=None)
    assert acknowledge_answers(refused.value, [first, third]) == {
        first: ("success", None), third: ("other", "TRANSIENT_FAILURE_UNORDERED_ACK_ID")}

    subscriber.acknowledge(subscription=subscription, ack_ids=[ack_ids["1"]], retry=None)
    error = None
    try:
        subscriber.acknowledge(subscription=subscription, ack_ids=[third], retry=None)
    except exceptions.GoogleAPICallError as err:
        error = err
    assert acknowledge_answers(error, [third]) == {third: ("success", None)}
    assert acknowledge_answers(exceptions.ServiceUnavailable("down"), [third]) == {third: ("other", "UNAVAILABLE")}
    assert acknowledge_answers(exceptions.PermissionDenied("no"), [third]) == {third: ("permission_denied", None)}
