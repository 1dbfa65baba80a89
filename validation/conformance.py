"""Directed conformance scenarios: which documented Pub/Sub behaviour does a target keep?

The random probe (`validation.job`) says what a target did under a keyed workload; these scenarios say
which *documented* behaviour it lacks. Each is short and scripted, runs on its own throwaway topics and
subscriptions (`pubsubguard-conform-<run id>-<scenario>-<part>`, deleted afterwards, also when the run is
interrupted), never on a declared estate, and ends in one of `RESULTS` with its evidence: every request,
the target's response or error, and when (seconds since the scenario started):

- `holds`: the target did what the cited fact says;
- `violated`: it did something the fact rules out (the detail says what);
- `unsupported`: it refused the setup the scenario needs (the error is the evidence);
- `inconclusive`: the outcome rests on timing the scenario could not control (a delivery that did not
  come within its window) or the scenario could not inject what it needed; the detail says which.

Scenarios use google-cloud-pubsub's own clients over gRPC: unary Pull/Acknowledge/ModifyAckDeadline
where the ack ids must be under exact control, streaming pull with `ack_with_response()` where the
client's exactly-once result is the question. `run_scenarios` runs them concurrently in a thread pool;
`pubsubguard conform` (pubsubguard/commands/conform.py) is the command around it.

`python -m validation.conformance --update-doc docs/emulator.md out/conform/conformance.json` rewrites
the generated conformance section of docs/emulator.md from a run's results.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pubsub_facts as facts

from validation.evidence import severity_of_result

HOLDS, VIOLATED, UNSUPPORTED, INCONCLUSIVE = "holds", "violated", "unsupported", "inconclusive"
RESULTS = (HOLDS, VIOLATED, UNSUPPORTED, INCONCLUSIVE)
NAME_PREFIX = "pubsubguard-conform"

ACK_DEADLINE_S = facts.ACK_DEADLINE_MIN_S  # the shortest legal deadline keeps expiry scenarios short
EXPIRY_MARGIN_S = 3.0  # waited beyond a deadline before treating the ack id as expired
PULL_TIMEOUT_S = 3.0  # one unary Pull (the emulator answers an empty Pull after ~2 s)
DELIVERY_WINDOW_S = 10.0  # how long a scenario waits for a delivery it needs before saying inconclusive
# How long a message nacked max_delivery_attempts times, and not delivered again, may take to reach the
# dead-letter topic before it counts as gone (the emulator forwards within ~5 s; forwarding is prompt, not
# instant, on Pub/Sub).
FORWARD_WINDOW_S = 30.0

FACTS_DOC = "docs/pubsub-facts.md"
DOC_EXACTLY_ONCE = "https://cloud.google.com/pubsub/docs/exactly-once-delivery"
DOC_ORDERING = "https://cloud.google.com/pubsub/docs/ordering"
DOC_DEAD_LETTER = "https://cloud.google.com/pubsub/docs/handling-failures"
DOC_FILTER = "https://cloud.google.com/pubsub/docs/subscription-message-filter"
DOC_SUBSCRIPTION_API = "https://cloud.google.com/pubsub/docs/reference/rest/v1/projects.subscriptions"
DOC_RESUME = "https://cloud.google.com/pubsub/docs/samples/pubsub-resume-publish-with-ordering-keys"


class Interrupted(Exception):
    """The run is stopping (Ctrl-C / SIGTERM): a scenario ends at its next call or wait."""


class Outcome(Exception):
    """Ends a scenario early with a result (`unsupported` setup, `inconclusive` timing)."""

    def __init__(self, result: str, detail: str):
        super().__init__(detail)
        self.result, self.detail = result, detail


@dataclass(frozen=True)
class Scenario:
    id: str
    behaviour: str
    source: str
    run: Callable[["Probe"], tuple[str, str]]


SCENARIOS: list[Scenario] = []


def scenario(scenario_id: str, behaviour: str, source: str):
    def register(function):
        SCENARIOS.append(Scenario(scenario_id, behaviour, source, function))
        return function

    return register


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------------------ session
class Session:
    """What the scenarios share: the target, its clients, the throwaway resources and the stop flag."""

    def __init__(self, target: str, project: str, run_id: str, project_number: str | None = None,
                 api_endpoint: str | None = None, stop: threading.Event | None = None):
        from google.cloud import pubsub_v1

        self.target, self.project, self.run_id, self.project_number = target, project, run_id, project_number
        # Google Cloud: a locational endpoint when given (exactly-once holds for subscribers of one region).
        self.client_options = {"api_endpoint": api_endpoint} if api_endpoint else None
        self.publisher = self.new_publisher()
        self.subscriber = pubsub_v1.SubscriberClient(client_options=self.client_options)
        self.stop = stop or threading.Event()  # set: the scenarios end at their next call or wait
        self._lock = threading.Lock()
        self._topics: list[str] = []
        self._subscriptions: list[str] = []
        self._closed = False

    def new_publisher(self):
        """A publisher with ordering enabled (its own per-key pause state), on the session's endpoint."""
        from google.cloud import pubsub_v1

        return pubsub_v1.PublisherClient(
            publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True),
            client_options=self.client_options)

    def track(self, kind: str, path: str) -> None:
        """Remember a created resource for cleanup; one created after cleanup began is deleted at once."""
        with self._lock:
            if not self._closed:
                (self._topics if kind == "topic" else self._subscriptions).append(path)
                return
        self._delete(kind, path)
        raise Interrupted()

    def _delete(self, kind: str, path: str) -> str | None:
        from google.api_core import exceptions

        try:
            if kind == "topic":
                self.publisher.delete_topic(topic=path, timeout=30)
            else:
                self.subscriber.delete_subscription(subscription=path, timeout=30)
        except exceptions.NotFound:
            return None
        except Exception as err:  # noqa: BLE001 - reported by cleanup()
            return f"{type(err).__name__}: {err}"
        return None

    def leftovers(self) -> dict[str, list[str]]:
        """Topics and subscriptions of this project whose names carry this run's id."""
        marker = f"{NAME_PREFIX}-{self.run_id}-"
        project = f"projects/{self.project}"
        return {
            "subscriptions": [s.name for s in self.subscriber.list_subscriptions(project=project, timeout=30)
                              if marker in s.name],
            "topics": [t.name for t in self.publisher.list_topics(project=project, timeout=30) if marker in t.name],
        }

    def cleanup(self) -> dict:
        """Delete every throwaway resource (subscriptions first), then sweep by run id for stragglers."""
        with self._lock:
            self._closed = True
            subscriptions, topics = list(self._subscriptions), list(self._topics)
        failed = []
        for kind, paths in (("subscription", subscriptions), ("topic", topics)):
            for path in paths:
                error = self._delete(kind, path)
                if error:
                    failed.append({"name": path, "error": error})
        swept = []
        try:
            left = self.leftovers()
        except Exception as err:  # noqa: BLE001 - reported
            failed.append({"name": f"projects/{self.project}", "error": f"listing leftovers: {type(err).__name__}: {err}"})
            left = {}
        for kind, paths in (("subscription", left.get("subscriptions", [])), ("topic", left.get("topics", []))):
            for path in paths:
                error = self._delete(kind, path)
                if error:
                    failed.append({"name": path, "error": error})
                else:
                    swept.append(path)
        return {"deleted": subscriptions + topics + swept, "failed": failed}

    def close(self) -> None:
        self.subscriber.close()
        self.publisher.stop()


