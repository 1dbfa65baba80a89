"""Rejected by `dead-letter-topic-has-subscription`: A dead-letter topic nobody reads: forwarded messages would be lost."""

import pulumi_gcp as gcp

AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
topic = gcp.pubsub.Topic("orders", name="orders")

dead_letter = gcp.pubsub.Topic("dead-letter", name="orders-dead-letter")
gcp.pubsub.TopicIAMMember("dlq-publisher", topic=dead_letter.name, role="roles/pubsub.publisher", member=AGENT)
subscription = gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(dead_letter_topic=dead_letter.id, max_delivery_attempts=5),
)
gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", subscription=subscription.name, role="roles/pubsub.subscriber", member=AGENT)
