"""The names of the settings compared between a plan and a target: the one place each is spelled.

A setting's name is user-facing: it keys the readback's settings (`pubsubguard.core.readback`), a drift finding's
`setting` and the report's, and `pubsubguard apply`'s table. Inside the code a duration is named with `_s`
(`Subscription.retention_s`, `TwinSpec.ack_deadline_s`); the setting keeps the admin API's `_seconds` where the API
says so (`Setting.RETENTION_S` is "retention_seconds"). Every module reads the names from here; the admin API's
field names that hold each setting (an update mask's paths) are beside them, for `pubsubguard.core.apply`.
tests/cli/test_vocabulary.py fails when a module spells a setting by hand again.
"""

from __future__ import annotations


class Setting:
    """The name of each setting; a constant's name follows the code's convention, its value is the user-facing key."""

    KIND = "kind"  # "topic" | "subscription"
    LABELS = "labels"
    RETENTION_S = "retention_seconds"  # topic and subscription: message retention
    # topic
    STORAGE_REGIONS = "storage_regions"
    ENFORCE_IN_TRANSIT = "enforce_in_transit"
    KMS_KEY = "kms_key"
    # subscription
    TOPIC = "topic"
    ORDERING = "ordering"
    EXACTLY_ONCE = "exactly_once"
    ACK_DEADLINE_S = "ack_deadline_seconds"
    RETAIN_ACKED_MESSAGES = "retain_acked_messages"
    FILTER = "filter"
    DEAD_LETTER_TOPIC = "dead_letter_topic"
    MAX_DELIVERY_ATTEMPTS = "max_delivery_attempts"
    RETRY_MIN_BACKOFF_S = "retry_min_backoff_s"
    RETRY_MAX_BACKOFF_S = "retry_max_backoff_s"
    EXPIRATION_TTL = "expiration_ttl"
    DELIVERY = "delivery"
    PUSH_ENDPOINT = "push_endpoint"
    PUSH_OIDC_SERVICE_ACCOUNT = "push_oidc_service_account"
    PUSH_AUDIENCE = "push_audience"
    BIGQUERY_TABLE = "bigquery_table"
    CLOUD_STORAGE_BUCKET = "cloud_storage_bucket"
    # not a setting: the difference of a resource the target does not hold (declared True, actual False)
    EXISTS = "exists"


TOPIC_SETTINGS = (
    Setting.KIND, Setting.LABELS, Setting.RETENTION_S, Setting.STORAGE_REGIONS, Setting.ENFORCE_IN_TRANSIT,
    Setting.KMS_KEY,
)
SUBSCRIPTION_SETTINGS = (
    Setting.KIND, Setting.TOPIC, Setting.ORDERING, Setting.EXACTLY_ONCE, Setting.ACK_DEADLINE_S,
    Setting.RETENTION_S, Setting.RETAIN_ACKED_MESSAGES, Setting.FILTER, Setting.LABELS, Setting.DEAD_LETTER_TOPIC,
    Setting.MAX_DELIVERY_ATTEMPTS, Setting.RETRY_MIN_BACKOFF_S, Setting.RETRY_MAX_BACKOFF_S, Setting.EXPIRATION_TTL,
    Setting.DELIVERY, Setting.PUSH_ENDPOINT, Setting.PUSH_OIDC_SERVICE_ACCOUNT, Setting.PUSH_AUDIENCE,
    Setting.BIGQUERY_TABLE, Setting.CLOUD_STORAGE_BUCKET,
)

# Setting -> the admin API's fields that hold it (the paths an update mask names); a topic and a subscription hold
# their labels and retention in fields of the same names.
_HELD_ALIKE = {Setting.LABELS: ("labels",), Setting.RETENTION_S: ("message_retention_duration",)}
TOPIC_UPDATE_FIELDS = {
    **_HELD_ALIKE,
    Setting.STORAGE_REGIONS: ("message_storage_policy",),
    Setting.ENFORCE_IN_TRANSIT: ("message_storage_policy",),
    Setting.KMS_KEY: ("kms_key_name",),
}
SUBSCRIPTION_UPDATE_FIELDS = {
    **_HELD_ALIKE,
    Setting.ACK_DEADLINE_S: ("ack_deadline_seconds",),
    Setting.RETAIN_ACKED_MESSAGES: ("retain_acked_messages",),
    Setting.EXACTLY_ONCE: ("enable_exactly_once_delivery",),
    Setting.DEAD_LETTER_TOPIC: ("dead_letter_policy",),
    Setting.MAX_DELIVERY_ATTEMPTS: ("dead_letter_policy",),
    Setting.RETRY_MIN_BACKOFF_S: ("retry_policy",),
    Setting.RETRY_MAX_BACKOFF_S: ("retry_policy",),
    Setting.EXPIRATION_TTL: ("expiration_policy",),
    Setting.DELIVERY: ("push_config", "bigquery_config", "cloud_storage_config"),
    Setting.PUSH_ENDPOINT: ("push_config",),
    Setting.PUSH_OIDC_SERVICE_ACCOUNT: ("push_config",),
    Setting.PUSH_AUDIENCE: ("push_config",),
    Setting.BIGQUERY_TABLE: ("bigquery_config",),
    Setting.CLOUD_STORAGE_BUCKET: ("cloud_storage_config",),
}
# Subscription settings the API cannot change in place: a difference is reported, never silently replaced.
FIXED_AT_CREATION = frozenset({Setting.TOPIC, Setting.ORDERING, Setting.FILTER})
