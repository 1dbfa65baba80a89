"""Probe isolation: the probe never consumes from a declared subscription.

For each declared pull subscription `<sub>` (and push subscription, when the run has a push receiver:
pubsubguard.validation.probe.push) the probe creates a *twin* `<sub>-probe-<run8>` on the
same topic with the same ordering, exactly-once, ack deadline, retry and dead-letter policy (same
dead-letter topic), plus:

- filter `probe_contract.probe_filter(run_id)`: the twin sees only this run's messages;
- for a push subscription, the run's push receiver as its endpoint (no OIDC token: the receiver is the
  probe's own);
- for a twin with dead-lettering, the Pub/Sub service agent as `roles/pubsub.subscriber` on it (as the
  program grants it on the subscription it copies; `pubsubguard.validation.probe.access`), revoked before it is deleted;
- label `pubsubguard-probe=<run_id>` and a 1-day expiration (the shortest Pub/Sub allows) as the
  last-resort reaper when even `--cleanup` is never run;
- for an auto-created dead-letter topic, a twin of its dead-letter drain `<drain>-probe-<run8>` (same filter),
  so forwarded probe messages are read by the probe, not by the production drain.

Production subscriptions declared with `probe_isolation` exclude probe messages by filter
(`probe_contract.with_probe_exclusion`), so the probe's publishes neither reach nor delay their consumers.
Twins are deleted in `finally` and on SIGINT/SIGTERM (`Twins.delete`); `pubsubguard verify --cleanup`
deletes leftovers by label and name pattern (after SIGKILL). See docs/verification.md.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from dataclasses import dataclass, field

from pubsubguard.core import probe_contract
from pubsubguard.core.declared import Estate, PUSH, Subscription, short_name
from pubsubguard.core.errors import UserError
from pubsubguard.policies import pubsub_facts as facts

from .access import grant_subscriber, revoke_subscriber

PROBE_LABEL = "pubsubguard-probe"
TWIN_RE = re.compile(r".+-probe-[0-9a-f]{8}$")
TWIN_TTL_S = facts.EXPIRATION_MIN_S


class TwinIsolationError(UserError):
    pass


def twin_name(name: str, run_id: str) -> str:
    twin = f"{name}-probe-{run_id[:8]}"
    problem = facts.name_problem(twin)
    if problem:
        raise TwinIsolationError(f"subscription {name!r}: its probe twin name is invalid: {problem}")
    return twin


@dataclass(frozen=True)
class TwinSpec:
    """One subscription the probe creates and reads: what the driver decides of it and what the probe's tasks are
    handed (a frozen value, pickled to them as it is), read by its fields' names everywhere."""

    path: str
    topic_path: str
    declared_name: str  # the declared subscription (or drain) this twin stands for
    ordering: bool = False
    exactly_once: bool = False
    ack_deadline_s: int = facts.ACK_DEADLINE_DEFAULT_S
    dead_letter_topic_path: str | None = None
    max_delivery_attempts: int | None = None
    retry_min_backoff_s: float | None = None
    retry_max_backoff_s: float | None = None
    consumer_endpoint: str = facts.GLOBAL_ENDPOINT
    is_dead_letter_drain: bool = False  # the twin of a dead-letter drain (the subscription on a dead-letter topic)
    push_endpoint: str | None = None  # a push twin: the run's receiver (pubsubguard.validation.probe.push)

    @property
    def dead_lettering(self) -> bool:
        """The twin forwards what it cannot deliver to a dead-letter topic (its subscription's policy, copied)."""
        return self.dead_letter_topic_path is not None

    def request(self, run_id: str) -> dict:
        request = {
            "name": self.path,
            "topic": self.topic_path,
            "ack_deadline_seconds": self.ack_deadline_s,
            "enable_message_ordering": self.ordering,
            "enable_exactly_once_delivery": self.exactly_once,
            "filter": probe_contract.probe_filter(run_id),
            "labels": {PROBE_LABEL: run_id},
            "expiration_policy": {"ttl": {"seconds": TWIN_TTL_S}},
        }
        if self.push_endpoint:
            request["push_config"] = {"push_endpoint": self.push_endpoint}
        if self.dead_letter_topic_path:
            request["dead_letter_policy"] = {
                "dead_letter_topic": self.dead_letter_topic_path,
                "max_delivery_attempts": self.max_delivery_attempts,
            }
        if self.retry_min_backoff_s is not None or self.retry_max_backoff_s is not None:
            request["retry_policy"] = {
                "minimum_backoff": {"seconds": int(self.retry_min_backoff_s or 0)},
                "maximum_backoff": {"seconds": int(self.retry_max_backoff_s or facts.RETRY_BACKOFF_MAX_S)},
            }
        return request