# ------------------------------------------------------------------------------------------- probe
def _error(err: Exception) -> dict:
    """An API error as evidence: code, message and the structured ErrorInfo (exactly-once ack reasons)."""
    code = getattr(err, "grpc_status_code", None)
    out = {"type": type(err).__name__, "code": code.name if code is not None else None,
           "message": getattr(err, "message", None) or str(err)}
    reason, metadata = getattr(err, "reason", None), getattr(err, "metadata", None)
    if reason:
        out["reason"] = reason
    if metadata:
        out["metadata"] = dict(metadata)
    return out


def _duration_s(value) -> float | None:
    if value is None:
        return None
    if hasattr(value, "total_seconds"):
        return value.total_seconds()
    return value.seconds + value.nanos / 1e9


def _delivery(received) -> dict:
    message = received.message
    return {"message_id": message.message_id, "data": message.data.decode(errors="replace"),
            "ordering_key": message.ordering_key, "attributes": dict(message.attributes),
            "delivery_attempt": received.delivery_attempt, "ack_id": received.ack_id}


class Probe:
    """One scenario's view of the target: every call goes through `call`, which records the evidence."""

    def __init__(self, session: Session, scenario_id: str):
        self.session = session
        self.scenario_id = scenario_id
        self.evidence: list[dict] = []
        self.started = time.monotonic()
        self.publisher = session.publisher
        self.subscriber = session.subscriber

    # -- bookkeeping
    def now(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def note(self, text: str) -> None:
        self.evidence.append({"at_s": self.now(), "note": text})

    def name(self, part: str) -> str:
        return f"{NAME_PREFIX}-{self.session.run_id}-{self.scenario_id}-{part}"

    def topic_path(self, part: str) -> str:
        return f"projects/{self.session.project}/topics/{self.name(part)}"

    def subscription_path(self, part: str) -> str:
        return f"projects/{self.session.project}/subscriptions/{self.name(part)}"

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and self.session.stop.wait(seconds):
            raise Interrupted()

    def call(self, rpc: str, request: dict, function: Callable, summary: Callable = lambda response: None):
        """Run one request; record it with the response (summarised) or the error, and re-raise errors."""
        if self.session.stop.is_set():
            raise Interrupted()
        entry = {"at_s": self.now(), "call": rpc, "request": request}
        self.evidence.append(entry)
        began = time.monotonic()
        try:
            response = function()
        except Exception as err:
            entry["took_ms"] = round((time.monotonic() - began) * 1000, 1)
            entry["error"] = _error(err)
            raise
        entry["took_ms"] = round((time.monotonic() - began) * 1000, 1)
        entry["response"] = summary(response)
        return response

    # -- resources
    def create_topic(self, part: str, **fields) -> str:
        from google.pubsub_v1 import types

        path = self.topic_path(part)
        request = types.Topic(name=path, **fields)
        try:
            self.call("CreateTopic", _request_fields(request),
                      lambda: self.publisher.create_topic(request=request, timeout=30))
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - a refused setup is this scenario's result
            raise Outcome(UNSUPPORTED, f"the target refused to create topic {self.name(part)}: {_one_line(err)}") from None
        self.session.track("topic", path)
        return path

    def try_create_subscription(self, part: str, topic: str, **fields):
        """Create a subscription; returns (the stored Subscription, None) or (None, the error)."""
        from google.pubsub_v1 import types

        path = self.subscription_path(part)
        request = types.Subscription(name=path, topic=topic, **fields)
        try:
            created = self.call("CreateSubscription", _request_fields(request),
                                lambda: self.subscriber.create_subscription(request=request, timeout=30),
                                _request_fields)
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the caller judges the refusal
            return None, err
        self.session.track("subscription", path)
        return created, None

    def create_subscription(self, part: str, topic: str, **fields) -> str:
        created, err = self.try_create_subscription(part, topic, **fields)
        if err is not None:
            raise Outcome(UNSUPPORTED, f"the target refused to create subscription {self.name(part)} "
                                       f"({_describe_fields(fields)}): {_one_line(err)}")
        return created.name

    def get_subscription(self, path: str):
        return self.call("GetSubscription", {"subscription": path},
                         lambda: self.subscriber.get_subscription(subscription=path, timeout=30), _request_fields)

    # -- messages
    def publish(self, topic: str, data: bytes, ordering_key: str = "", publisher=None, **attributes) -> str:
        client = publisher or self.publisher
        request = {"topic": topic, "data": data.decode(errors="replace"), "ordering_key": ordering_key,
                   "attributes": attributes}
        return self.call("Publish", request,
                         lambda: client.publish(topic, data, ordering_key=ordering_key, retry=None, timeout=30,
                                                **attributes).result(timeout=60),
                         lambda message_id: {"message_id": message_id})

    def pull(self, subscription: str, max_messages: int = 10) -> list:
        """One unary Pull; an empty answer or a deadline is no message. Other errors are recorded and
        answered as no message too (the emulator's Pull on ordered subscriptions fails now and then)."""
        from google.api_core import exceptions

        try:
            response = self.call(
                "Pull", {"subscription": subscription, "max_messages": max_messages},
                lambda: self.subscriber.pull(request={"subscription": subscription, "max_messages": max_messages},
                                             timeout=PULL_TIMEOUT_S, retry=None),
                lambda r: {"received_messages": [_delivery(m) for m in r.received_messages]})
        except Interrupted:
            raise
        except exceptions.DeadlineExceeded:
            return []
        except exceptions.GoogleAPICallError:
            self.sleep(0.2)
            return []
        return list(response.received_messages)

    def pull_until(self, subscription: str, enough: Callable[[list], bool], within_s: float,
                   on_message: Callable | None = None) -> list:
        """Pull until `enough(received so far)` or `within_s` elapsed; `on_message` sees each delivery."""
        deadline = time.monotonic() + within_s
        received: list = []
        while not enough(received) and time.monotonic() < deadline:
            got = self.pull(subscription)
            for message in got:
                received.append(message)
                if on_message is not None:
                    on_message(message)
            if not got:
                self.sleep(0.1)  # a target may answer an empty Pull at once
        return received

    def acknowledge(self, subscription: str, ack_ids: list[str]) -> Exception | None:
        """Unary Acknowledge without retry: the target's first answer is the evidence. Returns its error."""
        try:
            self.call("Acknowledge", {"subscription": subscription, "ack_ids": ack_ids},
                      lambda: self.subscriber.acknowledge(subscription=subscription, ack_ids=ack_ids, timeout=30,
                                                          retry=None))
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the result is the evidence
            return err
        return None

    def nack(self, subscription: str, ack_ids: list[str]) -> Exception | None:
        try:
            self.call("ModifyAckDeadline", {"subscription": subscription, "ack_ids": ack_ids, "ack_deadline_seconds": 0},
                      lambda: self.subscriber.modify_ack_deadline(subscription=subscription, ack_ids=ack_ids,
                                                                  ack_deadline_seconds=0, timeout=30, retry=None))
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the result is the evidence
            return err
        return None


def _request_fields(message) -> dict:
    """A proto-plus message as a dict of its set fields (durations in seconds)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(type(message).pb(message), preserving_proto_field_name=True)


def _describe_fields(fields: dict) -> str:
    return ", ".join(f"{key}={value!r}" if not hasattr(value, "_pb") else key for key, value in fields.items()) or "defaults"


def _one_line(err: Exception) -> str:
    return " ".join(f"{type(err).__name__}: {getattr(err, 'message', None) or err}".split())[:300]


def _ack_status(err: Exception | None) -> str:
    from validation.probe import _unary_ack_result

    return _unary_ack_result(err)


def _seq(received) -> str:
    return received.message.data.decode(errors="replace")


# ------------------------------------------------------------------------------------ exactly-once
EOD_SOURCE = (f"{FACTS_DOC} § Exactly-once delivery (seed 002): only the latest ack ID of a message is valid; an "
              f"acknowledge with an expired or superseded ack ID fails with INVALID_ARGUMENT. {DOC_EXACTLY_ONCE}")


def _eod_subscription(probe: Probe) -> tuple[str, str]:
    topic = probe.create_topic("topic")
    return topic, probe.create_subscription("sub", topic, enable_exactly_once_delivery=True,
                                            ack_deadline_seconds=ACK_DEADLINE_S)


def _first_delivery(probe: Probe, subscription: str, what: str):
    got = probe.pull_until(subscription, bool, DELIVERY_WINDOW_S)
    if not got:
        raise Outcome(INCONCLUSIVE, f"{what} was not delivered within {DELIVERY_WINDOW_S:g} s")
    return got[0]


def _ack_verdict(err: Exception | None, situation: str) -> tuple[str, str]:
    status = _ack_status(err)
    if status == "invalid_ack_id":
        info = _error(err)
        why = ", ".join([info.get("reason", "")] + sorted(set(info.get("metadata", {}).values()))).strip(", ")
        return HOLDS, f"{situation}: the target answered {info['code']}" + (f" ({why})" if why else "")
    if status == "success":
        return VIOLATED, f"{situation}: the target answered OK (accepted an ack id that is no longer valid)"
    return INCONCLUSIVE, f"{situation}: the target answered neither OK nor an invalid-ack-id error: {_one_line(err)}"


@scenario("eod-stale-ack-rejected",
          "exactly-once: an ack with an ack id whose deadline passed (no pull outstanding) is rejected",
          EOD_SOURCE)
def eod_stale_ack_rejected(probe: Probe) -> tuple[str, str]:
    topic, subscription = _eod_subscription(probe)
    probe.publish(topic, b"stale")
    message = _first_delivery(probe, subscription, "the message")
    received_at = time.monotonic()
    probe.note(f"no call for {ACK_DEADLINE_S + EXPIRY_MARGIN_S:g} s: the {ACK_DEADLINE_S} s ack deadline passes")
    probe.sleep(ACK_DEADLINE_S + EXPIRY_MARGIN_S)
    waited = time.monotonic() - received_at
    err = probe.acknowledge(subscription, [message.ack_id])
    return _ack_verdict(err, f"ack {waited:.1f} s after the delivery (deadline {ACK_DEADLINE_S} s)")


@scenario("eod-superseded-ack-rejected",
          "exactly-once: after a redelivery, an ack with the earlier delivery's ack id is rejected",
          EOD_SOURCE)
def eod_superseded_ack_rejected(probe: Probe) -> tuple[str, str]:
    topic, subscription = _eod_subscription(probe)
    probe.publish(topic, b"superseded")
    first = _first_delivery(probe, subscription, "the message")
    err = probe.nack(subscription, [first.ack_id])
    if err is not None:
        raise Outcome(INCONCLUSIVE, f"the nack that should cause a redelivery failed: {_one_line(err)}")
    second = _first_delivery(probe, subscription, "the redelivery after a nack")
    if second.message.message_id != first.message.message_id:
        raise Outcome(INCONCLUSIVE, f"expected a redelivery of {first.message.message_id}, "
                                    f"got message {second.message.message_id}")
    if second.ack_id == first.ack_id:
        raise Outcome(INCONCLUSIVE, "the redelivery carried the same ack id, so no ack id was superseded")
    err = probe.acknowledge(subscription, [first.ack_id])
    verdict = _ack_verdict(err, "ack with the first delivery's ack id after the redelivery")
    current = probe.acknowledge(subscription, [second.ack_id])
    return verdict[0], verdict[1] + f"; the current ack id: {_ack_status(current)}"


@scenario("eod-no-redelivery-after-ack",
          "exactly-once: a message acked successfully within its deadline is never redelivered",
          f"{FACTS_DOC} § Exactly-once delivery (seed 002): no redelivery after a successful ack. {DOC_EXACTLY_ONCE}")
def eod_no_redelivery_after_ack(probe: Probe) -> tuple[str, str]:
    import queue

    from google.cloud import pubsub_v1

    from validation.probe import _ack_result

    topic, subscription = _eod_subscription(probe)
    deliveries: queue.Queue = queue.Queue()

    def callback(message):
        probe.note(f"streaming pull delivered message {message.message_id} (delivery_attempt "
                   f"{message.delivery_attempt}, data {message.data.decode(errors='replace')!r})")
        deliveries.put(message)

    probe.note(f"StreamingPull opened on {subscription}")
    stream = probe.subscriber.subscribe(subscription, callback,
                                        flow_control=pubsub_v1.types.FlowControl(max_messages=10))
    try:
        message_id = probe.publish(topic, b"acked-once")
        try:
            message = deliveries.get(timeout=DELIVERY_WINDOW_S)
        except queue.Empty:
            raise Outcome(INCONCLUSIVE, f"the message was not delivered within {DELIVERY_WINDOW_S:g} s") from None
        result = _ack_result(message.ack_with_response())
        probe.note(f"ack_with_response() of message {message.message_id}: {result}")
        if result != "success":
            raise Outcome(INCONCLUSIVE, f"the ack within the deadline did not succeed ({result}), so the guarantee "
                                        "for successful acks was not exercised")
        watch = ACK_DEADLINE_S + EXPIRY_MARGIN_S + 2
        probe.sleep(watch)
    finally:
        stream.cancel()
        try:
            stream.result(timeout=10)
        except Exception:  # noqa: BLE001 - a cancelled stream ends with its cancellation
            pass
        probe.note("StreamingPull closed")
    again = [m for m in _drain_queue(deliveries) if m.message_id == message_id]
    if again:
        return VIOLATED, (f"acked successfully, then redelivered {len(again)} time(s) within {watch:g} s "
                          f"(delivery_attempt {[m.delivery_attempt for m in again]})")
    return HOLDS, f"acked successfully with ack_with_response(); not redelivered in the {watch:g} s after the ack " \
                  f"(more than the {ACK_DEADLINE_S} s deadline)"


def _drain_queue(q) -> list:
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    return items


# ---------------------------------------------------------------------------------------- ordering
ORDER_SOURCE = (f"{FACTS_DOC} § Ordering (seeds 000/001/004): a redelivery of message n triggers redelivery of "
                f"every later message of that key, acknowledged ones included (the stream rewinds to n). {DOC_ORDERING}")


def _ordered_redelivery(probe: Probe, nack: bool) -> tuple[str, str]:
    topic = probe.create_topic("topic")
    subscription = probe.create_subscription("sub", topic, enable_message_ordering=True,
                                             ack_deadline_seconds=ACK_DEADLINE_S)
    for seq in range(4):
        probe.publish(topic, str(seq).encode(), ordering_key="A")
    first = probe.pull_until(subscription, lambda got: {_seq(m) for m in got} >= {"0", "1", "2", "3"},
                             DELIVERY_WINDOW_S)
    order = [_seq(m) for m in first]
    if set(order) < {"0", "1", "2", "3"}:
        raise Outcome(INCONCLUSIVE, f"the first delivery of 0..3 was incomplete within {DELIVERY_WINDOW_S:g} s: {order}")
    if order[:4] != ["0", "1", "2", "3"]:
        return VIOLATED, f"the first delivery of key A was not in publish order: {order}"
    by_seq = {_seq(m): m for m in first}
    for seq in ("0", "2", "3"):
        probe.acknowledge(subscription, [by_seq[seq].ack_id])
    if nack:
        err = probe.nack(subscription, [by_seq["1"].ack_id])
        if err is not None:
            raise Outcome(INCONCLUSIVE, f"the nack of 1 failed: {_one_line(err)}")
        window = DELIVERY_WINDOW_S
        how = "nacked"
    else:
        probe.note(f"1 is neither acked nor nacked: its {ACK_DEADLINE_S} s deadline runs out")
        window = ACK_DEADLINE_S + DELIVERY_WINDOW_S
        how = "left to expire"
    settled = time.monotonic()
    arrivals: list[float] = []

    def on_redelivery(message) -> None:
        arrivals.append(time.monotonic() - settled)
        probe.acknowledge(subscription, [message.ack_id])  # at once: Pub/Sub keeps one batch per key outstanding

    redelivered = probe.pull_until(subscription, lambda got: "3" in [_seq(m) for m in got], window,
                                   on_message=on_redelivery)
    again = [_seq(m) for m in redelivered]
    if not again:
        return INCONCLUSIVE, f"1 was {how}, and nothing was redelivered within {window:g} s"
    how += f" (first redelivery {arrivals[0]:.1f} s later)"
    if again[0] != "1":
        return VIOLATED, f"1 was {how}; the redelivery began with {again[0]}, before 1: {again}"
    if again[:3] == ["1", "2", "3"]:
        return HOLDS, f"1 was {how}; redelivered {again}: the key rewound to 1 and went on in order"
    if again == ["1"]:
        return VIOLATED, (f"1 was {how}; 1 was redelivered alone and 2, 3 (acked) were not redelivered within "
                          f"{window:g} s: no rewind")
    return VIOLATED, f"1 was {how}; the redelivery was {again}, not 1, 2, 3 in order"


@scenario("ordered-nack-redelivers-in-order",
          "ordering: key A, 0..3 received, 0, 2, 3 acked and 1 nacked: redelivered 1, 2, 3 in order",
          ORDER_SOURCE)
def ordered_nack_redelivers_in_order(probe: Probe) -> tuple[str, str]:
    return _ordered_redelivery(probe, nack=True)


@scenario("ordered-expiry-redelivers-in-order",
          "ordering: key A, 0..3 received, 0, 2, 3 acked and 1 left to expire: redelivered 1, 2, 3 in order",
          ORDER_SOURCE)
def ordered_expiry_redelivers_in_order(probe: Probe) -> tuple[str, str]:
    return _ordered_redelivery(probe, nack=False)


@scenario("ordering-immutable",
          "ordering is fixed at creation: an update of enable_message_ordering is refused",
          f"{FACTS_DOC} § Ordering: ordering is a subscription setting fixed at creation (update is rejected). "
          f"{DOC_ORDERING}")
def ordering_immutable(probe: Probe) -> tuple[str, str]:
    from google.pubsub_v1 import types

    topic = probe.create_topic("topic")
    subscription = probe.create_subscription("sub", topic, enable_message_ordering=True)
    request = {"subscription": types.Subscription(name=subscription, enable_message_ordering=False),
               "update_mask": {"paths": ["enable_message_ordering"]}}
    try:
        probe.call("UpdateSubscription", {"subscription": {"name": subscription, "enable_message_ordering": False},
                                          "update_mask": ["enable_message_ordering"]},
                   lambda: probe.subscriber.update_subscription(request=request, timeout=30, retry=None),
                   _request_fields)
        refused = None
    except Interrupted:
        raise
    except Exception as err:  # noqa: BLE001 - the refusal is the expected answer
        refused = err
    stored = probe.get_subscription(subscription).enable_message_ordering
    if refused is None:
        return VIOLATED, f"the update to enable_message_ordering=false was accepted; the target now holds {stored}"
    if not stored:
        return VIOLATED, f"the update was refused ({_one_line(refused)}) but the target holds ordering off"
    return HOLDS, f"the update was refused ({_one_line(refused)}); ordering still on"


# ------------------------------------------------------------------------------------- dead letter
@scenario("dead-letter-after-max-attempts",
          "a message nacked every time is forwarded to the dead-letter topic after about max_delivery_attempts, "
          "with delivery_attempt counts and the CloudPubSubDeadLetterSource* attributes",
          f"{FACTS_DOC} § Dead-letter topics: attempts 5..100 counted best effort; forwarded messages carry "
          f"CloudPubSubDeadLetterSourceDeliveryCount, …SourceSubscription, …SourceSubscriptionProject, "
          f"…SourceTopicPublishTime. {DOC_DEAD_LETTER}")
def dead_letter_after_max_attempts(probe: Probe) -> tuple[str, str]:
    return _dead_letter_after_max_attempts(probe, ordered=False)


@scenario("dead-letter-ordered-after-max-attempts",
          "on an ordered subscription too, a message nacked every time is forwarded to the dead-letter topic after "
          "about max_delivery_attempts (only its order relative to the key's other messages is best effort)",
          f"{FACTS_DOC} § Ordering: with a dead-letter topic the rewind may not hold and order may not be kept for "
          f"dead-lettered messages (best effort); § Dead-letter topics. {DOC_DEAD_LETTER}")
def dead_letter_ordered_after_max_attempts(probe: Probe) -> tuple[str, str]:
    return _dead_letter_after_max_attempts(probe, ordered=True)


def _dead_letter_after_max_attempts(probe: Probe, ordered: bool) -> tuple[str, str]:
    from google.pubsub_v1 import types

    attempts_max = facts.MAX_DELIVERY_ATTEMPTS_MIN
    topic = probe.create_topic("topic")
    dead_letter = probe.create_topic("dead")
    drain = probe.create_subscription("drain", dead_letter)
    subscription = probe.create_subscription(
        "sub", topic, ack_deadline_seconds=ACK_DEADLINE_S, enable_message_ordering=ordered,
        dead_letter_policy=types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts_max))
    _grant_service_agent(probe, dead_letter, subscription)
    message_id = probe.publish(topic, b"poison", ordering_key="A" if ordered else "")
    attempts: list[int] = []
    forwarded: list = []
    limit = attempts_max + 5
    while len(attempts) < limit:
        got = [m for m in probe.pull_until(subscription, bool, PULL_TIMEOUT_S) if m.message.message_id == message_id]
        if not got:
            forwarded = probe.pull_until(drain, bool, PULL_TIMEOUT_S)
            if forwarded:
                break
            if not attempts:
                raise Outcome(INCONCLUSIVE, f"the message was not delivered within {PULL_TIMEOUT_S:g} s")
            break  # no redelivery and nothing forwarded within a pull window: wait for the forward below
        attempts.append(got[0].delivery_attempt)
        probe.nack(subscription, [got[0].ack_id])
    if not forwarded:
        forwarded = probe.pull_until(drain, bool, FORWARD_WINDOW_S if len(attempts) >= attempts_max else DELIVERY_WINDOW_S)
    for message in forwarded:
        probe.acknowledge(drain, [message.ack_id])
    seen = f"delivery_attempt over {len(attempts)} deliveries: {attempts}"
    if not forwarded:
        if len(attempts) >= limit:
            return VIOLATED, f"nacked {len(attempts)} times (max_delivery_attempts {attempts_max}), never forwarded; {seen}"
        if len(attempts) >= attempts_max:
            return VIOLATED, (f"nacked {len(attempts)} times (max_delivery_attempts {attempts_max}), then neither "
                              f"delivered again nor forwarded within {FORWARD_WINDOW_S:g} s: the message is gone; {seen}")
        return INCONCLUSIVE, f"deliveries stopped after {len(attempts)} nacks but nothing reached the dead-letter " \
                             f"topic within {DELIVERY_WINDOW_S:g} s; {seen}"
    attributes = dict(forwarded[0].message.attributes)
    problems = []
    missing = [a for a in ("CloudPubSubDeadLetterSourceDeliveryCount", "CloudPubSubDeadLetterSourceSubscription",
                           "CloudPubSubDeadLetterSourceSubscriptionProject", "CloudPubSubDeadLetterSourceTopicPublishTime")
               if a not in attributes]
    if missing:
        problems.append(f"forwarded without {', '.join(missing)}")
    if len(attempts) < attempts_max:
        problems.append(f"forwarded after {len(attempts)} deliveries, fewer than max_delivery_attempts {attempts_max}")
    if attempts != list(range(1, len(attempts) + 1)):
        problems.append(f"delivery_attempt did not count 1, 2, …: {attempts}")
    count = attributes.get("CloudPubSubDeadLetterSourceDeliveryCount")
    carried = sorted(k for k in attributes if k.startswith("CloudPubSubDeadLetter") and not k.endswith("DeliveryCount"))
    attributes_seen = f"CloudPubSubDeadLetterSourceDeliveryCount={count}, {', '.join(carried) or 'no other source attribute'}"
    if problems:
        return VIOLATED, "; ".join(problems) + f"; {seen}; forwarded with {attributes_seen}"
    return HOLDS, f"forwarded after {len(attempts)} deliveries ({seen}) with {attributes_seen}"


def _grant_service_agent(probe: Probe, dead_letter: str, subscription: str) -> None:
    """Give the Pub/Sub service agent its two roles (Google Cloud; the emulator has no IAM)."""
    if probe.session.target == "emulator":
        probe.note("no IAM grants: the emulator implements no IAM and forwards without them (docs/emulator.md)")
        return
    number = probe.session.project_number
    if not number:
        raise Outcome(INCONCLUSIVE, "without --project-number conform cannot grant the Pub/Sub service agent "
                                    "roles/pubsub.publisher on the dead-letter topic and roles/pubsub.subscriber on "
                                    "the subscription, and without them nothing is forwarded")
    member = f"serviceAccount:{facts.pubsub_service_agent(number)}"
    for resource, role, client in ((dead_letter, facts.PUBLISHER_ROLE, probe.publisher),
                                   (subscription, facts.SUBSCRIBER_ROLE, probe.subscriber)):
        policy = probe.call("GetIamPolicy", {"resource": resource},
                            lambda: client.get_iam_policy(request={"resource": resource}, timeout=30))
        policy.bindings.add(role=role, members=[member])
        probe.call("SetIamPolicy", {"resource": resource, "role": role, "member": member},
                   lambda: client.set_iam_policy(request={"resource": resource, "policy": policy}, timeout=30))


# ---------------------------------------------------------------------------------- create rejects
def _create_rejects(probe: Probe, control: dict, invalid: dict[str, dict], topic: str | None = None) -> tuple[str, str]:
    """The control subscription must be accepted (else `unsupported`); each invalid one must be refused."""
    topic = topic or probe.create_topic("topic")
    probe.create_subscription("control", topic, **control)
    accepted, refused = [], []
    for part, fields in invalid.items():
        created, err = probe.try_create_subscription(part, topic, **fields)
        if err is None:
            accepted.append(part)
        else:
            refused.append(f"{part}: {_one_line(err)}")
    if accepted:
        return VIOLATED, f"accepted {', '.join(accepted)} (must be refused)" + (
            f"; refused {'; '.join(refused)}" if refused else "")
    return HOLDS, f"refused {'; '.join(refused)} (control accepted)"


@scenario("create-rejects-push-with-exactly-once",
          "a push subscription with exactly-once delivery is refused at creation",
          f"{FACTS_DOC} § Exactly-once delivery (seed 002): pull and StreamingPull only; push and export "
          f"subscriptions do not support it. {DOC_EXACTLY_ONCE}")
def create_rejects_push_with_exactly_once(probe: Probe) -> tuple[str, str]:
    from google.pubsub_v1 import types

    # Nothing is ever published to this topic, so no push is attempted; on the emulator it is a loopback URL.
    endpoint = ("https://127.0.0.1:9/pubsubguard-conform" if probe.session.target == "emulator"
                else "https://example.com/pubsubguard-conform")
    push = types.PushConfig(push_endpoint=endpoint)
    return _create_rejects(probe, {"push_config": push},
                           {"push-eod": {"push_config": push, "enable_exactly_once_delivery": True}})


@scenario("create-rejects-ack-deadline-out-of-range",
          f"ack_deadline_seconds outside {facts.ACK_DEADLINE_MIN_S}..{facts.ACK_DEADLINE_MAX_S} is refused at creation",
          f"{FACTS_DOC} § Ranges and formats: ack_deadline_seconds 10..600. {DOC_SUBSCRIPTION_API}")
def create_rejects_ack_deadline_out_of_range(probe: Probe) -> tuple[str, str]:
    low, high = facts.ACK_DEADLINE_MIN_S - 1, facts.ACK_DEADLINE_MAX_S + 1
    return _create_rejects(probe, {"ack_deadline_seconds": facts.ACK_DEADLINE_MIN_S},
                           {f"ack-{low}": {"ack_deadline_seconds": low}, f"ack-{high}": {"ack_deadline_seconds": high}})


@scenario("create-rejects-self-dead-letter",
          "a dead-letter topic equal to the subscription's own topic is refused at creation",
          f"{FACTS_DOC} § Dead-letter topics: the dead-letter topic must differ from the subscription's topic. "
          f"{DOC_DEAD_LETTER}")
def create_rejects_self_dead_letter(probe: Probe) -> tuple[str, str]:
    from google.pubsub_v1 import types

    topic = probe.create_topic("topic")
    dead_letter = probe.create_topic("dead")
    return _create_rejects(
        probe, {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=5)},
        {"self-dead-letter": {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=topic,
                                                                           max_delivery_attempts=5)}},
        topic=topic)


@scenario("create-rejects-attempts-out-of-range",
          f"max_delivery_attempts outside {facts.MAX_DELIVERY_ATTEMPTS_MIN}..{facts.MAX_DELIVERY_ATTEMPTS_MAX} "
          "is refused at creation",
          f"{FACTS_DOC} § Dead-letter topics: attempts 5..100. {DOC_DEAD_LETTER}")
def create_rejects_attempts_out_of_range(probe: Probe) -> tuple[str, str]:
    from google.pubsub_v1 import types

    dead_letter = probe.create_topic("dead")
    low, high = facts.MAX_DELIVERY_ATTEMPTS_MIN - 1, facts.MAX_DELIVERY_ATTEMPTS_MAX + 1

    def policy(attempts):
        return {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts)}

    return _create_rejects(probe, policy(facts.MAX_DELIVERY_ATTEMPTS_MIN),
                           {f"attempts-{low}": policy(low), f"attempts-{high}": policy(high)})


# ------------------------------------------------------------------------------ filter, retention
@scenario("filter-enforced",
          "a subscription with filter attributes.kind = \"a\" receives only the messages that match",
          f"{FACTS_DOC} § Ranges and formats (filter, immutable); messages that do not match are acknowledged "
          f"automatically and never delivered. {DOC_FILTER}")
def filter_enforced(probe: Probe) -> tuple[str, str]:
    topic = probe.create_topic("topic")
    subscription = probe.create_subscription("sub", topic, filter='attributes.kind = "a"')
    probe.publish(topic, b"a", kind="a")
    probe.publish(topic, b"b", kind="b")
    probe.publish(topic, b"none")
    got = probe.pull_until(subscription, lambda ms: len(ms) >= 3, DELIVERY_WINDOW_S,
                           on_message=lambda m: probe.acknowledge(subscription, [m.ack_id]))
    delivered = sorted(_seq(m) for m in got)
    if [d for d in delivered if d != "a"]:
        return VIOLATED, f"delivered {delivered}; only 'a' matches the filter"
    if "a" not in delivered:
        return INCONCLUSIVE, f"the matching message was not delivered within {DELIVERY_WINDOW_S:g} s"
    return HOLDS, f"delivered {delivered} of a (kind=a), b (kind=b), none (no attributes) in {DELIVERY_WINDOW_S:g} s"


RETENTIONS_S = (facts.RETENTION_MIN_S, 7 * 24 * 3600, facts.RETENTION_MAX_S)


@scenario("retention-as-declared",
          "message retention of 10 min, 7 d and 31 d (subscription) and 31 d (topic) is accepted and read back "
          "as declared",
          f"{FACTS_DOC} § Ranges and formats: subscription retention 10 min..31 days (default 7 days). "
          f"{DOC_SUBSCRIPTION_API}")
def retention_as_declared(probe: Probe) -> tuple[str, str]:
    topic = probe.create_topic("topic", message_retention_duration={"seconds": facts.TOPIC_RETENTION_MAX_S})
    stored_topic = probe.call("GetTopic", {"topic": topic}, lambda: probe.publisher.get_topic(topic=topic, timeout=30),
                              _request_fields)
    differs, refused, kept = [], [], []
    topic_seconds = _duration_s(stored_topic.message_retention_duration)
    (kept if topic_seconds == facts.TOPIC_RETENTION_MAX_S else differs).append(
        f"topic {facts.TOPIC_RETENTION_MAX_S} s -> {topic_seconds:.0f} s" if topic_seconds is not None else "topic: none")
    for seconds in RETENTIONS_S:
        created, err = probe.try_create_subscription(f"ret-{seconds}", topic, message_retention_duration={"seconds": seconds})
        if err is not None:
            refused.append(f"{seconds} s: {_one_line(err)}")
            continue
        actual = _duration_s(probe.get_subscription(created.name).message_retention_duration)
        (kept if actual == seconds else differs).append(f"subscription {seconds} s -> {actual:.0f} s")
    parts = [f"read back as declared: {', '.join(kept)}"] if kept else []
    if differs:
        parts.append(f"read back differently: {', '.join(differs)}")
    if refused:
        parts.append(f"refused: {'; '.join(refused)}")
    result = VIOLATED if differs else UNSUPPORTED if refused else HOLDS
    return result, "; ".join(parts)


# ------------------------------------------------------------------------------- publisher (client)
@scenario("ordered-publish-failure-pauses-key",
          "after a failed publish on an ordering key, later publishes on that key fail until resume_publish; "
          "other keys go on; messages published after the resume arrive in order",
          f"{FACTS_DOC} § Ordering, publisher side (seed 003): once a publish with an ordering key fails, later "
          f"publishes for that key fail until the publisher calls resume_publish(topic, key). {DOC_RESUME}")
def ordered_publish_failure_pauses_key(probe: Probe) -> tuple[str, str]:
    topic = probe.create_topic("topic")
    subscription = probe.create_subscription("sub", topic, enable_message_ordering=True)
    publisher = probe.session.new_publisher()
    problems = []
    try:
        # The injected failure: a message with neither data nor attributes, which Pub/Sub refuses.
        try:
            probe.publish(topic, b"", ordering_key="A", publisher=publisher)
            raise Outcome(INCONCLUSIVE, "the target accepted an empty message, so no publish failure was injected")
        except Outcome:
            raise
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the failure we wanted
            injected = _one_line(err)
        try:
            probe.publish(topic, b"1", ordering_key="A", publisher=publisher)
            problems.append("the publish after the failure on key A succeeded without resume_publish")
            paused = "not paused"
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the expected pause
            paused = type(err).__name__
        try:
            probe.publish(topic, b"b", ordering_key="B", publisher=publisher)
        except Interrupted:
            raise
        except Exception as err:  # noqa: BLE001 - recorded
            problems.append(f"key B failed too while A was paused: {_one_line(err)}")
        probe.note("resume_publish(topic, 'A')")
        publisher.resume_publish(topic, "A")
        for seq in ("2", "3", "4"):
            try:
                probe.publish(topic, seq.encode(), ordering_key="A", publisher=publisher)
            except Interrupted:
                raise
            except Exception as err:  # noqa: BLE001 - recorded
                problems.append(f"publish {seq} on A after resume_publish failed: {_one_line(err)}")
    finally:
        publisher.stop()
    got = probe.pull_until(subscription, lambda ms: {"2", "3", "4", "b"} <= {_seq(m) for m in ms}, DELIVERY_WINDOW_S,
                           on_message=lambda m: probe.acknowledge(subscription, [m.ack_id]))
    key_a = [_seq(m) for m in got if m.message.ordering_key == "A"]
    if [s for s in key_a if s not in ("2", "3", "4")]:
        problems.append(f"key A delivered messages that were not published successfully: {key_a}")
    elif list(dict.fromkeys(key_a)) != sorted(set(key_a)):  # first arrivals; a redelivery may repeat some
        problems.append(f"key A after the resume arrived out of order: {key_a}")
    story = f"injected: {injected}; next publish on A: {paused}; key A delivered {key_a}"
    if problems:
        return VIOLATED, "; ".join(problems) + f" ({story})"
    if key_a != ["2", "3", "4"]:
        return INCONCLUSIVE, f"messages after the resume not all delivered within {DELIVERY_WINDOW_S:g} s ({story})"
    return HOLDS, story


# ------------------------------------------------------------------------------------- attribution
# Which verification findings (validation.checks: kind, and form -- for config_drift the setting) a
# scenario's documented behaviour governs: when that scenario is `violated` on the same target in the
# same run, the target lacking that behaviour explains the finding. The one place findings are linked
# to scenarios; `explained_by` applies it to measured results only, never to a scenario that held or
# did not run.
EXPLAINS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "eod-stale-ack-rejected": (("stale_ack_accepted", "late_ack"),),
    "eod-superseded-ack-rejected": (("stale_ack_accepted", "superseded"),),
    "eod-no-redelivery-after-ack": (("duplicate_after_ack", None),),
    "ordered-nack-redelivers-in-order": (("out_of_order", None),),
    "ordered-expiry-redelivers-in-order": (("out_of_order", None),),
    "ordered-publish-failure-pauses-key": (("out_of_order", None),),
    "dead-letter-after-max-attempts": (("dead_letter_missing", None), ("dead_letter_early", None),
                                       ("dead_letter_after_ack", None), ("delivery_attempts_exceeded", None)),
    "dead-letter-ordered-after-max-attempts": (("dead_letter_missing", None), ("dead_letter_early", None),
                                               ("dead_letter_after_ack", None), ("delivery_attempts_exceeded", None)),
    "filter-enforced": (("unexpected", "foreign"),),
    "retention-as-declared": (("config_drift", "retention_seconds"),),
}


# Scenarios that measure a behaviour of ordered subscriptions only: they explain findings on those alone.
ORDERED_ONLY = frozenset({"dead-letter-ordered-after-max-attempts"})

# Scenarios whose `unsupported` (the target refused the setting as declared) explains a config_drift of
# that setting too: a target that refuses the declared value holds another one, which is the drift.
EXPLAINS_WHEN_REFUSED = frozenset({"retention-as-declared"})


def explained_by(finding: dict, results: dict[str, str], ordered: bool = False) -> list[str]:
    """The ids of the scenarios, `violated` in `results` (scenario id -> result), whose behaviour
    explains `finding` (EXPLAINS; ORDERED_ONLY ones only when the finding's subscription is `ordered`;
    EXPLAINS_WHEN_REFUSED ones also when `unsupported`, for config drift); empty when none does."""
    form = (finding.get("drift") or {}).get("setting") if finding["kind"] == "config_drift" else finding.get("form")

    def deviates(scenario: str) -> bool:
        result = results.get(scenario)
        return result == VIOLATED or (result == UNSUPPORTED and scenario in EXPLAINS_WHEN_REFUSED
                                      and finding["kind"] == "config_drift")

    return [scenario for scenario, governs in EXPLAINS.items()
            if deviates(scenario) and (ordered or scenario not in ORDERED_ONLY)
            and any(kind == finding["kind"] and wanted in (None, form) for kind, wanted in governs)]


# ----------------------------------------------------------------------------------------- running
def run_one(session: Session, spec: Scenario) -> dict:
    probe = Probe(session, spec.id)
    try:
        result, detail = spec.run(probe)
    except Outcome as outcome:
        result, detail = outcome.result, outcome.detail
    except Interrupted:
        result, detail = INCONCLUSIVE, "interrupted before it ended"
    except Exception as err:  # noqa: BLE001 - an unexpected answer is reported, not hidden
        result, detail = INCONCLUSIVE, f"the scenario could not finish: {_one_line(err)}"
    return {"id": spec.id, "behaviour": spec.behaviour, "source": spec.source, "result": result,
            "severity": severity_of_result(result), "detail": detail, "duration_s": probe.now(), "evidence": probe.evidence}


def run_scenarios(session: Session, scenarios: list[Scenario] | None = None,
                  on_done: Callable[[dict], None] | None = None) -> list[dict]:
    """Run the scenarios concurrently; on Ctrl-C/SIGTERM stop them, wait for their threads, re-raise.
    Cleanup is the caller's (`Session.cleanup`), in a `finally`."""
    scenarios = list(SCENARIOS if scenarios is None else scenarios)
    results: dict[str, dict] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, len(scenarios)), thread_name_prefix="conform")
    futures = {pool.submit(run_one, session, spec): spec for spec in scenarios}
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5)
            for future in done:
                results[futures[future].id] = future.result()
                if on_done is not None:
                    on_done(results[futures[future].id])
    except BaseException:
        session.stop.set()
        wait(futures, timeout=PULL_TIMEOUT_S + 30)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [results[spec.id] for spec in scenarios]


