"""Rejected by `no-exactly-once-on-push`: Exactly-once on a push subscription: Pub/Sub supports exactly-once for pull only."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
subscription = gcp.pubsub.Subscription(
    "orders-push",
    name="orders-push",
    topic=topic.id,
    enable_exactly_once_delivery=True,
    labels={"pubsubguard-consumer-region": "us-east1"},
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint="https://orders.example.com/push",
        oidc_token=gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(service_account_email="pusher@example-project.iam.gserviceaccount.com"),
    ),
)
