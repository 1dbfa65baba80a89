"""Rejected by `no-exactly-once-on-export`: Exactly-once on a BigQuery export subscription: export subscriptions are not exactly-once."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
subscription = gcp.pubsub.Subscription(
    "orders-to-bigquery",
    name="orders-to-bigquery",
    topic=topic.id,
    enable_exactly_once_delivery=True,
    labels={"pubsubguard-consumer-region": "us-east1"},
    bigquery_config=gcp.pubsub.SubscriptionBigqueryConfigArgs(table="example-project.orders.events"),
)
