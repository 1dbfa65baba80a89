"""A module beside the program in src/: imported as `topics` because the program folder is on sys.path."""
import pulumi_gcp as gcp


def topic_with_drain(name: str) -> gcp.pubsub.Topic:
    topic = gcp.pubsub.Topic(name, name=name)
    gcp.pubsub.Subscription(f"{name}-drain", name=f"{name}-drain", topic=topic.id, ack_deadline_seconds=30)
    return topic
