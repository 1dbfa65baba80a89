"""terraform-google-modules/terraform-google-pubsub, examples/bigquery/main.tf, in Python (module expanded)."""
import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")

test = gcp.bigquery.Dataset("test",
    project=project_id,
    dataset_id="example_dataset",
    location="europe-west1")

test_table = gcp.bigquery.Table("test",
    project=project_id,
    deletion_protection=False,
    table_id="example_table",
    dataset_id=test.dataset_id,
    schema="""[
  {
    "name": "data",
    "type": "STRING",
    "mode": "NULLABLE",
    "description": "The data"
  }
]
""")

# module "pubsub" inputs (depends_on = [google_bigquery_table.test])
topic = "cft-tf-pubsub-topic-bigquery"
topic_labels = {
    "foo_label": "foo_value",
    "bar_label": "bar_value",
}
bigquery_subscriptions = [
    {"name": "example_subscription", "table": f"{project_id}:example_dataset.example_table"},
]
module_opts = pulumi.ResourceOptions(depends_on=[test_table])

# module: data "google_project" "project", locals
project = gcp.organizations.get_project(project_id=project_id)
default_ack_deadline_seconds = 10
pubsub_svc_account_email = f"service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

# module: google_project_iam_member.bigquery_metadata_viewer_binding / bigquery_data_editor_binding
metadata_viewer = gcp.projects.IAMMember("bigquery_metadata_viewer_binding",
    project=project_id,
    role="roles/bigquery.metadataViewer",
    member=f"serviceAccount:{pubsub_svc_account_email}",
    opts=module_opts)
data_editor = gcp.projects.IAMMember("bigquery_data_editor_binding",
    project=project_id,
    role="roles/bigquery.dataEditor",
    member=f"serviceAccount:{pubsub_svc_account_email}",
    opts=module_opts)

# module: google_pubsub_topic.topic
topic_resource = gcp.pubsub.Topic("topic",
    project=project_id,
    name=topic,
    labels=topic_labels,
    opts=module_opts)

# module: google_pubsub_subscription.bigquery_subscriptions
subscriptions = []
for sub in bigquery_subscriptions:
    subscriptions.append(gcp.pubsub.Subscription(f"bigquery_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic_resource.name,
        project=project_id,
        labels={},
        ack_deadline_seconds=default_ack_deadline_seconds,
        bigquery_config={
            "table": sub["table"],
            "use_topic_schema": False,
            "use_table_schema": False,
            "write_metadata": False,
            "drop_unknown_fields": False,
        },
        opts=pulumi.ResourceOptions(depends_on=[topic_resource, metadata_viewer, data_editor, test_table])))

# module: google_project_iam_member.token_creator_binding (grant_token_creator defaults to true)
gcp.projects.IAMMember("token_creator_binding",
    project=project_id,
    role="roles/iam.serviceAccountTokenCreator",
    member=f"serviceAccount:{pubsub_svc_account_email}",
    opts=module_opts)
