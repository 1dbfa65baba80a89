# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Push docstring example)
import pulumi_gcp as gcp

signups = gcp.pubsub.Topic("signups", name="signups")

# Push to a public https receiver; x-goog-version picks the v1 push payload. No OIDC token.
gcp.pubsub.Subscription(
    "signups-webhook",
    name="signups-webhook",
    topic=signups.id,
    ack_deadline_seconds=20,
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint="https://hooks.example.org/signups",
        attributes={"x-goog-version": "v1"},
    ),
    labels={"owner": "growth"},
)
