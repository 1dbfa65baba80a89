import pulumi
import pulumi_gcp as gcp

example = gcp.pubsub.Topic("example", name="example-topic")
bq_write_service_account = gcp.serviceaccount.Account("bq_write_service_account",
    account_id="example-bqw",
    display_name="BQ Write Service Account")
project = gcp.organizations.get_project()
bigquery_metadata_viewer = gcp.projects.IAMMember("bigquery_metadata_viewer",
    project=project.project_id,
    role="roles/bigquery.metadataViewer",
    member=bq_write_service_account.email.apply(lambda email: f"serviceAccount:{email}"))
bigquery_data_editor = gcp.projects.IAMMember("bigquery_data_editor",
    project=project.project_id,
    role="roles/bigquery.dataEditor",
    member=bq_write_service_account.email.apply(lambda email: f"serviceAccount:{email}"))
test = gcp.bigquery.Dataset("test", dataset_id="example_dataset")
test_table = gcp.bigquery.Table("test",
    deletion_protection=False,
    table_id="example_table",
    dataset_id=test.dataset_id,
    schema="""[
  {
    \"name\": \"data\",
    \"type\": \"STRING\",
    \"mode\": \"NULLABLE\",
    \"description\": \"The data\"
  }
]
""")
example_subscription = gcp.pubsub.Subscription("example",
    name="example-subscription",
    topic=example.id,
    bigquery_config={
        "table": pulumi.Output.all(
            project=test_table.project,
            dataset_id=test_table.dataset_id,
            table_id=test_table.table_id
).apply(lambda resolved_outputs: f"{resolved_outputs['project']}.{resolved_outputs['dataset_id']}.{resolved_outputs['table_id']}")
,
        "service_account_email": bq_write_service_account.email,
    },
    opts = pulumi.ResourceOptions(depends_on=[
            bq_write_service_account,
            bigquery_metadata_viewer,
            bigquery_data_editor,
        ]))
