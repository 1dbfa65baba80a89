"""Rejected by `bigquery-schema-options`: a BigQuery subscription that asks for the table's and the topic's
schema at once."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-bigquery",
    name="orders-bigquery",
    topic=topic.id,
    bigquery_config=gcp.pubsub.SubscriptionBigqueryConfigArgs(
        table="example-project.orders.events", use_table_schema=True, use_topic_schema=True,
        service_account_email="bq-writer@example-project.iam.gserviceaccount.com",
    ),
)
