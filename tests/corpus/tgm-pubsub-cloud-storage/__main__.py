"""terraform-google-modules/terraform-google-pubsub, examples/cloud_storage/main.tf, in Python (module expanded).

The example's random_id.bucket_suffix (hashicorp/random provider) is dropped: the bucket name takes a
fixed 8-hex-digit suffix in its place.
"""
import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")

bucket_suffix_hex = "0a1b2c3d"  # stands for random_id.bucket_suffix.hex (byte_length = 4)

test = gcp.storage.Bucket("test",
    project=project_id,
    name="-".join(["test_bucket", bucket_suffix_hex]),
    location="europe-west1",
    uniform_bucket_level_access=True)

# module "pubsub" inputs
topic = "cft-tf-pubsub-topic-cloud-storage"
topic_labels = {
    "foo_label": "foo_value",
}
cloud_storage_subscriptions = [
    {
        "name": "example_bucket_subscription",
        "bucket": test.name,
        "filename_prefix": "example_prefix_",
        "filename_suffix": "_example_suffix",
        "filename_datetime_format": "YYYY-MM-DD/hh_mm_ssZ",
        "ack_deadline_seconds": 300,
    },
]

# module: data "google_project" "project", locals
project = gcp.organizations.get_project(project_id=project_id)
pubsub_svc_account_email = f"service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

# module: google_project_iam_member.storage_admin_binding
storage_admin = gcp.projects.IAMMember("storage_admin_binding",
    project=project_id,
    role="roles/storage.admin",
    member=f"serviceAccount:{pubsub_svc_account_email}")

# module: google_pubsub_topic.topic
topic_resource = gcp.pubsub.Topic("topic",
    project=project_id,
    name=topic,
    labels=topic_labels)

# module: google_pubsub_subscription.cloud_storage_subscriptions
for sub in cloud_storage_subscriptions:
    gcp.pubsub.Subscription(f"cloud_storage_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic_resource.name,
        project=project_id,
        labels={},
        ack_deadline_seconds=sub["ack_deadline_seconds"],
        cloud_storage_config={
            "bucket": sub["bucket"],
            "filename_prefix": sub.get("filename_prefix"),
            "filename_suffix": sub.get("filename_suffix"),
            "filename_datetime_format": sub.get("filename_datetime_format"),
        },
        opts=pulumi.ResourceOptions(depends_on=[topic_resource, storage_admin]))

# module: google_project_iam_member.token_creator_binding (grant_token_creator defaults to true)
gcp.projects.IAMMember("token_creator_binding",
    project=project_id,
    role="roles/iam.serviceAccountTokenCreator",
    member=f"serviceAccount:{pubsub_svc_account_email}")
