# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Push Cloudstorage Avro docstring example)
import pulumi
import pulumi_gcp as gcp

archive = gcp.storage.Bucket("telemetry-archive", name="telemetry-archive-psg", location="US", uniform_bucket_level_access=True)
telemetry = gcp.pubsub.Topic("telemetry", name="telemetry")

# Pub/Sub writes the files as its own service agent, named after the project number.
number = gcp.organizations.get_project().number
agent_on_bucket = gcp.storage.BucketIAMMember(
    "telemetry-archive-agent",
    bucket=archive.name,
    role="roles/storage.admin",
    member=f"serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com",
)

# Files close at 1000 bytes (the API's smallest max_bytes), 1000 messages or five minutes.
gcp.pubsub.Subscription(
    "telemetry-to-gcs",
    name="telemetry-to-gcs",
    topic=telemetry.id,
    cloud_storage_config={
        "bucket": archive.name,
        "filename_prefix": "telemetry-",
        "filename_suffix": "-batch.avro",
        "filename_datetime_format": "YYYY-MM-DD/hh_mm_ssZ",
        "max_bytes": 1000,
        "max_messages": 1000,
        "max_duration": "300s",
        "avro_config": {"write_metadata": True, "use_topic_schema": True},
    },
    opts=pulumi.ResourceOptions(depends_on=[archive, agent_on_bucket]),
)
