# Written here after the shape of launchflow/buildflow buildflow/io/gcp/providers/ (pubsub_topic.py, pubsub_subscription.py, gcs_file_change_stream.py, storage.py)
"""Component resources, one per piece of a file-change stream, each under a four-part type token."""
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class TopicRef:
    project: str
    name: str

    @property
    def path(self) -> str:
        return f"projects/{self.project}/topics/{self.name}"


def console(kind: str, name: str, project: str) -> str:
    return f"https://console.cloud.google.com/{kind}/{name}?project={project}"


class Bucket(pulumi.ComponentResource):
    def __init__(self, project: str, name: str, location: str, opts=None):
        super().__init__("streams:gcp:storage:Bucket", f"bucket-{name}", None, opts)
        self.bucket = gcp.storage.Bucket(
            name, name=name, project=project, location=location, force_destroy=True,
            opts=pulumi.ResourceOptions(parent=self, custom_timeouts=pulumi.CustomTimeouts(create="3m")))
        self.register_outputs({"bucket": self.bucket.id, "console": console("storage/browser", name, project)})


class Topic(pulumi.ComponentResource):
    # "storage" in the token although it holds a Pub/Sub topic
    def __init__(self, ref: TopicRef, opts=None):
        super().__init__("streams:gcp:storage:Topic", f"topic-{ref.project}-{ref.name}", None, opts)
        self.topic = gcp.pubsub.Topic(f"{ref.project}-{ref.name}", name=ref.name, project=ref.project,
                                      opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"topic": self.topic.id,
                               "console": console("cloudpubsub/topic/detail", ref.name, ref.project)})


class PullSubscription(pulumi.ComponentResource):
    def __init__(self, project: str, name: str, topic: TopicRef, ack_seconds: int, retention: str, opts=None):
        super().__init__("streams:gcp:pubsub:Subscription", f"sub-{project}-{name}", None, opts)
        self.subscription = gcp.pubsub.Subscription(
            f"{project}-{name}", name=name, project=project, topic=topic.path,  # a literal path, not an output
            ack_deadline_seconds=ack_seconds, message_retention_duration=retention,
            opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.subscription.name,
                               "console": console("cloudpubsub/subscription/detail", name, project)})


class ChangeFeed(pulumi.ComponentResource):
    """Bucket notifications into a topic; Cloud Storage's agent is made the topic's only publisher."""

    def __init__(self, bucket: str, topic: TopicRef, events: list[str], opts=None):
        super().__init__("streams:gcp:storage:ChangeFeed", f"feed-{topic.project}-{bucket}", None, opts)
        agent = gcp.storage.get_project_service_account(project=topic.project, user_project=topic.project)
        self.binding = gcp.pubsub.TopicIAMBinding(
            f"{bucket}-{topic.name}-publisher", project=topic.project, topic=topic.name,
            role="roles/pubsub.publisher", members=["serviceAccount:" + agent.email_address],
            opts=pulumi.ResourceOptions(parent=self))
        self.notification = gcp.storage.Notification(
            f"{bucket}-notification", bucket=bucket, topic=topic.path, payload_format="JSON_API_V1",
            event_types=events, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.binding]))
        self.register_outputs({"notification": self.notification.id, "topic": self.binding.topic})
