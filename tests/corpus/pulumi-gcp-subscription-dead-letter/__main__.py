# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Dead Letter docstring example)
import pulumi_gcp as gcp

payments = gcp.pubsub.Topic("payments", name="payments")
payments_failed = gcp.pubsub.Topic("payments-failed", name="payments-failed")

# After ten failed deliveries a message moves to payments-failed. Nothing subscribes to that topic, and
# the Pub/Sub service agent is granted nothing here.
gcp.pubsub.Subscription(
    "payments-ledger",
    name="payments-ledger",
    topic=payments.id,
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(
        dead_letter_topic=payments_failed.id,
        max_delivery_attempts=10,
    ),
)
