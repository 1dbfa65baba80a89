"""Rejected by `cloud-storage-limits`: a Cloud Storage subscription that rotates files every 30 s (the
minimum is 1 minute)."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-archive",
    name="orders-archive",
    topic=topic.id,
    ack_deadline_seconds=60,
    cloud_storage_config=gcp.pubsub.SubscriptionCloudStorageConfigArgs(bucket="orders-archive", max_duration="30s"),
)
