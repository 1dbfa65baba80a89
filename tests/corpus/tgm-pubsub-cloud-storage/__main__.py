# Written here after the shape of terraform-google-modules/terraform-google-pubsub examples/cloud_storage/main.tf
"""A topic exported to a Cloud Storage bucket by one subscription; the Pub/Sub agent may write the bucket."""
import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")
number = gcp.organizations.get_project(project_id=project_id).number


def agent_role(label: str, role: str) -> gcp.projects.IAMMember:
    return gcp.projects.IAMMember(label, project=project_id, role=role,
                                  member=f"serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com")


# a fixed suffix stands in for the random one a real deployment would draw
archive = gcp.storage.Bucket("archive", project=project_id, name="test_bucket-" + "0a1b2c3d",
                             location="europe-west1", uniform_bucket_level_access=True)
can_write = agent_role("agent-storage-admin", "roles/storage.admin")

feed = gcp.pubsub.Topic("feed", project=project_id, name="cft-tf-pubsub-topic-cloud-storage",
                        labels={"foo_label": "foo_value"})

gcp.pubsub.Subscription(
    "feed-to-archive",
    project=project_id,
    name="example_bucket_subscription",
    topic=feed.name,
    labels={},
    ack_deadline_seconds=300,
    cloud_storage_config=gcp.pubsub.SubscriptionCloudStorageConfigArgs(
        bucket=archive.name,
        filename_prefix="example_prefix_",
        filename_suffix="_example_suffix",
        filename_datetime_format="YYYY-MM-DD/hh_mm_ssZ",
    ),
    opts=pulumi.ResourceOptions(depends_on=[feed, can_write]),
)

agent_role("agent-token-creator", "roles/iam.serviceAccountTokenCreator")
