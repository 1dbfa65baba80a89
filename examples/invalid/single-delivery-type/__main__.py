"""Rejected by `single-delivery-type`: Push and BigQuery on one subscription: at most one delivery type is allowed."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
subscription = gcp.pubsub.Subscription(
    "orders-twice",
    name="orders-twice",
    topic=topic.id,
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint="https://orders.example.com/push",
        oidc_token=gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(service_account_email="pusher@example-project.iam.gserviceaccount.com"),
    ),
    bigquery_config=gcp.pubsub.SubscriptionBigqueryConfigArgs(table="example-project.orders.events"),
)
