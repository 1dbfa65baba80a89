# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/topics/defaults.py
import pulumi_gcp as gcp

PROJECT = gcp.config.project or "vcmate"
REGION = gcp.config.region or "us-central1"

# Every subscription keeps a week of messages, acked ones too, and lives 30 days unused.
# The durations are written in days, a form the Pub/Sub API does not accept.
COMMON = {
    "project": PROJECT,
    "ack_deadline_seconds": 600,
    "retain_acked_messages": True,
    "message_retention_duration": "7d",
    "expiration_policy": {"ttl": "30d"},
}


def debug_reader(topic_name: str):
    """A pull subscription for looking at what reached a topic by hand."""
    label = f"{topic_name}-subscription-debug"
    return gcp.pubsub.Subscription(label, name=label, topic=topic_name, **COMMON)
