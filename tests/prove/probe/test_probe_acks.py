"""What the probe records for an exactly-once ack, on the real emulator through the client library's own
result processing: an ack id the target's error does not name was applied (recorded `success`), the one
it names was not (`invalid_ack_id`). Issue 35: the reference target's "messages never settled" on
orders-ordered-exactly-once were such acks, recorded `other`."""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.emulator

PROJECT = "pubsubguard-dev"
DEADLINE_S = 10


def _library_futures(err, ack_ids: list[str]) -> dict:
    """The futures the client library (2.x) completes for an exactly-once Acknowledge that raised `err`:
    its own `_get_status`, `_get_ack_errors` and `_process_requests`, as `send_unary_ack` calls them."""
    from google.cloud.pubsub_v1.subscriber import futures
    from google.cloud.pubsub_v1.subscriber._protocol import requests, streaming_pull_manager as manager

    reqs = {a: requests.AckRequest(a, 0, 0, None, futures.Future()) for a in ack_ids}
    manager._process_requests(manager._get_status(err), reqs, manager._get_ack_errors(err))
    return {a: r.future for a, r in reqs.items()}


@pytest.fixture()
def eod(emulator):
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    name = f"acks-{uuid.uuid4().hex[:8]}"
    topic, subscription = publisher.topic_path(PROJECT, name), subscriber.subscription_path(PROJECT, name)
    publisher.create_topic(name=topic)
    subscriber.create_subscription(request={"name": subscription, "topic": topic, "ack_deadline_seconds": DEADLINE_S,
                                            "enable_exactly_once_delivery": True})
    try:
        yield publisher, subscriber, topic, subscription
    finally:
        subscriber.delete_subscription(subscription=subscription)
        publisher.delete_topic(topic=topic)


def _pull(subscriber, subscription) -> dict[str, str]:
    response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10)
    return {m.message.data.decode(): m.ack_id for m in response.received_messages}


def test_an_ack_failed_only_by_its_batch_mate_is_recorded_success_and_was_applied(eod):
    from google.api_core import exceptions

    from pubsubguard.validation.probe.acks import future_ack_result, failed_batch_mates

    publisher, subscriber, topic, subscription = eod
    for data in (b"stale", b"valid"):
        publisher.publish(topic, data).result()
    first = _pull(subscriber, subscription)
    assert set(first) == {"stale", "valid"}
    stale = first["stale"]
    subscriber.modify_ack_deadline(subscription=subscription, ack_ids=[stale], ack_deadline_seconds=0)  # nack
    again = _pull(subscriber, subscription)
    assert set(again) == {"stale"}  # redelivered: the first ack id of "stale" is superseded

    with pytest.raises(exceptions.InvalidArgument) as raised:
        subscriber.acknowledge(subscription=subscription, ack_ids=[stale, first["valid"]], retry=None)
    result = _library_futures(raised.value, [stale, first["valid"]])

    # the library says OTHER for the valid one; the target's ErrorInfo names only the stale one
    assert "OTHER" in str(result[first["valid"]].exception())
    assert failed_batch_mates(result[first["valid"]].exception(), first["valid"]) == [stale]
    assert future_ack_result(result[first["valid"]], first["valid"]) == "success"
    assert future_ack_result(result[first["valid"]]) == "other"  # without its ack id: not decidable
    assert future_ack_result(result[stale], stale) == "invalid_ack_id"

    subscriber.acknowledge(subscription=subscription, ack_ids=[again["stale"]])
    time.sleep(DEADLINE_S + 2)
    response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10, return_immediately=True)
    assert [m.message.data for m in response.received_messages] == []  # "valid" was applied: never redelivered


