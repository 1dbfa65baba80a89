"""Rejected by `ordered-publishers-pinned`: an ordered subscription whose topic declares publishers in no
single region."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders", labels={"pubsubguard-publisher-region": "global"})
gcp.pubsub.Subscription("orders-ordered", name="orders-ordered", topic=topic.id, enable_message_ordering=True)
