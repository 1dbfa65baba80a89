# Written here after the shape of terraform-google-modules/terraform-google-pubsub examples/bigquery/main.tf
"""A topic written into a BigQuery table by one subscription; the Pub/Sub agent gets the BigQuery roles."""
import json

import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")
number = gcp.organizations.get_project(project_id=project_id).number
agent_email = f"service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com"

dataset = gcp.bigquery.Dataset("sink-dataset", project=project_id, dataset_id="example_dataset",
                               location="europe-west1")
table = gcp.bigquery.Table("sink-table", project=project_id, dataset_id=dataset.dataset_id,
                           table_id="example_table", deletion_protection=False,
                           schema=json.dumps([{"name": "data", "type": "STRING", "mode": "NULLABLE"}]))
after_table = pulumi.ResourceOptions(depends_on=[table])

grants = {
    role.split(".")[-1]: gcp.projects.IAMMember(f"agent-{role.split('.')[-1]}", project=project_id, role=role,
                                                member=f"serviceAccount:{agent_email}", opts=after_table)
    for role in ("roles/bigquery.metadataViewer", "roles/bigquery.dataEditor",
                 "roles/iam.serviceAccountTokenCreator")
}

rows = gcp.pubsub.Topic("rows", project=project_id, name="cft-tf-pubsub-topic-bigquery",
                        labels={"foo_label": "foo_value", "bar_label": "bar_value"}, opts=after_table)

gcp.pubsub.Subscription(
    "rows-to-table",
    project=project_id,
    name="example_subscription",
    topic=rows.name,
    labels={},
    ack_deadline_seconds=10,
    bigquery_config={
        "table": f"{project_id}:example_dataset.example_table",
        "use_topic_schema": False,
        "use_table_schema": False,
        "write_metadata": False,
        "drop_unknown_fields": False,
    },
    opts=pulumi.ResourceOptions(depends_on=[rows, grants["metadataViewer"], grants["dataEditor"], table]),
)
