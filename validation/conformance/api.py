"""Conformance scenarios on what the API refuses and what it keeps: create refuses invalid settings, filters
are enforced, retention is as declared; and on the publisher client: a failed ordered publish pauses its key
(docs/pubsub-facts.md)."""

from __future__ import annotations

from pubsubguard.policies import pubsub_facts as facts

from .harness import (
    DELIVERY_WINDOW_S, DOC_DEAD_LETTER, DOC_EXACTLY_ONCE, DOC_FILTER, DOC_RESUME, DOC_SUBSCRIPTION_API, FACTS_DOC,
    HOLDS, INCONCLUSIVE, ScenarioClient, ScenarioEnded, ScenarioInterrupted, UNSUPPORTED, VIOLATED, as_duration_s,
    one_line, request_fields, scenario, seq_of,
)


# ---------------------------------------------------------------------------------- create rejects
def _create_rejects(client: ScenarioClient, control: dict, invalid: dict[str, dict],
                    topic: str | None = None) -> tuple[str, str]:
    """The control subscription must be accepted (else `unsupported`); each invalid one must be refused."""
    topic = topic or client.create_topic("topic")
    client.create_subscription("control", topic, **control)
    accepted, refused = [], []
    for part, fields in invalid.items():
        created, err = client.try_create_subscription(part, topic, **fields)
        if err is None:
            accepted.append(part)
        else:
            refused.append(f"{part}: {one_line(err)}")
    if accepted:
        return VIOLATED, f"accepted {', '.join(accepted)} (must be refused)" + (
            f"; refused {'; '.join(refused)}" if refused else "")
    return HOLDS, f"refused {'; '.join(refused)} (control accepted)"


@scenario("create-rejects-push-with-exactly-once",
          "a push subscription with exactly-once delivery is refused at creation",
          f"{FACTS_DOC} § Exactly-once delivery (seed 002): pull and StreamingPull only; push and export "
          f"subscriptions do not support it. {DOC_EXACTLY_ONCE}")
def create_rejects_push_with_exactly_once(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    # Nothing is ever published to this topic, so no push is attempted; on the emulator it is a loopback URL.
    endpoint = ("https://127.0.0.1:9/pubsubguard-conform" if client.session.target == "emulator"
                else "https://example.com/pubsubguard-conform")
    push = types.PushConfig(push_endpoint=endpoint)
    return _create_rejects(client, {"push_config": push},
                           {"push-eod": {"push_config": push, "enable_exactly_once_delivery": True}})


@scenario("create-rejects-ack-deadline-out-of-range",
          f"ack_deadline_seconds outside {facts.ACK_DEADLINE_MIN_S}..{facts.ACK_DEADLINE_MAX_S} is refused at creation",
          f"{FACTS_DOC} § Ranges and formats: ack_deadline_seconds 10..600. {DOC_SUBSCRIPTION_API}")
def create_rejects_ack_deadline_out_of_range(client: ScenarioClient) -> tuple[str, str]:
    low, high = facts.ACK_DEADLINE_MIN_S - 1, facts.ACK_DEADLINE_MAX_S + 1
    return _create_rejects(client, {"ack_deadline_seconds": facts.ACK_DEADLINE_MIN_S},
                           {f"ack-{low}": {"ack_deadline_seconds": low}, f"ack-{high}": {"ack_deadline_seconds": high}})


@scenario("create-rejects-self-dead-letter",
          "a dead-letter topic equal to the subscription's own topic is refused at creation",
          f"{FACTS_DOC} § Dead-letter topics: the dead-letter topic must differ from the subscription's topic. "
          f"{DOC_DEAD_LETTER}")
def create_rejects_self_dead_letter(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    topic = client.create_topic("topic")
    dead_letter = client.create_topic("dead")
    return _create_rejects(
        client, {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=5)},
        {"self-dead-letter": {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=topic,
                                                                           max_delivery_attempts=5)}},
        topic=topic)


@scenario("create-rejects-attempts-out-of-range",
          f"max_delivery_attempts outside {facts.MAX_DELIVERY_ATTEMPTS_MIN}..{facts.MAX_DELIVERY_ATTEMPTS_MAX} "
          "is refused at creation",
          f"{FACTS_DOC} § Dead-letter topics: attempts 5..100. {DOC_DEAD_LETTER}")
