# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Push Bq Service Account docstring example)
import pulumi
import pulumi_gcp as gcp

clicks = gcp.pubsub.Topic("clicks", name="clicks")

writer = gcp.serviceaccount.Account("clicks-writer", account_id="clicks-writer", display_name="Writes clicks to BigQuery")
here = gcp.organizations.get_project()

# The writer needs to read table metadata and to insert rows.
grants = [
    gcp.projects.IAMMember(
        f"clicks-writer-{role.split('.')[-1]}",
        project=here.project_id,
        role=role,
        member=writer.email.apply(lambda email: "serviceAccount:" + email),
    )
    for role in ("roles/bigquery.metadataViewer", "roles/bigquery.dataEditor")
]

analytics = gcp.bigquery.Dataset("analytics", dataset_id="analytics")
raw_clicks = gcp.bigquery.Table(
    "raw-clicks",
    dataset_id=analytics.dataset_id,
    table_id="raw_clicks",
    deletion_protection=False,
    schema='[{"name": "data", "type": "STRING", "mode": "NULLABLE"}]',
)

# BigQuery wants the table as project.dataset.table, three outputs of the table joined in one apply.
table_path = pulumi.Output.all(raw_clicks.project, raw_clicks.dataset_id, raw_clicks.table_id).apply(".".join)

gcp.pubsub.Subscription(
    "clicks-to-bq",
    name="clicks-to-bq",
    topic=clicks.id,
    bigquery_config={"table": table_path, "service_account_email": writer.email},
    opts=pulumi.ResourceOptions(depends_on=[writer, *grants]),
)
