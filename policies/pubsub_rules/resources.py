"""Resource rules: each judges one topic, subscription or IAM resource on its own properties. Each
check is a function with its rule's record (`@rule(...)`: name, description, level, fact, unknowns, reads)
right above it.

Facts are cited from `docs/pubsub-facts.md`; numbers come from `pubsub_facts`.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import pubsub_facts as facts
from pubsub_rules.model import DELIVERY_BLOCKS, Resource, block, iam_members, nested
from pubsub_rules.rule import ADVISORY, MANDATORY, Rules
from pubsub_rules.values import (
    UNKNOWN,
    as_duration,
    as_number,
    as_str,
    enabled,
    get,
    known,
)

SUB = (facts.SUBSCRIPTION,)
TOPIC_AND_SUB = (facts.TOPIC, facts.SUBSCRIPTION)

SKIP_UNKNOWN = "Reports nothing when the property it reads is unknown."

rule = Rules(types=SUB, unknowns=SKIP_UNKNOWN)  # each rule registered above its check; RULES at the end


def _both(left: Any, right: Any) -> bool:
    """Both switches are known to be on."""
    return left is True and right is True


def _kind(resource: Resource) -> str:
    return "Subscription" if resource.type == facts.SUBSCRIPTION else "Topic"


# --- Mandatory -------------------------------------------------------------------------------------
@rule(
    "no-exactly-once-on-push",
    "Prohibits exactly-once delivery on push subscriptions.",
    MANDATORY,
    "Exactly-once delivery is for pull and StreamingPull subscriptions only; push does not support it.",
    unknowns="Reports nothing unless both enableExactlyOnceDelivery and pushConfig are known to be set.",
    reads=("enableExactlyOnceDelivery", "pushConfig"),
)
def _exactly_once_push(sub: Resource, _config) -> Iterator[str]:
    if _both(enabled(get(sub.props, "enableExactlyOnceDelivery")), block(sub.props, "pushConfig")):
        yield (
            f"Subscription {sub.label} enables exactly-once delivery on a push subscription, which Pub/Sub "
            "does not support (exactly-once is for pull and StreamingPull only); remove pushConfig or set "
            "enableExactlyOnceDelivery to false."
        )


@rule(
    "no-exactly-once-on-export",
    "Prohibits exactly-once delivery on BigQuery and Cloud Storage export subscriptions.",
    MANDATORY,
    "Export subscriptions (BigQuery, Cloud Storage) do not support exactly-once delivery.",
    unknowns="Reports nothing unless enableExactlyOnceDelivery and the export block are known to be set.",
    reads=("enableExactlyOnceDelivery", "bigqueryConfig", "cloudStorageConfig"),
)
def _exactly_once_export(sub: Resource, _config) -> Iterator[str]:
    if enabled(get(sub.props, "enableExactlyOnceDelivery")) is not True:
        return
    for key, label in DELIVERY_BLOCKS[1:]:
        if block(sub.props, key) is True:
            yield (
                f"Subscription {sub.label} enables exactly-once delivery on a {label} export subscription, "
                "which Pub/Sub does not support (export subscriptions are not exactly-once); set "
                f"enableExactlyOnceDelivery to false or remove {key}."
            )


@rule(
    "single-delivery-type",
    "Prohibits setting more than one of push, BigQuery and Cloud Storage delivery on a subscription.",
    MANDATORY,
    "A subscription has at most one of push, BigQuery or Cloud Storage config.",
    unknowns="Counts only delivery blocks known to be set; an unknown block is not counted.",
    reads=("pushConfig", "bigqueryConfig", "cloudStorageConfig"),
)
def _single_delivery(sub: Resource, _config) -> Iterator[str]:
    chosen = [label for key, label in DELIVERY_BLOCKS if block(sub.props, key) is True]
    if len(chosen) > 1:
        yield (
            f"Subscription {sub.label} sets {' and '.join(chosen)} delivery together, but a subscription "
            "has at most one of push, BigQuery or Cloud Storage config; keep one."
        )


def _out_of_range(value: Any, low: float, high: float) -> bool:
    """A known number outside low..high; 0 means "the default" to the API and is never out of range."""
    return known(value) and value != 0 and not low <= value <= high


@rule(
    "max-delivery-attempts-in-range",
    f"Requires deadLetterPolicy.maxDeliveryAttempts to be from {facts.MAX_DELIVERY_ATTEMPTS_MIN} to "
    f"{facts.MAX_DELIVERY_ATTEMPTS_MAX}.",
    MANDATORY,
    f"Dead-letter maxDeliveryAttempts must be {facts.MAX_DELIVERY_ATTEMPTS_MIN}..{facts.MAX_DELIVERY_ATTEMPTS_MAX} "
    f"(default {facts.MAX_DELIVERY_ATTEMPTS_DEFAULT}; 0 means the default).",
    reads=("deadLetterPolicy.maxDeliveryAttempts",),
)
def _max_delivery_attempts(sub: Resource, _config) -> Iterator[str]:
    policy = nested(sub.props, "deadLetterPolicy")
    attempts = as_number(get(policy, "maxDeliveryAttempts")) if isinstance(policy, dict) else None
    low, high = facts.MAX_DELIVERY_ATTEMPTS_MIN, facts.MAX_DELIVERY_ATTEMPTS_MAX
    if _out_of_range(attempts, low, high):
        yield (
            f"Subscription {sub.label} sets deadLetterPolicy.maxDeliveryAttempts to {attempts:g}, outside "
            f"Pub/Sub's range {low}..{high}; choose a value from {low} to {high}."
        )


@rule(
    "ack-deadline-in-range",
    f"Requires ackDeadlineSeconds to be from {facts.ACK_DEADLINE_MIN_S} to {facts.ACK_DEADLINE_MAX_S} seconds.",
    MANDATORY,
    f"ack_deadline_seconds must be {facts.ACK_DEADLINE_MIN_S}..{facts.ACK_DEADLINE_MAX_S} (0 means the default of "
    f"{facts.ACK_DEADLINE_DEFAULT_S}).",
    reads=("ackDeadlineSeconds",),
)
def _ack_deadline(sub: Resource, _config) -> Iterator[str]:
    seconds = as_number(get(sub.props, "ackDeadlineSeconds"))
    low, high = facts.ACK_DEADLINE_MIN_S, facts.ACK_DEADLINE_MAX_S
    if _out_of_range(seconds, low, high):
        yield (
            f"Subscription {sub.label} sets ackDeadlineSeconds to {seconds:g}, outside Pub/Sub's range "
            f"{low}..{high} s; choose a deadline from {low} to {high} seconds."
        )


@rule(
    "retention-in-range",
    f"Requires messageRetentionDuration on topics and subscriptions to be from {facts.spoken_seconds(facts.RETENTION_MIN_S)} "
    f"to {facts.spoken_seconds(facts.RETENTION_MAX_S)}.",
    MANDATORY,
    f"Message retention is {facts.spoken_seconds(facts.RETENTION_MIN_S)}..{facts.spoken_seconds(facts.RETENTION_MAX_S)}.",
    types=TOPIC_AND_SUB,
    unknowns="Reports nothing when the duration is unknown or not an API duration like \"600s\".",
    reads=("messageRetentionDuration",),
)
def _retention(resource: Resource, _config) -> Iterator[str]:
    seconds = as_duration(get(resource.props, "messageRetentionDuration"))
    low, high = (
        (facts.RETENTION_MIN_S, facts.RETENTION_MAX_S)
        if resource.type == facts.SUBSCRIPTION
        else (facts.TOPIC_RETENTION_MIN_S, facts.TOPIC_RETENTION_MAX_S)
    )
    if known(seconds) and not low <= seconds <= high:
        kind = "Subscription" if resource.type == facts.SUBSCRIPTION else "Topic"
        yield (
            f"{kind} {resource.label} retains messages for {seconds:g} s, outside Pub/Sub's range of "
            f"{facts.spoken_seconds(low)} to {facts.spoken_seconds(high)}; set messageRetentionDuration from \"{low}s\" to \"{high}s\"."
        )


@rule(
    "expiration-ttl-at-least-one-day",
    f"Requires expirationPolicy.ttl to be at least {facts.spoken_seconds(facts.EXPIRATION_MIN_S)}, or \"\" for never.",
    MANDATORY,
    f"expiration_policy.ttl is at least {facts.spoken_seconds(facts.EXPIRATION_MIN_S)}; \"\" means never expire.",
    reads=("expirationPolicy.ttl",),
)
def _expiration_ttl(sub: Resource, _config) -> Iterator[str]:
    ttl = get(nested(sub.props, "expirationPolicy"), "ttl")
    if ttl == "":
        return  # never expires
    seconds = as_duration(ttl)
    if known(seconds) and seconds < facts.EXPIRATION_MIN_S:
        yield (
            f"Subscription {sub.label} sets expirationPolicy.ttl to {ttl!r}, but Pub/Sub's minimum is "
            f"{facts.spoken_seconds(facts.EXPIRATION_MIN_S)}; "
            f"set a ttl of at least \"{facts.EXPIRATION_MIN_S}s\", or \"\" to never expire."
        )


@rule(
    "retry-backoff-in-range",
    f"Requires retryPolicy backoffs to be from {facts.RETRY_BACKOFF_MIN_S} to {facts.RETRY_BACKOFF_MAX_S} seconds with "
    "the minimum at most the maximum.",
    MANDATORY,
    f"Retry backoff is {facts.RETRY_BACKOFF_MIN_S}..{facts.RETRY_BACKOFF_MAX_S} s (defaults: minimum "
    f"{facts.RETRY_MIN_BACKOFF_DEFAULT_S} s, maximum {facts.RETRY_MAX_BACKOFF_DEFAULT_S} s).",
    unknowns="Judges each known bound alone; compares minimum and maximum only when both are known.",
    reads=("retryPolicy.minimumBackoff", "retryPolicy.maximumBackoff"),
)
def _retry_backoff(sub: Resource, _config) -> Iterator[str]:
    policy = nested(sub.props, "retryPolicy")
    if not isinstance(policy, dict):
        return
    low, high = facts.RETRY_BACKOFF_MIN_S, facts.RETRY_BACKOFF_MAX_S
    bounds = {}
    for key, default in (("minimumBackoff", facts.RETRY_MIN_BACKOFF_DEFAULT_S), ("maximumBackoff", facts.RETRY_MAX_BACKOFF_DEFAULT_S)):
        raw = policy.get(key)
        bounds[key] = default if raw is None or raw == "" else as_duration(raw)
        if known(bounds[key]) and not low <= bounds[key] <= high:
            yield (
                f"Subscription {sub.label} sets retryPolicy.{key} to {raw!r}, outside Pub/Sub's range "
                f"{low}..{high} s; choose a backoff from \"{low}s\" to \"{high}s\"."
            )
    minimum, maximum = bounds["minimumBackoff"], bounds["maximumBackoff"]
    if known(minimum, maximum) and low <= minimum <= high and low <= maximum <= high and minimum > maximum:
        yield (
            f"Subscription {sub.label} has a retry minimumBackoff ({minimum:g} s) above its maximumBackoff "
            f"({maximum:g} s; unset bounds default to {facts.RETRY_MIN_BACKOFF_DEFAULT_S} s and "
            f"{facts.RETRY_MAX_BACKOFF_DEFAULT_S} s); make the minimum at most the maximum."
        )


@rule(
    "filter-size-limit",
    f"Prohibits subscription filters over {facts.FILTER_MAX_BYTES} bytes.",
    MANDATORY,
    f"A subscription filter is at most {facts.FILTER_MAX_BYTES} bytes and cannot be changed after creation.",
    reads=("filter",),
)
def _filter_size(sub: Resource, _config) -> Iterator[str]:
    text = as_str(get(sub.props, "filter"))
    if known(text) and len(text.encode()) > facts.FILTER_MAX_BYTES:
        yield (
            f"Subscription {sub.label} has a filter of {len(text.encode())} bytes, over Pub/Sub's limit of "
            f"{facts.FILTER_MAX_BYTES} bytes; shorten the filter (it cannot be changed after creation)."
        )


@rule(
    "pubsub-names-valid",
    "Requires topic and subscription names to follow Pub/Sub's naming rules.",
    MANDATORY,
    f"Names: {facts.NAME_RULE}.",
    types=TOPIC_AND_SUB,
    unknowns="Reports nothing when the name is unknown or unset (autonamed by Pulumi).",
    reads=("name",),
)
def _names(resource: Resource, _config) -> Iterator[str]:
    name = get(resource.props, "name")
    if name is None or name is UNKNOWN:
        return  # autonamed or computed: nothing to judge yet
    problem = facts.name_problem(name)
    if problem:
        kind = "Subscription" if resource.type == facts.SUBSCRIPTION else "Topic"
        yield f"{kind} {resource.name} has an invalid Pub/Sub name: {problem}; rename it."


# Durations the API takes: (property path, what it is); the Cloud Storage one only on subscriptions.
DURATION_FIELDS = (
    ("messageRetentionDuration", "message retention"),
    ("retryPolicy.minimumBackoff", "retry minimum backoff"),
    ("retryPolicy.maximumBackoff", "retry maximum backoff"),
    ("expirationPolicy.ttl", "expiration TTL"),
    ("cloudStorageConfig.maxDuration", "Cloud Storage file duration"),
)
_API_DURATION = re.compile(facts.API_DURATION_FORMAT)


def _dotted(props: Any, path: str) -> Any:
    """The value at a dotted path through optional blocks; None or UNKNOWN where a step is."""
    *blocks, leaf = path.split(".")
    value = props
    for key in blocks:
        value = nested(value, key)
        if not isinstance(value, dict):
            return value
    return get(value, leaf)


@rule(
    "durations-api-format",
    "Requires retention, backoff, expiration and Cloud Storage durations in the API's format (\"600s\").",
    MANDATORY,
    "Durations are google.protobuf.Duration strings: seconds with up to 9 decimals and an \"s\" suffix "
    f"({facts.API_DURATION_FORMAT}); \"7d\" or \"5\" are rejected.",
    types=TOPIC_AND_SUB,
    reads=tuple(path for path, _ in DURATION_FIELDS),
)
def _duration_format(resource: Resource, _config) -> Iterator[str]:
    for path, what in DURATION_FIELDS:
        value = _dotted(resource.props, path)
        if value is None or value is UNKNOWN or (path == "expirationPolicy.ttl" and value == ""):
            continue
        if not isinstance(value, str) or not _API_DURATION.fullmatch(value):
            yield (
                f"{_kind(resource)} {resource.label} sets {path} ({what}) to {value!r}, which is not a duration "
                "the Pub/Sub API accepts (seconds with an \"s\" suffix, such as \"604800s\" for 7 days); write it "
                "in seconds."
            )


@rule(
    "labels-valid",
    "Requires topic and subscription labels to follow GCP's label rules.",
    MANDATORY,
    f"Labels: {facts.LABEL_RULE}.",
    types=TOPIC_AND_SUB,
    unknowns="Judges the known labels; an unknown labels map or value is not judged.",
    reads=("labels",),
)
def _labels(resource: Resource, _config) -> Iterator[str]:
    labels = get(resource.props, "labels")
    if not isinstance(labels, dict):
        return
    labels = {k: v for k, v in labels.items() if v is not UNKNOWN}
    for problem in facts.label_problems(labels):
        yield f"{_kind(resource)} {resource.label} has an invalid label: {problem}; fix the label."


@rule(
    "cloud-storage-limits",
    "Requires Cloud Storage subscriptions to keep maxDuration, maxBytes and filenameSuffix within Pub/Sub's limits.",
    MANDATORY,
    "cloud_storage_config: max_duration 1..10 minutes, max_bytes 1 KB..10 GiB, filename_suffix not ending in \"/\".",
    reads=("cloudStorageConfig.maxDuration", "cloudStorageConfig.maxBytes", "cloudStorageConfig.filenameSuffix"),
)
def _cloud_storage_limits(sub: Resource, _config) -> Iterator[str]:
    config = nested(sub.props, "cloudStorageConfig")
    if not isinstance(config, dict):
        return
    seconds = as_duration(config.get("maxDuration"))
    low, high = facts.CLOUD_STORAGE_MAX_DURATION_MIN_S, facts.CLOUD_STORAGE_MAX_DURATION_MAX_S
    if known(seconds) and not low <= seconds <= high:
        yield (
            f"Subscription {sub.label} sets cloudStorageConfig.maxDuration to {config.get('maxDuration')!r}, outside "
            f"Pub/Sub's range of 1 to 10 minutes; choose from \"{low}s\" to \"{high}s\"."
        )
    size = as_number(config.get("maxBytes"))
    low_b, high_b = facts.CLOUD_STORAGE_MAX_BYTES_MIN, facts.CLOUD_STORAGE_MAX_BYTES_MAX
    if known(size) and size != 0 and not low_b <= size <= high_b:
        yield (
            f"Subscription {sub.label} sets cloudStorageConfig.maxBytes to {size:g}, outside Pub/Sub's range of 1 KB "
            f"to 10 GiB; choose from {low_b} to {high_b} bytes."
        )
    suffix = as_str(config.get("filenameSuffix"))
    if known(suffix) and suffix.endswith("/"):
        yield (
            f"Subscription {sub.label} sets cloudStorageConfig.filenameSuffix to {suffix!r}, but a file name "
            "suffix must not end in \"/\"; drop the trailing slash."
        )


@rule(
    "bigquery-schema-options",
    "Prohibits setting both useTableSchema and useTopicSchema on a BigQuery subscription.",
    MANDATORY,
    "bigquery_config: use_table_schema and use_topic_schema cannot both be true.",
    unknowns="Reports nothing unless both switches are known to be on.",
    reads=("bigqueryConfig.useTableSchema", "bigqueryConfig.useTopicSchema"),
)
def _bigquery_schema_options(sub: Resource, _config) -> Iterator[str]:
    config = nested(sub.props, "bigqueryConfig")
    if not isinstance(config, dict):
        return
    if _both(enabled(config.get("useTableSchema")), enabled(config.get("useTopicSchema"))):
        yield (
            f"Subscription {sub.label} sets both bigqueryConfig.useTableSchema and useTopicSchema, which Pub/Sub "
            "rejects (a BigQuery subscription writes with one schema); keep one of them."
        )


@rule(
    "cloud-storage-duration-vs-ack-deadline",
    "Prohibits Cloud Storage batching longer than the subscription's ack deadline (advisory).",
    ADVISORY,
    "A Cloud Storage subscription holds messages until it writes a file; past the ack deadline they are redelivered.",
    reads=("cloudStorageConfig.maxDuration", "ackDeadlineSeconds"),
)
def _cloud_storage_vs_deadline(sub: Resource, _config) -> Iterator[str]:
    config = nested(sub.props, "cloudStorageConfig")
    if not isinstance(config, dict):
        return
    duration = as_duration(config.get("maxDuration"))
    deadline = as_number(get(sub.props, "ackDeadlineSeconds"))
    if deadline is None or deadline == 0:
        deadline = facts.ACK_DEADLINE_DEFAULT_S
    if known(duration, deadline) and duration > deadline:
        yield (
            f"Subscription {sub.label} batches Cloud Storage files for up to {duration:g} s but has an ack deadline "
            f"of {deadline:g} s, so messages may expire and be redelivered (duplicates in the bucket) before a file "
            "is written; raise ackDeadlineSeconds to at least maxDuration."
        )


# --- Advisory --------------------------------------------------------------------------------------
@rule(
    "ordering-on-push",
    "Prohibits message ordering on push subscriptions (advisory).",
    ADVISORY,
    "Push with ordering keeps only one message per ordering key outstanding at a time.",
    unknowns="Reports nothing unless both enableMessageOrdering and pushConfig are known to be set.",
    reads=("enableMessageOrdering", "pushConfig"),
)
def _ordering_push(sub: Resource, _config) -> Iterator[str]:
    if _both(enabled(get(sub.props, "enableMessageOrdering")), block(sub.props, "pushConfig")):
        yield (
            f"Subscription {sub.label} combines ordering with push delivery, where Pub/Sub keeps only one "
            "message per ordering key outstanding at a time (slow for hot keys); consider a pull subscription."
        )


@rule(
    "ordering-with-dead-letter",
    "Prohibits combining message ordering with a dead-letter topic (advisory).",
    ADVISORY,
    "With a dead-letter topic, order may not be kept for dead-lettered messages (best effort).",
    unknowns="Reports nothing unless both enableMessageOrdering and deadLetterPolicy are known to be set.",
    reads=("enableMessageOrdering", "deadLetterPolicy"),
)
def _ordering_dead_letter(sub: Resource, _config) -> Iterator[str]:
    if _both(enabled(get(sub.props, "enableMessageOrdering")), block(sub.props, "deadLetterPolicy")):
        yield (
            f"Subscription {sub.label} combines ordering with a dead-letter topic, so order is only best "
            "effort for dead-lettered messages and the redelivery rewind may not hold; make consumers "
            "tolerate gaps in a key's stream or drop dead-lettering."
        )


@rule(
    "exactly-once-with-ordering",
    "Prohibits combining exactly-once delivery with ordering without a throughput check (advisory).",
    ADVISORY,
    "Exactly-once with ordering needs in-order acks; throughput is in the thousands of messages/s.",
    unknowns="Reports nothing unless both switches are known to be on.",
    reads=("enableExactlyOnceDelivery", "enableMessageOrdering"),
)
def _exactly_once_ordering(sub: Resource, _config) -> Iterator[str]:
    if _both(enabled(get(sub.props, "enableExactlyOnceDelivery")), enabled(get(sub.props, "enableMessageOrdering"))):
        yield (
            f"Subscription {sub.label} combines exactly-once delivery with ordering, which requires acks in "
            "order and limits throughput to the order of thousands of messages per second; check the "
            "expected rate fits."
        )


@rule(
    "push-oidc-token",
    "Requires push subscriptions to authenticate with an OIDC token (advisory).",
    ADVISORY,
    "Push endpoints authenticate Pub/Sub with an OIDC token (push_config.oidc_token).",
    unknowns="Reports nothing when pushConfig or its oidcToken is unknown.",
    reads=("pushConfig.oidcToken",),
)
def _push_oidc(sub: Resource, _config) -> Iterator[str]:
    push = nested(sub.props, "pushConfig")
    if isinstance(push, dict) and block(push, "oidcToken") is False:
        yield (
            f"Subscription {sub.label} pushes without an OIDC token, so the endpoint cannot authenticate "
            "Pub/Sub; set pushConfig.oidcToken.serviceAccountEmail."
        )


@rule(
    "exactly-once-ack-deadline",
    "Requires exactly-once subscriptions to have an ack deadline of at least "
    f"{facts.EXACTLY_ONCE_MIN_RECOMMENDED_ACK_DEADLINE_S} seconds (advisory).",
    ADVISORY,
    "Exactly-once: an ack after the deadline fails with INVALID_ARGUMENT; default deadline 60 s.",
    unknowns="Reports nothing unless exactly-once is known to be on and the deadline is known.",
    config_schema={
        "minimumSeconds": {
            "type": "integer", "minimum": facts.ACK_DEADLINE_MIN_S, "maximum": facts.ACK_DEADLINE_MAX_S,
            "default": facts.EXACTLY_ONCE_MIN_RECOMMENDED_ACK_DEADLINE_S,
            "description": "the smallest ack deadline accepted on an exactly-once subscription",
        }
    },
    reads=("enableExactlyOnceDelivery", "ackDeadlineSeconds"),
)
def _exactly_once_deadline(sub: Resource, config) -> Iterator[str]:
    minimum = config["minimumSeconds"]
    if enabled(get(sub.props, "enableExactlyOnceDelivery")) is not True:
        return
    seconds = as_number(get(sub.props, "ackDeadlineSeconds"))
    if known(seconds) and seconds != 0 and seconds < minimum:
        yield (
            f"Subscription {sub.label} is exactly-once with an ack deadline of {seconds:g} s; an ack after the "
            f"deadline fails with INVALID_ARGUMENT and the message is redelivered, so set ackDeadlineSeconds "
            f"to at least {minimum} (Pub/Sub's default for exactly-once is "
            f"{facts.EXACTLY_ONCE_DEFAULT_ACK_DEADLINE_S} s)."
        )


@rule(
    "subscription-expires",
    "Prohibits subscriptions that expire after inactivity (advisory).",
    ADVISORY,
    f"Without expiration_policy a subscription expires after {facts.spoken_seconds(facts.EXPIRATION_DEFAULT_S)} of "
    "inactivity; ttl \"\" = never.",
    unknowns="Reports nothing when expirationPolicy or its ttl is unknown.",
    reads=("expirationPolicy.ttl",),
)
def _subscription_expires(sub: Resource, _config) -> Iterator[str]:
    policy = get(sub.props, "expirationPolicy")
    if policy is UNKNOWN:
        return
    if block(sub.props, "expirationPolicy") is False:
        yield (
            f"Subscription {sub.label} has no expirationPolicy, so Pub/Sub deletes it after "
            f"{facts.EXPIRATION_DEFAULT_S // 86400} days without subscriber activity; set "
            "expirationPolicy.ttl to \"\" to keep it."
        )
        return
    ttl = get(nested(sub.props, "expirationPolicy"), "ttl")
    seconds = as_duration(ttl)
    if known(seconds):
        yield (
            f"Subscription {sub.label} is deleted after {ttl} without subscriber activity; set "
            "expirationPolicy.ttl to \"\" to keep it."
        )


@rule(
    "topic-kms-key",
    "Requires topics to be encrypted with a customer-managed Cloud KMS key (advisory).",
    ADVISORY,
    "A topic without kms_key_name uses Google-managed encryption only.",
    types=(facts.TOPIC,),
    unknowns="An unknown kmsKeyName counts as set.",
    reads=(),
)
def _topic_kms(topic: Resource, _config) -> Iterator[str]:
    key = get(topic.props, "kmsKeyName")
    if key is None or key == "":
        yield (
            f"Topic {topic.label} has no kmsKeyName, so its messages are encrypted with Google-managed keys "
            "only; set a customer-managed Cloud KMS key if your data requires one."
        )


RULES = rule.all
