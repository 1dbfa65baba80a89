"""The conformance scenarios' client harness: the scenario registry (`scenario`, `SCENARIOS`), a
run's `ScenarioRun` (clients, throwaway resources, cleanup) and `ScenarioClient` (every request, response and error,
timed), and the outcome vocabulary (`RESULTS`). See `pubsubguard.validation.conformance`."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from pubsubguard.policies import pubsub_facts as facts


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


class ScenarioInterrupted(Exception):
    """The run is stopping (Ctrl-C / SIGTERM): a scenario ends at its next call or wait."""


class ScenarioEnded(Exception):
    """Ends a scenario early with a result (`unsupported` setup, `inconclusive` timing)."""

    def __init__(self, result: str, detail: str):
        super().__init__(detail)
        self.result, self.detail = result, detail


@dataclass(frozen=True)
class Scenario:
    id: str
    behaviour: str
    source: str
    run: Callable[["ScenarioClient"], tuple[str, str]]
    # It changes how the target serves *other* subscriptions while it runs (measured: the emulator slows every
    # subscription once one ordered dead-lettering subscription stalls): run after the others, and beside a
    # probe only once the probe's drain has ended.
    disturbs: bool = False


SCENARIOS: list[Scenario] = []


def scenario(scenario_id: str, behaviour: str, source: str, disturbs: bool = False):
    def register(function):
        SCENARIOS.append(Scenario(scenario_id, behaviour, source, function, disturbs))
        return function

    return register


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------------------ session
class ScenarioRun:
    """What the scenarios share: the target, its clients, the throwaway resources and the stop flag."""

    def __init__(self, target: str, project: str, run_id: str, project_number: str | None = None,
                 api_endpoint: str | None = None, stop: threading.Event | None = None,
                 emulator_host: str | None = None):
        from google.cloud import pubsub_v1

        self.target, self.project, self.run_id, self.project_number = target, project, run_id, project_number
        # Google Cloud: a locational endpoint when given (exactly-once holds for subscribers of one region).
        self.client_options = {"api_endpoint": api_endpoint} if api_endpoint else None
        # An emulator other than PUBSUB_EMULATOR_HOST's (the variable is the process's; the library prefers it to
        # client_options): dialled on a channel of its own, as the emulator is, without TLS or credentials.
        self.emulator_host = emulator_host
        self.publisher = self.new_publisher()
        self.subscriber = pubsub_v1.SubscriberClient(**self._dialled("subscriber"))
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
            **self._dialled("publisher"))

    def _dialled(self, kind: str) -> dict:
        """A client's keyword arguments: the session's endpoint, or a transport on `emulator_host`'s channel."""
        if self.emulator_host is None:
            return {"client_options": self.client_options}
        import grpc
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

        transport = PublisherGrpcTransport if kind == "publisher" else SubscriberGrpcTransport
        return {"transport": transport(channel=grpc.insecure_channel(self.emulator_host))}

    def track(self, kind: str, path: str) -> None:
        """Remember a created resource for cleanup; one created after cleanup began is deleted at once."""
        with self._lock:
            if not self._closed:
                (self._topics if kind == "topic" else self._subscriptions).append(path)
                return
        self._delete(kind, path)
        raise ScenarioInterrupted()

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


# ------------------------------------------------------------------------------------------ client
def error_record(err: Exception) -> dict:
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


def as_duration_s(value) -> float | None:
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


