# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Pull docstring example)
import pulumi_gcp as gcp

invoices = gcp.pubsub.Topic("invoices", name="invoices")

# Pull delivery. The TTL has a fractional second part, which the API's duration format allows.
invoices_audit = gcp.pubsub.Subscription(
    "invoices-audit",
    name="invoices-audit",
    topic=invoices.id,
    ack_deadline_seconds=20,
    message_retention_duration="1200s",
    retain_acked_messages=True,
    enable_message_ordering=False,
    expiration_policy=gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl="300000.5s"),
    retry_policy=gcp.pubsub.SubscriptionRetryPolicyArgs(minimum_backoff="10s"),
    labels={"owner": "billing"},
)
