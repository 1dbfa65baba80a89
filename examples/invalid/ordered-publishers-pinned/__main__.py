"""Rejected by `ordered-publishers-pinned`: An ordered subscription whose topic's publishers are not pinned to one region."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("orders-ordered", name="orders-ordered", topic=topic.id, enable_message_ordering=True)
