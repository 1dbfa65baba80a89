# Written here after the shape of launchflow/buildflow buildflow/core/app/flow.py (the program its GCP providers make for a GCS file-change source and a Pub/Sub sink)
"""Files finalized in a bucket are announced on a topic named after it and read by a pull
subscription; a second topic receives what the flow writes."""
import pulumi

from parts import Bucket, ChangeFeed, PullSubscription, Topic, TopicRef

cfg = pulumi.Config()
project = cfg.require("gcp_project")
bucket_name = cfg.require("bucket")


def after(*resources) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(depends_on=list(resources))


incoming = TopicRef(project, f"{bucket_name}_topic")

bucket = Bucket(project, bucket_name, "US")
topic = Topic(incoming)
reader = PullSubscription(project, f"{bucket_name}_subscription", incoming,
                          ack_seconds=600, retention=f"{20 * 60}s", opts=after(topic))
ChangeFeed(bucket_name, incoming, ["OBJECT_FINALIZE"], opts=after(bucket, reader))

Topic(TopicRef(project, cfg.require("outgoing_topic")))  # the flow's sink