def test_an_ack_the_error_names_stays_failed(eod):
    """The other side of the rule (the mutation that records every OTHER as success fails here): a request of
    one stale ack id is refused for it, and a message whose ack was never applied comes back."""
    from google.api_core import exceptions

    from pubsubguard.validation.probe.acks import future_ack_result, failed_batch_mates

    publisher, subscriber, topic, subscription = eod
    for data in (b"stale", b"kept"):
        publisher.publish(topic, data).result()
    first = _pull(subscriber, subscription)
    stale = first["stale"]
    subscriber.modify_ack_deadline(subscription=subscription, ack_ids=[stale], ack_deadline_seconds=0)
    again = _pull(subscriber, subscription)
    with pytest.raises(exceptions.InvalidArgument) as raised:
        subscriber.acknowledge(subscription=subscription, ack_ids=[stale], retry=None)
    result = _library_futures(raised.value, [stale])
    assert failed_batch_mates(result[stale].exception(), stale) == []
    # the request's status, as the library words it for an ack id it does not name, names this one: failed
    from google.cloud.pubsub_v1.subscriber._protocol import streaming_pull_manager as manager
    from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeError, AcknowledgeStatus

    naming = AcknowledgeError(AcknowledgeStatus.OTHER, str(manager._get_status(raised.value)))
    assert failed_batch_mates(naming, stale) == [] and failed_batch_mates(naming, "another") == [stale]
    assert future_ack_result(result[stale], stale) == "invalid_ack_id"
    subscriber.acknowledge(subscription=subscription, ack_ids=[again["stale"]])
    time.sleep(DEADLINE_S + 2)
    response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10, return_immediately=True)
    assert [m.message.data for m in response.received_messages] == [b"kept"]  # never acked: redelivered


@pytest.mark.parametrize("status,says", [("INVALID_ACK_ID", "held that ack id dead already"),
                                         ("OTHER", "not applied as far as the client was told")])
def test_a_refused_modack_of_a_held_delivery_is_worded_as_what_the_answer_means(status, says):
    """ModifyAckDeadline of a held delivery answered INVALID_ACK_ID: the ack id was dead already (nothing was
    extended); another failure: not applied as the client was told. Either way the row keeps the
    subscription's deadline."""
    from concurrent.futures import Future

    from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeError, AcknowledgeStatus

    from pubsubguard.validation.probe import subscriber as probe
    from pubsubguard.validation.probe.twins import TwinSpec

    class Held:
        ack_id = "held"

        def modify_ack_deadline_with_response(self, seconds):
            future = Future()
            future.set_exception(AcknowledgeError(getattr(AcknowledgeStatus, status), None))
            return future

    notes: list[str] = []
    subscriber = object.__new__(probe.ProbeSubscriber)
    subscriber.spec = probe.SubscriberSpec("r", "sub-0", "evidence", (), {}, probe.Faults(), fault_deadline_s=10)
    subscriber.note = notes.append
    row = {"ack_deadline_s": 60}
    twin = TwinSpec("projects/p/subscriptions/orders-eod-probe-1", "projects/p/topics/orders", "orders-eod",
                    exactly_once=True, ack_deadline_s=60)
    assert subscriber.shorten_deadline(twin, Held(), row) == 60
    assert row["ack_deadline_s"] == 60 and len(notes) == 1 and says in notes[0], notes
    assert "keeps the subscription's 60s deadline (no shorter one was granted)" in notes[0]
    assert (status == "INVALID_ACK_ID") == ("refused" not in notes[0] and "INVALID_ACK_ID" in notes[0])


def test_what_the_client_library_still_holds_is_read_from_its_own_counters(eod):
    """The note beside a `lost` finding reads the streaming pull's own manager (kept under a name-mangled
    attribute of the future): a message handed to a callback that never settles it is still leased."""
    import threading
    from types import SimpleNamespace

    from pubsubguard.validation.probe.subscriber import ProbeSubscriber

    publisher, subscriber, topic, subscription = eod
    got = threading.Event()
    future = subscriber.subscribe(subscription, callback=lambda message: got.set())  # never acked
    try:
        publisher.publish(topic, b"held").result()
        assert got.wait(30)
        notes: list[str] = []
        probe = SimpleNamespace(note=notes.append, twin_to_declared={subscription.rsplit("/", 1)[-1]: "declared-name"},
                                client_held=ProbeSubscriber.client_held)
        ProbeSubscriber.note_held_in_client(probe, {subscription: future}, "when the final read began")
        assert len(notes) == 1
        assert notes[0].startswith("when the final read began the client library still leased 1 message of "
                                   "declared-name") and "flow control's load" in notes[0]
    finally:
        future.cancel()


