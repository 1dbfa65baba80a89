"""One message channel: a topic, its consumers' subscriptions and a dead-letter topic that works."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass
class ChannelArgs:
    project_number: str  # for the Pub/Sub service agent, which forwards dead letters
    max_delivery_attempts: int = 5


class Channel(pulumi.ComponentResource):
    topic: gcp.pubsub.Topic
    dead_letter_topic: gcp.pubsub.Topic
    ordered: gcp.pubsub.Subscription
    exactly_once: gcp.pubsub.Subscription

    def __init__(self, name: str, args: ChannelArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("team:index:Channel", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        agent = f"serviceAccount:service-{args.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"

        # Every resource is autonamed: Pulumi appends a random suffix at deploy (orders-6a1f3c2).
        self.topic = gcp.pubsub.Topic(name, message_retention_duration="86400s", labels={"team": "orders"}, opts=child)
        self.dead_letter_topic = gcp.pubsub.Topic(f"{name}-dlq", labels={"team": "orders"}, opts=child)
        # Forwarded messages are lost unless the dead-letter topic has a subscription of its own.
        self.dead_letter_drain = gcp.pubsub.Subscription(
            f"{name}-dlq-drain", topic=self.dead_letter_topic.id, message_retention_duration="604800s", opts=child)

        self.ordered = gcp.pubsub.Subscription(
            f"{name}-ordered", topic=self.topic.id, enable_message_ordering=True, ack_deadline_seconds=30, opts=child)
        self.exactly_once = gcp.pubsub.Subscription(
            f"{name}-exactly-once",
            topic=self.topic.id,
            enable_exactly_once_delivery=True,
            ack_deadline_seconds=60,
            dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(
                dead_letter_topic=self.dead_letter_topic.id,
                max_delivery_attempts=args.max_delivery_attempts,
            ),
            opts=child,
        )

        gcp.pubsub.TopicIAMMember(
            f"{name}-dlq-publisher", topic=self.dead_letter_topic.name, role="roles/pubsub.publisher",
            member=agent, opts=child)
        gcp.pubsub.SubscriptionIAMMember(
            f"{name}-exactly-once-subscriber", subscription=self.exactly_once.name, role="roles/pubsub.subscriber",
            member=agent, opts=child)

        self.register_outputs({
            "topic": self.topic.name,
            "dead_letter_topic": self.dead_letter_topic.name,
            "ordered": self.ordered.name,
            "exactly_once": self.exactly_once.name,
        })