def conform(target: str, project: str, *, project_number: str | None = None, endpoint: str | None = None,
            scenarios: list[Scenario] | None = None, on_done: Callable[[dict], None] | None = None,
            log: Callable[[str], None] = print, run_id: str | None = None,
            stop: threading.Event | None = None) -> dict:
    """Run the scenarios on a target (run id: fresh unless given), delete what they created (also when
    interrupted, or when `stop` is set from another thread) and return the results document (conformance.json)."""
    from validation.probe import log_abandoned_ack_retries

    log_abandoned_ack_retries()
    run_id = run_id or new_run_id()
    started, began = utc_now(), time.monotonic()
    session = Session(target, project, run_id, project_number, api_endpoint=endpoint if target == "gcp" else None,
                      stop=stop)
    try:
        results = run_scenarios(session, scenarios, on_done=on_done)
    finally:
        cleanup = session.cleanup()
        session.close()
        if cleanup["failed"]:
            log(f"conform: NOT deleted: {', '.join(f['name'] for f in cleanup['failed'])}")
    return document(target, project, run_id, started, endpoint, results, cleanup, time.monotonic() - began)


def document(target: str, project: str, run_id: str, started: datetime, endpoint: str | None,
             scenarios: list[dict], cleanup: dict, duration_s: float) -> dict:
    counts = {result: sum(1 for s in scenarios if s["result"] == result) for result in RESULTS}
    return {"target": target, "endpoint": endpoint, "project": project, "run_id": run_id,
            "started": started.isoformat(timespec="seconds"), "duration_s": round(duration_s, 1),
            "summary": counts, "scenarios": scenarios, "cleanup": cleanup}