def test_a_retry_thread_that_outlived_its_stream_is_logged_not_a_traceback(caplog):
    """Seen when a run was stopped mid-probe: the client library's `Thread-RetryAcks` died with an AssertionError
    in its dispatcher's `drop` once the stream's manager let go of its leaser; it goes to the client log, and
    any other thread's error to the hook that was there before (the terminal's traceback)."""
    import logging
    import threading

    from pubsubguard.validation.probe.clients import log_abandoned_ack_retries

    before, passed_on = threading.excepthook, []
    threading.excepthook = lambda args: passed_on.append(args.exc_value)
    try:
        log_abandoned_ack_retries()

        def run(name: str, error: BaseException) -> None:
            def fail():
                raise error
            thread = threading.Thread(target=fail, name=name)
            thread.start()
            thread.join()

        with caplog.at_level(logging.WARNING, logger="google.cloud.pubsub_v1"):
            run("Thread-RetryAcks", AssertionError())
            run("Thread-RetryModAcks", ValueError("Cannot invoke RPC on closed channel!"))
        assert [r.getMessage().split(":")[0] for r in caplog.records] == [
            "an ack retry was abandoned when its stream or client closed"] * 2
        assert passed_on == []
        mine = AssertionError("mine")
        run("Thread-Mine", mine)
        run("Thread-RetryAcks", KeyError("not a closed stream's"))
        assert passed_on[0] is mine and isinstance(passed_on[1], KeyError)
    finally:
        threading.excepthook = before


@pytest.fixture()
def slow_pull(emulator):
    """A target slow to answer an empty Pull, as the emulator was at 100 topics (busy with the other tasks'
    streams): a gRPC server on loopback that forwards each Pull to the emulator and, when the answer is
    empty, holds it 3 s before answering. Yields a SubscriberClient that talks to it."""
    from concurrent import futures

    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1 import types
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    upstream = pubsub_v1.SubscriberClient()

    def pull(request: types.PullRequest, context):
        answer = upstream.pull(request=request, timeout=10)
        if not answer.received_messages:
            time.sleep(3)
        return answer

    handler = grpc.method_handlers_generic_handler("google.pubsub.v1.Subscriber", {
        "Pull": grpc.unary_unary_rpc_method_handler(pull, request_deserializer=types.PullRequest.deserialize,
                                                    response_serializer=types.PullResponse.serialize)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        yield pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=channel))
    finally:
        server.stop(0)


def test_the_crashing_task_pulls_its_twins_side_by_side(slow_pull, tmp_path):
    """The crashing task reads by unary Pull. On a target slow to answer, twins pulled one after another cost
    the call's timeout each: at 100 topics the task read nothing for minutes (issue 44). Here 40 twins on a
    target that holds empty answers past the call's timeout, the only message on the last twin: it must come
    within two rounds of side-by-side pulls, and the cut calls are noted once, not one note a twin."""
    import threading
    from types import SimpleNamespace

    from google.cloud import pubsub_v1

    from pubsubguard.core import storage
    from pubsubguard.validation.probe.clients import UNARY_PULL_TIMEOUT_S
    from pubsubguard.validation.probe.subscriber import ProbeSubscriber
    from pubsubguard.validation.probe.twins import TwinSpec

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    name = f"crash-{uuid.uuid4().hex[:8]}"
    topic = publisher.topic_path(PROJECT, name)
    idle = publisher.topic_path(PROJECT, f"{name}-idle")
    publisher.create_topic(name=topic)
    publisher.create_topic(name=idle)
    twins = []
    for index in range(40):
        path = subscriber.subscription_path(PROJECT, f"{name}-{index}")
        subscriber.create_subscription(request={"name": path, "topic": topic if index == 39 else idle})
        twins.append(TwinSpec(path, topic if index == 39 else idle, f"sub-{index}", consumer_endpoint="default"))
    try:
        got: list[tuple[str, float]] = []
        notes: list[str] = []
        stop = storage.Marker(str(tmp_path / "_stop"))
        probe = SimpleNamespace(spec=SimpleNamespace(twins=tuple(twins), crash_prefetch=1), clients={"default": slow_pull},
                                callback=lambda twin, message: (got.append((twin.declared_name, time.monotonic())),
                                                                message.ack()),
                                should_crash=lambda: False, crash=lambda: None, note=notes.append,
                                ready=lambda: None, received=0, crash_after=5)
        started = time.monotonic()
        reader = threading.Thread(target=ProbeSubscriber.pull_until_crash, args=(probe, stop, time.time() + 30))
        reader.start()
        time.sleep(1)
        publisher.publish(topic, b"for the last twin").result()
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert [name for name, _ in got] == ["sub-39"], got
        assert min(at for _, at in got) - started < 1 + 3 * UNARY_PULL_TIMEOUT_S
        assert not any("failed" in note for note in notes), notes
        assert [note for note in notes if "not answered within" in note] == [notes[0]], notes
        assert "DeadlineExceeded" in notes[0] and len(notes) == 2  # and: the crash was not injected
    finally:
        for twin in twins:
            subscriber.delete_subscription(subscription=twin.path)
        publisher.delete_topic(topic=topic)
        publisher.delete_topic(topic=idle)


