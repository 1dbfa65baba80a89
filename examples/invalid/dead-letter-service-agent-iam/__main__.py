"""Rejected by `dead-letter-service-agent-iam`: Dead-lettering without the service agent's IAM: nothing would be forwarded."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")

dead_letter = gcp.pubsub.Topic("dead-letter", name="orders-dead-letter")
gcp.pubsub.Subscription("drain", name="orders-dead-letter-drain", topic=dead_letter.id)
gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(dead_letter_topic=dead_letter.id, max_delivery_attempts=5),
)