class ScenarioClient:
    """One scenario's view of the target: every call goes through `call`, which records the evidence."""

    def __init__(self, session: ScenarioRun, scenario_id: str):
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
            raise ScenarioInterrupted()

    def call(self, rpc: str, request: dict, function: Callable, summary: Callable = lambda response: None):
        """Run one request; record it with the response (summarised) or the error, and re-raise errors."""
        if self.session.stop.is_set():
            raise ScenarioInterrupted()
        entry = {"at_s": self.now(), "call": rpc, "request": request}
        self.evidence.append(entry)
        began = time.monotonic()
        try:
            response = function()
        except Exception as err:
            entry["took_ms"] = round((time.monotonic() - began) * 1000, 1)
            entry["error"] = error_record(err)
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
            self.call("CreateTopic", request_fields(request),
                      lambda: self.publisher.create_topic(request=request, timeout=30))
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - a refused setup is this scenario's result
            raise ScenarioEnded(UNSUPPORTED, f"the target refused to create topic {self.name(part)}: {one_line(err)}") from None
        self.session.track("topic", path)
        return path

    def try_create_subscription(self, part: str, topic: str, **fields):
        """Create a subscription; returns (the stored Subscription, None) or (None, the error)."""
        from google.pubsub_v1 import types

        path = self.subscription_path(part)
        request = types.Subscription(name=path, topic=topic, **fields)
        try:
            created = self.call("CreateSubscription", request_fields(request),
                                lambda: self.subscriber.create_subscription(request=request, timeout=30),
                                request_fields)
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the caller judges the refusal
            return None, err
        self.session.track("subscription", path)
        return created, None

    def create_subscription(self, part: str, topic: str, **fields) -> str:
        created, err = self.try_create_subscription(part, topic, **fields)
        if err is not None:
            raise ScenarioEnded(UNSUPPORTED, f"the target refused to create subscription {self.name(part)} "
                                       f"({_describe_fields(fields)}): {one_line(err)}")
        return created.name

    def get_subscription(self, path: str):
        return self.call("GetSubscription", {"subscription": path},
                         lambda: self.subscriber.get_subscription(subscription=path, timeout=30), request_fields)

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
        except ScenarioInterrupted:
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

    @contextlib.contextmanager
    def streaming(self, subscription: str, callback: Callable, **options):
        """A StreamingPull on `subscription` (the client library's `subscribe`) for the `with` block; closed
        at its end (its cancellation is not an error). Both are notes in the evidence."""
        self.note(f"StreamingPull opened on {subscription}")
        stream = self.subscriber.subscribe(subscription, callback, **options)
        try:
            yield stream
        finally:
            stream.cancel()
            try:
                stream.result(timeout=10)
            except Exception:  # noqa: BLE001 - a cancelled stream ends with its cancellation
                pass
            self.note("StreamingPull closed")

    def acknowledge(self, subscription: str, ack_ids: list[str]) -> Exception | None:
        """Unary Acknowledge without retry: the target's first answer is the evidence. Returns its error."""
        try:
            self.call("Acknowledge", {"subscription": subscription, "ack_ids": ack_ids},
                      lambda: self.subscriber.acknowledge(subscription=subscription, ack_ids=ack_ids, timeout=30,
                                                          retry=None))
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the result is the evidence
            return err
        return None

    def nack(self, subscription: str, ack_ids: list[str]) -> Exception | None:
        return self.modify_ack_deadline(subscription, ack_ids, 0)

    def modify_ack_deadline(self, subscription: str, ack_ids: list[str], seconds: int) -> Exception | None:
        """Unary ModifyAckDeadline without retry (0: a nack). Returns its error."""
        try:
            self.call("ModifyAckDeadline",
                      {"subscription": subscription, "ack_ids": ack_ids, "ack_deadline_seconds": seconds},
                      lambda: self.subscriber.modify_ack_deadline(subscription=subscription, ack_ids=ack_ids,
                                                                  ack_deadline_seconds=seconds, timeout=30, retry=None))
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the result is the evidence
            return err
        return None


def request_fields(message) -> dict:
    """A proto-plus message as a dict of its set fields (durations in seconds)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(type(message).pb(message), preserving_proto_field_name=True)


def _describe_fields(fields: dict) -> str:
    return ", ".join(f"{key}={value!r}" if not hasattr(value, "_pb") else key for key, value in fields.items()) or "defaults"


def one_line(err: Exception) -> str:
    return " ".join(f"{type(err).__name__}: {getattr(err, 'message', None) or err}".split())[:300]


def ack_status(err: Exception | None) -> str:
    from ..probe.acks import unary_ack_result

    return unary_ack_result(err)


def seq_of(received) -> str:
    return received.message.data.decode(errors="replace")
