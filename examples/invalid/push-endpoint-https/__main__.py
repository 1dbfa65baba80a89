"""Rejected by `push-endpoint-https`: A push endpoint over plain http: Pub/Sub pushes only to HTTPS."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-push",
    name="orders-push",
    topic=topic.id,
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint="http://orders.example.com/push",
        oidc_token=gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(service_account_email="pusher@example-project.iam.gserviceaccount.com"),
    ),
)