def create_rejects_attempts_out_of_range(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    dead_letter = client.create_topic("dead")
    low, high = facts.MAX_DELIVERY_ATTEMPTS_MIN - 1, facts.MAX_DELIVERY_ATTEMPTS_MAX + 1

    def policy(attempts):
        return {"dead_letter_policy": types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts)}

    return _create_rejects(client, policy(facts.MAX_DELIVERY_ATTEMPTS_MIN),
                           {f"attempts-{low}": policy(low), f"attempts-{high}": policy(high)})


# ------------------------------------------------------------------------------ filter, retention
@scenario("filter-enforced",
          "a subscription with filter attributes.kind = \"a\" receives only the messages that match",
          f"{FACTS_DOC} § Ranges and formats (filter, immutable); messages that do not match are acknowledged "
          f"automatically and never delivered. {DOC_FILTER}")
def filter_enforced(client: ScenarioClient) -> tuple[str, str]:
    topic = client.create_topic("topic")
    subscription = client.create_subscription("sub", topic, filter='attributes.kind = "a"')
    client.publish(topic, b"a", kind="a")
    client.publish(topic, b"b", kind="b")
    client.publish(topic, b"none")
    got = client.pull_until(subscription, lambda ms: len(ms) >= 3, DELIVERY_WINDOW_S,
                            on_message=lambda m: client.acknowledge(subscription, [m.ack_id]))
    delivered = sorted(seq_of(m) for m in got)
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
def retention_as_declared(client: ScenarioClient) -> tuple[str, str]:
    topic = client.create_topic("topic", message_retention_duration={"seconds": facts.TOPIC_RETENTION_MAX_S})
    stored_topic = client.call("GetTopic", {"topic": topic}, lambda: client.publisher.get_topic(topic=topic, timeout=30),
                               request_fields)
    differs, refused, kept = [], [], []
    topic_seconds = as_duration_s(stored_topic.message_retention_duration)
    (kept if topic_seconds == facts.TOPIC_RETENTION_MAX_S else differs).append(
        f"topic {facts.TOPIC_RETENTION_MAX_S} s -> {topic_seconds:.0f} s" if topic_seconds is not None else "topic: none")
    for seconds in RETENTIONS_S:
        created, err = client.try_create_subscription(f"ret-{seconds}", topic, message_retention_duration={"seconds": seconds})
        if err is not None:
            refused.append(f"{seconds} s: {one_line(err)}")
            continue
        actual = as_duration_s(client.get_subscription(created.name).message_retention_duration)
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
def ordered_publish_failure_pauses_key(client: ScenarioClient) -> tuple[str, str]:
    topic = client.create_topic("topic")
    subscription = client.create_subscription("sub", topic, enable_message_ordering=True)
    publisher = client.session.new_publisher()
    problems = []
    try:
        # The injected failure: a message with neither data nor attributes, which Pub/Sub refuses.
        try:
            client.publish(topic, b"", ordering_key="A", publisher=publisher)
            raise ScenarioEnded(INCONCLUSIVE, "the target accepted an empty message, so no publish failure was injected")
        except ScenarioEnded:
            raise
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the failure we wanted
            injected = one_line(err)
        try:
            client.publish(topic, b"1", ordering_key="A", publisher=publisher)
            problems.append("the publish after the failure on key A succeeded without resume_publish")
            paused = "not paused"
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - the expected pause
            paused = type(err).__name__
        try:
            client.publish(topic, b"b", ordering_key="B", publisher=publisher)
        except ScenarioInterrupted:
            raise
        except Exception as err:  # noqa: BLE001 - recorded
            problems.append(f"key B failed too while A was paused: {one_line(err)}")
        client.note("resume_publish(topic, 'A')")
        publisher.resume_publish(topic, "A")
        for seq in ("2", "3", "4"):
            try:
                client.publish(topic, seq.encode(), ordering_key="A", publisher=publisher)
            except ScenarioInterrupted:
                raise
            except Exception as err:  # noqa: BLE001 - recorded
                problems.append(f"publish {seq} on A after resume_publish failed: {one_line(err)}")
    finally:
        publisher.stop()
    got = client.pull_until(subscription, lambda ms: {"2", "3", "4", "b"} <= {seq_of(m) for m in ms}, DELIVERY_WINDOW_S,
                            on_message=lambda m: client.acknowledge(subscription, [m.ack_id]))
    key_a = [seq_of(m) for m in got if m.message.ordering_key == "A"]
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
