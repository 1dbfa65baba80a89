"""Rejected by `no-public-pubsub-iam`: A topic anyone on the internet may publish to."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id)
gcp.pubsub.TopicIAMMember("anyone-publishes", topic=topic.name, role="roles/pubsub.publisher", member="allUsers")
