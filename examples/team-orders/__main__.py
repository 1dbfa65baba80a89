"""A team's Pulumi program, written here as teams write one with pulumi-gcp: wiring only."""

import pulumi

from channel import Channel, ChannelArgs

config = pulumi.Config()
orders = Channel("orders", ChannelArgs(project_number=config.require("projectNumber")))

pulumi.export("topic", orders.topic.name)
pulumi.export("dead_letter_topic", orders.dead_letter_topic.name)
pulumi.export("subscriptions", [orders.ordered.name, orders.exactly_once.name])
pulumi.export("ops_webhook", config.require_secret("opsWebhook"))  # a secret: pubsubguard never needs it