@pytest.mark.emulator
def test_the_publisher_goes_seq_by_seq_across_topics_so_every_topic_has_traffic_all_along(emulator, tmp_path):
    """Under a --rate (the soak) the publisher went topic by topic: the soak's last topic got nothing for its
    first 13 minutes. Now seq by seq across every topic and key: each (topic, key) in order, every topic in
    the first round of publishes."""
    import pyarrow.parquet as pq
    from google.cloud import pubsub_v1

    from pubsubguard.validation.probe.publisher import publish_partition

    publisher = pubsub_v1.PublisherClient()
    names = [f"interleave-{uuid.uuid4().hex[:8]}-{n}" for n in ("a", "b", "c")]
    for name in names:
        publisher.create_topic(name=f"projects/pubsubguard-dev/topics/{name}")
    endpoint = "pubsub.googleapis.com:443"
    spec = {"evidence_dir": str(tmp_path), "run_id": "r1", "messages_per_key": 3, "rate": 200, "poison": {},
            "endpoints": {endpoint: emulator.host}, "ready_timeout_s": 0,
            "topics": [{"name": n, "path": f"projects/pubsubguard-dev/topics/{n}", "endpoint": endpoint} for n in names]}
    [summary] = publish_partition(spec, ["k0", "k1"])
    assert summary["ok"] == 3 * 2 * 3 and summary["error"] == 0, summary
    rows = sorted(pq.read_table(tmp_path / "publishes").to_pylist(), key=lambda r: r["publish_time_us"])
    assert {r["topic"] for r in rows[:6]} == set(names), [(r["topic"], r["key"], r["seq"]) for r in rows]
    for name in names:
        for key in ("k0", "k1"):
            assert [r["seq"] for r in rows if r["topic"] == name and r["key"] == key] == [0, 1, 2]


def test_deliveries_the_client_drops_on_a_rejected_receipt_modack_are_counted_in_the_report(tmp_path):
    """On an exactly-once subscription the client library drops a received message whose receipt modack the
    target answers INVALID_ACK_ID, without a callback, and says so only at DEBUG on its `expiry` logger: the
    probe had no row for it and could not tell it from a message never delivered (the soak's 7,331 `lost` on
    orders-exactly-once may be such deliveries). Each dropped delivery is now a line of the task's client log,
    which the report counts."""
    import logging

    from google.cloud.pubsub_v1.subscriber._protocol import streaming_pull_manager

    from pubsubguard.validation.client_logs import client_log_summary
    from pubsubguard.validation.probe.clients import CLIENT_LOG_PREFIX
    from pubsubguard.validation.probe.client_log import DROPPED_ON_RECEIPT, EXPIRY_LOGGER, ClientLog

    assert streaming_pull_manager._EXPIRY_LOGGER.name == EXPIRY_LOGGER  # the library's own logger
    expiry = logging.getLogger(EXPIRY_LOGGER)
    before = (expiry.level, expiry.propagate)
    log = ClientLog(str(tmp_path / f"{CLIENT_LOG_PREFIX}sub-9.txt"))
    try:
        streaming_pull_manager._EXPIRY_LOGGER.debug("ack ids %s were dropped as they have already expired.",
                                                    {"ack-a", "ack-b", "ack-c"})
    finally:
        log.close()
    [line] = client_log_summary(tmp_path)
    assert "logged 3 warnings/errors" in line and DROPPED_ON_RECEIPT[:80] in line and "x3" in line, line
    assert (expiry.level, expiry.propagate) == before and not expiry.handlers  # a reused Python worker gets it back
