"""GoogleCloudPlatform/cloud-foundation-fabric, modules/pubsub/README.md, example "Cloud Storage subscriptions"
(module "pubsub" with the fixture tests/fixtures/gcs.tf, module "gcs"), in Python.

Each module call is written out as the module's resources for these inputs (modules/pubsub/main.tf,
modules/gcs/main.tf + iam.tf), each with the module resource it comes from. The README's test variables
(var.project_id, var.project_number, var.prefix, var.region) are stack config.
"""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
project_id = config.require("project_id")
project_number = config.require("project_number")
prefix = config.require("prefix")
region = config.require("region")


def gcs_module(project_id, prefix, name, location, iam):
    """modules/gcs: the bucket and its authoritative IAM (other module defaults left at the provider's)."""
    _name = f"{prefix}-{name.lower()}" if prefix is not None else name.lower()
    # google_storage_bucket.bucket
    bucket = gcp.storage.Bucket("gcs-bucket",
        project=project_id,
        name=_name,
        location=location,
        uniform_bucket_level_access=True,
        force_destroy=False)
    # google_storage_bucket_iam_binding.authoritative
    for role, members in iam.items():
        gcp.storage.BucketIAMBinding(f"gcs-authoritative-{role}",
            bucket=bucket.name,
            role=role,
            members=members)
    return bucket


def pubsub_module(project_id, name, subscriptions, labels=None, message_retention_duration=None, kms_key=None):
    """modules/pubsub/main.tf (no schema, no regions, no IAM in this example)."""
    labels = labels or {}
    # google_pubsub_topic.default
    topic = gcp.pubsub.Topic("pubsub-default",
        project=project_id,
        name=name,
        kms_key_name=kms_key,
        labels=labels,
        message_retention_duration=message_retention_duration)
    for key, sub in subscriptions.items():
        args = {}
        cs = sub.get("cloud_storage")
        if cs is not None:
            args["cloud_storage_config"] = {
                "bucket": cs["bucket"],
                "filename_prefix": cs.get("filename_prefix"),
                "filename_suffix": cs.get("filename_suffix"),
                "max_duration": cs.get("max_duration"),
                "max_bytes": cs.get("max_bytes"),
                **({"avro_config": {"write_metadata": cs["avro_config"].get("write_metadata", False)}}
                   if cs.get("avro_config") is not None else {}),
            }
        # google_pubsub_subscription.default[key]
        gcp.pubsub.Subscription(f"pubsub-default-{key}",
            project=project_id,
            name=key,
            topic=topic.id,
            labels=sub.get("labels") or labels,
            ack_deadline_seconds=sub.get("ack_deadline_seconds"),
            message_retention_duration=sub.get("message_retention_duration"),
            retain_acked_messages=sub.get("retain_acked_messages", False),
            filter=sub.get("filter"),
            enable_message_ordering=sub.get("enable_message_ordering", False),
            enable_exactly_once_delivery=sub.get("enable_exactly_once_delivery", False),
            **args)
    return topic


# fixtures/gcs.tf: module "gcs"
gcs = gcs_module(
    project_id=project_id,
    prefix=prefix,
    name="my-bucket",
    location=region,
    iam={
        "roles/storage.admin": [f"serviceAccount:service-{project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"],
    })

# module "pubsub"
pubsub_module(
    project_id=project_id,
    name="my-topic",
    subscriptions={
        "test-cloudstorage": {
            "cloud_storage": {
                "bucket": gcs.name,
                "filename_prefix": prefix,
                "filename_suffix": "test_suffix",
                "max_duration": "100s",
                "max_bytes": 1000,
                "avro_config": {
                    "write_metadata": True,
                },
            },
        },
    })
