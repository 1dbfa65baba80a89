"""Rejected by `dead-letter-topic-not-source`: A subscription that dead-letters into its own topic: the dead-letter topic must differ."""

import pulumi_gcp as gcp

AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.TopicIAMMember("dlq-publisher", topic=topic.name, role="roles/pubsub.publisher", member=AGENT)
subscription = gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(dead_letter_topic=topic.id, max_delivery_attempts=5),
)
gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", subscription=subscription.name, role="roles/pubsub.subscriber", member=AGENT)
