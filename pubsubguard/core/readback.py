"""Declared vs. actual: one vocabulary of settings for what a plan declares and what a target holds.

- `declared(plan)`: the settings of the declared model (`pubsubguard.core.declared`, read from the plan once).
- `actual(paths, ...)` reads topics and subscriptions through the admin API (the emulator or Google
  Cloud, selected by PUBSUB_EMULATOR_HOST only) and normalises them the same way.
- `differences(declared, actual)` is the pure comparison; every difference is returned, none is
  filtered (a target that ignores or changes a setting shows up here).

Settings, named once in `pubsubguard.core.settings` (`TOPIC_SETTINGS`, `SUBSCRIPTION_SETTINGS`); a key is absent
from a declared entry only when the plan leaves it to the service's default (not compared):

    topic:        kind, labels, retention_seconds (None: no topic retention), storage_regions,
                  enforce_in_transit, kms_key (None: Google-managed)
    subscription: kind, topic, ordering, exactly_once, ack_deadline_seconds, retention_seconds,
                  retain_acked_messages, filter (None: none), labels, dead_letter_topic,
                  max_delivery_attempts, retry_min_backoff_s, retry_max_backoff_s (None: no retry
                  policy), expiration_ttl ("never" | seconds), delivery ("pull" | "push" | "bigquery" |
                  "cloud_storage"), push_endpoint, push_oidc_service_account, push_audience,
                  bigquery_table, cloud_storage_bucket

A missing resource is one Difference with setting "exists" (declared True, actual False).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterable

from pubsubguard.core import push_receiver
from pubsubguard.core.declared import (
    BIGQUERY, CLOUD_STORAGE, PULL, PUSH, PlanValueError, estate, is_topic, subscription_path, topic_path,
)
from pubsubguard.core.settings import Setting

__all__ = ["Difference", "ReadbackError", "actual", "declared", "differences", "is_topic", "subscription_path", "topic_path"]

@dataclass(frozen=True)
class Difference:
    """One setting the target does not hold as declared."""

    path: str
    setting: str  # a setting (`pubsubguard.core.settings.Setting`); `Setting.EXISTS` for a missing resource
    declared: Any
    actual: Any

    @property
    def kind(self) -> str:
        """missing (the resource does not exist) | differs."""
        return "missing" if self.setting == Setting.EXISTS else "differs"


ReadbackError = PlanValueError  # a plan value that cannot be compared (unknown until deploy, or malformed)


# --- Declared ----------------------------------------------------------------------------------
def declared(plan: dict) -> dict[str, dict]:
    """Resource path -> normalised declared settings, for every topic and subscription in the plan
    (read once into the declared model, `pubsubguard.core.declared`)."""
    return estate(plan).settings()


# --- Actual ------------------------------------------------------------------------------------
def _duration_seconds(value: Any) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    else:  # a protobuf Duration
        seconds = value.seconds + value.nanos / 1e9
    return int(seconds) if seconds == int(seconds) else seconds


def actual_topic(topic) -> dict:
    """Normalised settings of a `google.pubsub_v1.Topic`."""
    retention = _duration_seconds(topic.message_retention_duration) if "message_retention_duration" in topic else None
    settings = {
        Setting.KIND: "topic",
        Setting.LABELS: dict(topic.labels),
        Setting.RETENTION_S: retention,
        Setting.KMS_KEY: topic.kms_key_name or None,
        Setting.STORAGE_REGIONS: None,
        Setting.ENFORCE_IN_TRANSIT: None,
    }
    if "message_storage_policy" in topic:
        settings[Setting.STORAGE_REGIONS] = sorted(topic.message_storage_policy.allowed_persistence_regions)
        settings[Setting.ENFORCE_IN_TRANSIT] = bool(topic.message_storage_policy.enforce_in_transit)
    return settings


def actual_subscription(subscription) -> dict:
    """Normalised settings of a `google.pubsub_v1.Subscription`."""
    s = subscription
    has_dead_letter = "dead_letter_policy" in s and bool(s.dead_letter_policy.dead_letter_topic)
    has_retry = "retry_policy" in s
    push = s.push_config if "push_config" in s else None
    has_push = push is not None and bool(push.push_endpoint)
    has_bigquery = "bigquery_config" in s and bool(s.bigquery_config.table)
    has_storage = "cloud_storage_config" in s and bool(s.cloud_storage_config.bucket)
    expiration = None
    if "expiration_policy" in s:
        expiration = _duration_seconds(s.expiration_policy.ttl) if "ttl" in s.expiration_policy else "never"
    return {
        Setting.KIND: "subscription",
        Setting.TOPIC: s.topic,
        Setting.ORDERING: bool(s.enable_message_ordering),
        Setting.EXACTLY_ONCE: bool(s.enable_exactly_once_delivery),
        Setting.ACK_DEADLINE_S: s.ack_deadline_seconds,
        Setting.RETENTION_S: (
            _duration_seconds(s.message_retention_duration) if "message_retention_duration" in s else None
        ),
        Setting.RETAIN_ACKED_MESSAGES: bool(s.retain_acked_messages),
        Setting.FILTER: s.filter or None,
        Setting.LABELS: dict(s.labels),
        Setting.DEAD_LETTER_TOPIC: s.dead_letter_policy.dead_letter_topic if has_dead_letter else None,
        Setting.MAX_DELIVERY_ATTEMPTS: s.dead_letter_policy.max_delivery_attempts if has_dead_letter else None,
        Setting.RETRY_MIN_BACKOFF_S: (
            _duration_seconds(s.retry_policy.minimum_backoff) if has_retry and "minimum_backoff" in s.retry_policy else None
        ),
        Setting.RETRY_MAX_BACKOFF_S: (
            _duration_seconds(s.retry_policy.maximum_backoff) if has_retry and "maximum_backoff" in s.retry_policy else None
        ),
        Setting.EXPIRATION_TTL: expiration,
        Setting.DELIVERY: PUSH if has_push else BIGQUERY if has_bigquery else CLOUD_STORAGE if has_storage else PULL,
        Setting.PUSH_ENDPOINT: push_receiver.stood_in_for(push.push_endpoint) if has_push else None,
        Setting.PUSH_OIDC_SERVICE_ACCOUNT: (
            (push.oidc_token.service_account_email or None) if has_push and "oidc_token" in push else None
        ),
        Setting.PUSH_AUDIENCE: (push.oidc_token.audience or None) if has_push and "oidc_token" in push else None,
        Setting.BIGQUERY_TABLE: s.bigquery_config.table if has_bigquery else None,
        Setting.CLOUD_STORAGE_BUCKET: s.cloud_storage_config.bucket if has_storage else None,
    }


def actual(paths: Iterable[str], publisher=None, subscriber=None) -> dict[str, dict | None]:
    """Path -> normalised settings as the target holds them; None when the resource does not exist,
    which includes a name the target refuses (InvalidArgument: e.g. `zamówienia`, whose create failed
    the same way and is reported by the caller)."""
    from google.api_core import exceptions
    from google.cloud import pubsub_v1

    result: dict[str, dict | None] = {}
    for path in paths:
        try:
            if is_topic(path):
                publisher = publisher or pubsub_v1.PublisherClient()
                result[path] = actual_topic(publisher.get_topic(topic=path))
            else:
                subscriber = subscriber or pubsub_v1.SubscriberClient()
                result[path] = actual_subscription(subscriber.get_subscription(subscription=path))
        except (exceptions.NotFound, exceptions.InvalidArgument):
            result[path] = None
    return result


# --- Comparison ----------------------------------------------------------------------------------
def differences(declared: dict[str, dict], actual: dict[str, dict | None]) -> list[Difference]:
    """Every declared setting the target does not hold as declared (in declared order)."""
    found: list[Difference] = []
    for path, settings in declared.items():
        held = actual.get(path)
        if held is None:
            found.append(Difference(path, Setting.EXISTS, True, False))
            continue
        for setting, value in settings.items():
            if held.get(setting) != value:
                found.append(Difference(path, setting, value, held.get(setting)))
    return found