def exit_code(doc: dict) -> int:
    return 1 if doc["summary"][VIOLATED] else 0


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


# ------------------------------------------------------------------------------ docs/emulator.md
DOC_BEGIN = "<!-- conformance:begin -->"
DOC_END = "<!-- conformance:end -->"


def markdown_table(doc: dict) -> str:
    """The conformance section of docs/emulator.md: one row per scenario, from a run's conformance.json."""
    lines = [DOC_BEGIN, "",
             f"`pubsubguard conform --target {doc['target']}`, run {doc['run_id']} ({doc['started']}, "
             f"{doc['duration_s']:g} s): " + ", ".join(f"{n} {r}" for r, n in doc["summary"].items()) + ".", "",
             "| Scenario | Result | What the target did |", "| --- | --- | --- |"]
    for item in doc["scenarios"]:
        detail = re.sub(r"\s+", " ", item["detail"]).replace("|", "\\|")
        lines.append(f"| `{item['id']}` | **{item['result']}** | {detail} |")
    lines += ["", DOC_END]
    return "\n".join(lines)


def documented_results(text: str) -> dict[str, str]:
    """Scenario id -> result as written in the generated section of a document."""
    try:
        section = text[text.index(DOC_BEGIN):text.index(DOC_END)]
    except ValueError:
        return {}
    return dict(re.findall(r"^\| `([a-z0-9-]+)` \| \*\*([a-z]+)\*\* \|", section, flags=re.M))


def update_doc(path: Path, doc: dict) -> None:
    text = path.read_text()
    if DOC_BEGIN not in text or DOC_END not in text:
        raise SystemExit(f"{path}: no generated conformance section ({DOC_BEGIN} … {DOC_END})")
    head, rest = text.split(DOC_BEGIN, 1)
    tail = rest.split(DOC_END, 1)[1]
    path.write_text(head + markdown_table(doc) + tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.conformance",
                                     description="Rewrite a document's generated conformance section from a run.")
    parser.add_argument("--update-doc", type=Path, required=True, help="the document (docs/emulator.md)")
    parser.add_argument("results", type=Path, help="conformance.json of a `pubsubguard conform` run")
    args = parser.parse_args(argv)
    try:
        doc = json.loads(args.results.read_text())
    except (OSError, ValueError) as err:
        print(f"{args.results}: cannot read conformance results: {err}", file=sys.stderr)
        return 2
    update_doc(args.update_doc, doc)
    print(f"{args.update_doc}: conformance section rewritten from {args.results} (run {doc['run_id']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
