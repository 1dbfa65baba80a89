"""Written here: a team's component, as platform libraries write them: the queue, its dead-letter topic and drain, and
the dead-letter IAM granted to the service account the component creates for its workers. The grant looks
complete, but a created service account is never the Pub/Sub service agent that forwards messages."""

import pulumi
import pulumi_gcp as gcp


class DeadLetteredQueue(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("acme:pubsub:DeadLetteredQueue", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        app = gcp.serviceaccount.Account(f"{name}-app", account_id=f"{name}-app", opts=child)
        member = app.email.apply(lambda email: f"serviceAccount:{email}")
        topic = gcp.pubsub.Topic(f"{name}-topic", opts=child)
        dead_letter = gcp.pubsub.Topic(f"{name}-dead-letter", opts=child)
        subscription = gcp.pubsub.Subscription(
            f"{name}-sub", topic=topic.id, opts=child,
            dead_letter_policy={"dead_letter_topic": dead_letter.id, "max_delivery_attempts": 10},
            expiration_policy={"ttl": ""})
        gcp.pubsub.Subscription(f"{name}-drain", topic=dead_letter.id, expiration_policy={"ttl": ""}, opts=child)
        gcp.pubsub.TopicIAMMember(f"{name}-dlq-publisher", topic=dead_letter.name, role="roles/pubsub.publisher",
                                  member=member, opts=child)
        gcp.pubsub.SubscriptionIAMMember(f"{name}-dlq-subscriber", subscription=subscription.name,
                                         role="roles/pubsub.subscriber", member=member, opts=child)
        self.register_outputs({"topic": topic.name})


DeadLetteredQueue("orders")
