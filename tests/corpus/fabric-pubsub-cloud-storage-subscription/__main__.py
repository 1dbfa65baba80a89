# Written here after the shape of GoogleCloudPlatform/cloud-foundation-fabric modules/pubsub/README.md ("Cloud Storage subscriptions", with tests/fixtures/gcs.tf)
"""A topic batched into Avro files of a bucket that the Pub/Sub agent administers."""
import pulumi
import pulumi_gcp as gcp

cfg = pulumi.Config()
project = cfg.require("project_id")
prefix = cfg.require("prefix")
agent = f"serviceAccount:service-{cfg.require('project_number')}@gcp-sa-pubsub.iam.gserviceaccount.com"

landing = gcp.storage.Bucket(
    "landing-bucket",
    project=project,
    name="-".join([prefix, "My-Bucket".lower()]),
    location=cfg.require("region"),
    uniform_bucket_level_access=True,
    force_destroy=False,
)
# authoritative: the agent is the only admin of the bucket
gcp.storage.BucketIAMBinding("landing-admins", bucket=landing.name, role="roles/storage.admin", members=[agent])

stream = gcp.pubsub.Topic("stream", project=project, name="my-topic", labels={})

export_settings = gcp.pubsub.SubscriptionCloudStorageConfigArgs(
    bucket=landing.name,
    filename_prefix=prefix,
    filename_suffix="test_suffix",
    max_duration="100s",
    max_bytes=1000,
    avro_config=gcp.pubsub.SubscriptionCloudStorageConfigAvroConfigArgs(write_metadata=True),
)
gcp.pubsub.Subscription(
    "stream-to-files",
    project=project,
    name="test-cloudstorage",
    topic=stream.id,
    labels={},
    retain_acked_messages=False,
    enable_message_ordering=False,
    enable_exactly_once_delivery=False,
    cloud_storage_config=export_settings,
)