NO_PUSH_RECEIVER = ("push subscription: no push receiver the service can reach on this target; give "
                    "--push-receiver URL (a URL that reaches the probe's loopback receiver) to probe it")


def not_probed(subscription: Subscription, push_url: str | None) -> str | None:
    """Why the probe does not read `subscription` (None: it does), given the run's push receiver URL."""
    if subscription.delivery_type == PUSH:
        return None if push_url else NO_PUSH_RECEIVER
    return subscription.not_probed


def twin_push_endpoint(push_url: str, twin_path: str) -> str:
    """Where a push twin pushes: the run's receiver, the twin's name in the path (pubsubguard.validation.probe.push)."""
    return f"{push_url.rstrip('/')}/push/{urllib.parse.quote(short_name(twin_path), safe='')}"


def plan_twins(estate: Estate, run_id: str, push_url: str | None = None) -> list[TwinSpec]:
    """The twins for every probed subscription (push ones pushing to `push_url`, the run's receiver),
    plus twins of dead-letter drains so every dead-letter topic is read."""
    project_prefix = f"projects/{estate.project}/subscriptions/"
    twins: list[TwinSpec] = []
    probed: list[Subscription] = [t for t in estate.subscriptions.values() if not_probed(t, push_url) is None]
    read_topics = {t.topic_path for t in probed}
    for target in probed:
        path = project_prefix + twin_name(target.name, run_id)
        twins.append(
            TwinSpec(
                path=path,
                push_endpoint=twin_push_endpoint(push_url, path) if target.delivery_type == PUSH else None,
                topic_path=target.topic_path,
                declared_name=target.name,
                ordering=target.ordering,
                exactly_once=target.exactly_once,
                ack_deadline_s=int(target.ack_deadline_s),
                dead_letter_topic_path=target.dead_letter_topic_path if target.dead_lettering else None,
                max_delivery_attempts=target.max_delivery_attempts,
                retry_min_backoff_s=target.retry_min_backoff_s,
                retry_max_backoff_s=target.retry_max_backoff_s,
                consumer_endpoint=target.consumer_endpoint,
            )
        )
    for target in probed:
        if not target.dead_lettering or target.dead_letter_topic_path in read_topics:
            continue  # no dead letters, or a twin on that topic already reads them
        dead_letter_drain = (short_name(target.dead_letter_drain) if target.dead_letter_drain
                             else f"{short_name(target.dead_letter_topic_path)}-drain")
        twins.append(
            TwinSpec(
                path=project_prefix + twin_name(dead_letter_drain, run_id),
                topic_path=target.dead_letter_topic_path,
                declared_name=dead_letter_drain,
                ack_deadline_s=60,
                consumer_endpoint=target.consumer_endpoint,
                is_dead_letter_drain=True,
            )
        )
        read_topics.add(target.dead_letter_topic_path)
    return twins


SEEK_NAMES = 8  # the refused-Seek observation names every twin up to this many
DELETE_PATIENCE_S = 30.0  # how long `Twins.delete` retries a delete the target does not answer


