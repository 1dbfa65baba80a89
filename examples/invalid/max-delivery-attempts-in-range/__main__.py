"""Rejected by `max-delivery-attempts-in-range`: 200 delivery attempts before dead-lettering: Pub/Sub accepts 5..100."""

import pulumi_gcp as gcp

AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
topic = gcp.pubsub.Topic("orders", name="orders")

dead_letter = gcp.pubsub.Topic("dead-letter", name="orders-dead-letter")
gcp.pubsub.Subscription("drain", name="orders-dead-letter-drain", topic=dead_letter.id)
gcp.pubsub.TopicIAMMember("dlq-publisher", topic=dead_letter.name, role="roles/pubsub.publisher", member=AGENT)
subscription = gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(dead_letter_topic=dead_letter.id, max_delivery_attempts=200),
)
gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", subscription=subscription.name, role="roles/pubsub.subscriber", member=AGENT)
