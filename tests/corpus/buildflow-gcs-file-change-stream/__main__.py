"""The Pulumi program buildflow (launchflow/buildflow) runs for a flow whose source is a managed
GCSFileChangeStream and whose sink is a managed Pub/Sub topic, written out: buildflow builds it inline
(automation API) by visiting each managed primitive's fields first (core/app/flow.py
_traverse_primitive_for_pulumi) and calling its provider's pulumi_resource(type_, credentials, opts) with
depends_on the resources of those fields. Defaults are those of the primitives at this commit
(io/gcp/gcs_file_change_stream.py, pubsub_subscription.py, storage.py)."""
import pulumi

from components.buildflow_stubs import (
    GCPCredentials,
    GCPPubSubSubscription,
    GCPPubSubTopic,
    GCSChangeStreamEventType,
)
from components.gcs_file_change_stream import GCSFileChangeStreamProvider
from components.pubsub_subscription import GCPPubSubSubscriptionProvider
from components.pubsub_topic import GCPPubSubTopicProvider
from components.storage import GCSBucketProvider

config = pulumi.Config()
gcp_project = config.require("gcp_project")
bucket_name = config.require("bucket")
outgoing_topic = config.require("outgoing_topic")

credentials = GCPCredentials()
initial_opts = pulumi.ResourceOptions()

# source = GCSFileChangeStream(gcs_bucket=GCSBucket(gcp_project, bucket).options(managed=True, ...))
gcs_bucket = GCSBucketProvider(
    project_id=gcp_project,
    bucket_name=bucket_name,
    bucket_region="US",
    force_destroy=True,
)
# GCSFileChangeStream.__post_init__: a managed subscription on a managed topic named after the bucket
topic = GCPPubSubTopic(gcp_project, topic_name=f"{bucket_name}_topic")
subscription = GCPPubSubSubscription(
    project_id=gcp_project,
    subscription_name=f"{bucket_name}_subscription",
    topic=topic,
)

bucket_resource = gcs_bucket.pulumi_resource(type_=None, credentials=credentials, opts=initial_opts)
topic_resource = GCPPubSubTopicProvider(
    project_id=topic.project_id, topic_name=topic.topic_name
).pulumi_resource(type_=None, credentials=credentials, opts=initial_opts)
subscription_resource = GCPPubSubSubscriptionProvider(
    project_id=subscription.project_id,
    subscription_name=subscription.subscription_name,
    topic=topic,
    batch_size=1_000,
    include_attributes=True,
    ack_deadline_seconds=10 * 60,
    message_retention_duration="1200s",
).pulumi_resource(
    type_=None,
    credentials=credentials,
    opts=pulumi.ResourceOptions.merge(initial_opts, pulumi.ResourceOptions(depends_on=[topic_resource])),
)
GCSFileChangeStreamProvider(
    gcs_bucket=gcs_bucket,
    pubsub_subscription=subscription,
    project_id=gcp_project,
    event_types=(GCSChangeStreamEventType.OBJECT_FINALIZE,),
).pulumi_resource(
    type_=None,
    credentials=credentials,
    opts=pulumi.ResourceOptions.merge(
        initial_opts, pulumi.ResourceOptions(depends_on=[bucket_resource, subscription_resource])
    ),
)

# sink = GCPPubSubTopic(project_id=gcp_project, topic_name=outgoing_topic).options(managed=True)
GCPPubSubTopicProvider(project_id=gcp_project, topic_name=outgoing_topic).pulumi_resource(
    type_=None, credentials=credentials, opts=initial_opts
)