@dataclass
class Twins:
    """Creates the twins and deletes them exactly once (finally / signal handler)."""

    run_id: str
    specs: list[TwinSpec]
    subscriber: object  # google.cloud.pubsub_v1.SubscriberClient (admin calls)
    service_agent: str | None = None  # granted roles/pubsub.subscriber on dead-lettering twins
    created: list[str] = field(default_factory=list)
    iam: list[dict] = field(default_factory=list)  # every grant / revoke and the target's answer (run.json)
    granted: set[str] = field(default_factory=set)
    # each twin's Seek to the moment before the first was created, and the target's answer (run.json)
    seeks: list[dict] = field(default_factory=list)
    # a subscriber client for a consumer endpoint (pulls go through the twin's own endpoint: endpoint_pinning)
    consumer: object = None
    reused: list[str] = field(default_factory=list)  # `create(reuse=True)`: twins that existed, adopted as they were
    unanswered: str | None = None  # `delete`: the error of the call the target did not answer (the rest not tried)

    def create(self, reuse: bool = False) -> None:
        """Create the twins, then seek each to the moment before the first was created: a twin judges this
        run's messages only, on a topic that retains earlier runs' (a target that hands a new subscription
        the topic's retained backlog, as the emulator does, would otherwise deliver them: `unexpected`).
        `reuse` (`pubsubguard watch` resuming after a crash): a twin of this run id that exists already is
        adopted as it is, with what it holds (`self.reused`), and neither seeked nor granted again."""
        from google.api_core import exceptions

        start_us = time.time_ns() // 1000
        for spec in self.specs:
            try:
                self.subscriber.create_subscription(request=spec.request(self.run_id), timeout=30)
            except exceptions.AlreadyExists:
                if not reuse:
                    raise TwinIsolationError(f"cannot create probe twin {short_name(spec.path)}: it exists already "
                                             "(another run with this run id?)") from None
                self.reused.append(spec.path)
                if spec.push_endpoint:
                    self._repoint(spec)
                continue
            except exceptions.NotFound as err:
                raise TwinIsolationError(
                    f"cannot create probe twin {short_name(spec.path)}: {err.message} (is the estate applied? "
                    "run `pubsubguard apply` first)"
                ) from None
            except exceptions.GoogleAPICallError as err:
                raise TwinIsolationError(f"cannot create probe twin {short_name(spec.path)}: {err}") from None
            self.created.append(spec.path)
            if spec.dead_letter_topic_path:
                self._grant(spec)
        self.created.extend(self.reused)  # deleted at the end as the others are
        endpoint_of = {spec.path: spec.consumer_endpoint for spec in self.specs}
        for path in self.created:
            if path in self.reused:
                continue
            answer = seek_to(self.subscriber, path, start_us)
            if answer["result"] != "seeked":  # e.g. the emulator on ordered subscriptions: acknowledged instead
                client = self.consumer(endpoint_of[path]) if self.consumer is not None else self.subscriber
                answer = acknowledge_before(client, path, start_us, answer["detail"])
            self.seeks.append(answer)

    def _repoint(self, spec: TwinSpec) -> None:
        """A reused push twin pushes to this run's receiver: the stopped watch's receiver is gone with it (on the
        emulator it listened on a port of its own), and a twin left pushing there delivers nothing again."""
        from google.api_core import exceptions

        try:
            self.subscriber.modify_push_config(
                request={"subscription": spec.path, "push_config": {"push_endpoint": spec.push_endpoint}}, timeout=30)
        except exceptions.GoogleAPICallError as err:
            raise TwinIsolationError(f"cannot point reused probe twin {short_name(spec.path)} at this run's push "
                                     f"receiver: {err}") from None

    def unseeked(self) -> list[str]:
        """Observations on twins that could not be seeked to the run's start (none when every one was)."""
        said = []
        drained = [s for s in self.seeks if s["result"] == "acknowledged"]
        if drained:
            # each twin with its count; beyond SEEK_NAMES twins, those with none are counted, not named
            named = drained if len(drained) <= SEEK_NAMES else [s for s in drained if s["acknowledged"]]
            counts = ", ".join(f"{short_name(s['subscription'])} {s['acknowledged']}" for s in named)
            rest = len(drained) - len(named)
            if rest:
                counts += f"{', ' if counts else ''}0 on {'the other ' if named else 'each of the '}{rest}"
            said.append(f"the target refused Seek on {len(drained)} probe twin(s) ({drained[0]['detail']}); instead "
                        f"the messages published before the run that they received were acknowledged before the probe "
                        f"published (as a seek to the run's start does): {counts}")
        failed = [s for s in self.seeks if s["result"] == "refused"]
        if failed:
            said.append(f"{len(failed)} of {len(self.seeks)} probe twins could not be seeked to the run's start "
                        f"({short_name(failed[0]['subscription'])}: {failed[0]['detail']}): on a target that hands a new "
                        "subscription the topic's retained backlog, earlier messages reach them and are reported "
                        "`unexpected`")
        return said

    def _grant(self, spec: TwinSpec) -> None:
        """The service agent's subscriber grant, without which Pub/Sub cannot forward the twin's dead letters."""
        if self.service_agent is None:
            self.iam.append({"resource": spec.path, "call": "setIamPolicy", "result": "not attempted",
                             "detail": "the plan names no Pub/Sub service agent"})
            return
        answer = grant_subscriber(self.subscriber, spec.path, self.service_agent)
        self.iam.append(answer.as_dict())
        if answer.result == "refused":
            raise TwinIsolationError(
                f"cannot grant {facts.SUBSCRIBER_ROLE} to {self.service_agent} on probe twin {short_name(spec.path)} "
                f"({answer.detail}); the run's identity needs pubsub.subscriptions.setIamPolicy on it"
            )
        if answer.result == "granted":
            self.granted.add(spec.path)

    def delete(self, patience_s: float = DELETE_PATIENCE_S) -> list[str]:
        """Delete every created twin (its grant revoked first); returns the paths that could not be deleted. A
        delete the target does not answer is retried for `patience_s` at most; after one it did not answer
        (`self.unanswered`), the twins left are not tried: the library's own retry, 60 s a call, took minutes for
        a handful of twins on an emulator that had been stopped, and a signal could not end the wait."""
        from google.api_core import exceptions, retry as retries

        from pubsubguard.core.apply import is_unavailable

        retry = retries.Retry(predicate=retries.if_exception_type(exceptions.ServiceUnavailable), initial=0.1,
                              maximum=min(10.0, patience_s), timeout=patience_s)
        failed = []
        while self.created:
            path = self.created.pop()
            if self.unanswered is not None:
                failed.append(path)
                continue
            if path in self.granted:
                self.iam.append(revoke_subscriber(self.subscriber, path, self.service_agent).as_dict())
                self.granted.discard(path)
            try:
                self.subscriber.delete_subscription(subscription=path, timeout=min(30.0, patience_s), retry=retry)
            except exceptions.NotFound:
                pass
            except Exception as err:  # noqa: BLE001 - keep deleting the others, report what is left
                if is_unavailable(err):
                    last = getattr(err, "cause", None) or err  # a RetryError: the last call's own error
                    self.unanswered = f"{type(last).__name__}: {str(last).splitlines()[0][:200] if str(last) else ''}"
                failed.append(path)
        return failed


