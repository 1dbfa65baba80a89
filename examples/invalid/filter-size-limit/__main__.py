"""Rejected by `filter-size-limit`: A 300-byte filter: Pub/Sub filters are at most 256 bytes."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
regions = " OR ".join(f'attributes.region = "region-{n:03d}"' for n in range(12))
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id, filter=regions)