def seek_to(subscriber, path: str, time_us: int) -> dict:
    """Seek a subscription to a time (messages published before it count as acknowledged); the answer."""
    from google.api_core import exceptions
    from google.protobuf import timestamp_pb2

    moment = timestamp_pb2.Timestamp()
    moment.FromMicroseconds(time_us)
    try:
        subscriber.seek(request={"subscription": path, "time": moment}, timeout=30)
    except exceptions.GoogleAPICallError as err:
        return {"subscription": path, "time_us": time_us, "result": "refused", "detail": f"{type(err).__name__}: {err.message}"}
    return {"subscription": path, "time_us": time_us, "result": "seeked", "detail": ""}


def acknowledge_before(subscriber, path: str, time_us: int, refused: str, rounds: int = 1000) -> dict:
    """What a seek to `time_us` does, by pulling: acknowledge the messages a new subscription received that
    were published before `time_us` (a topic's retained backlog); a later one is nacked (left to the probe,
    which records it). Ends after two empty pulls in a row."""
    from google.api_core import exceptions

    acknowledged, empty = 0, 0
    try:
        for _ in range(rounds):
            response = subscriber.pull(request={"subscription": path, "max_messages": 1000, "return_immediately": True},
                                       timeout=30)
            if not response.received_messages:
                empty += 1
                if empty == 2:
                    break
                continue
            empty = 0
            before = [m.ack_id for m in response.received_messages
                      if m.message.publish_time.timestamp() * 1e6 < time_us]
            after = [m.ack_id for m in response.received_messages if m.ack_id not in set(before)]
            if before:
                subscriber.acknowledge(subscription=path, ack_ids=before, timeout=30)
                acknowledged += len(before)
            if after:
                subscriber.modify_ack_deadline(subscription=path, ack_ids=after, ack_deadline_seconds=0, timeout=30)
                break
    except exceptions.GoogleAPICallError as err:
        return {"subscription": path, "time_us": time_us, "result": "refused",
                "detail": f"{refused}; acknowledging by pull failed after {acknowledged}: {type(err).__name__}: {err.message}"}
    return {"subscription": path, "time_us": time_us, "result": "acknowledged", "detail": refused,
            "acknowledged": acknowledged}


def find_leftovers(subscriber, project: str, topic_paths: list[str]) -> list[str]:
    """Twin subscriptions left on the project: probe label, or the twin name pattern on a declared topic."""
    leftovers = set()
    for sub in subscriber.list_subscriptions(request={"project": f"projects/{project}"}, timeout=30):
        if PROBE_LABEL in sub.labels or (sub.topic in topic_paths and TWIN_RE.fullmatch(short_name(sub.name))):
            leftovers.add(sub.name)
    return sorted(leftovers)


def cleanup(subscriber, project: str, topic_paths: list[str]) -> list[str]:
    """Delete leftover twins; returns what was deleted."""
    from google.api_core import exceptions

    deleted = []
    for path in find_leftovers(subscriber, project, topic_paths):
        try:
            subscriber.delete_subscription(subscription=path, timeout=30)
            deleted.append(path)
        except exceptions.NotFound:
            pass
    return deleted
