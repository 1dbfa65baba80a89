# Written here after the shape of himewel/trip-analysis gcp/ (landing.tf, deadletter.tf, bigquery.tf, functions.tf)
"""Trips arrive on a schema-checked topic and are written to BigQuery by a subscription whose failures
go to a dead-letter topic; two HTTP functions publish and query."""
import json
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

project = pulumi.Config().get("project") or "trip-analysis-18022023"
TRIP_FIELDS = ["region", "origin_coord", "destination_coord", "datetime", "datasource"]

# --- BigQuery: the landing table (columns from a file next to the program) and a view over it
trips = gcp.bigquery.Dataset("trips-dataset", dataset_id="jobsity_trips")
columns = Path("table_columns.json").read_text()  # the language host runs in the program's folder
landing_table = gcp.bigquery.Table("landing-table", dataset_id=trips.dataset_id, table_id="landing_trips",
                                   deletion_protection=False, labels={}, schema=columns)


def geo_view_sql(dataset: str, table: str) -> str:
    picked = ", ".join(f"ST_GEOGFROMTEXT({c}) AS {c}" if c.endswith("_coord") else c for c in TRIP_FIELDS)
    return f"SELECT {picked} FROM {dataset}.{table}"


geo_view = gcp.bigquery.Table(
    "geo-view", dataset_id=trips.dataset_id, table_id="refined_trips", deletion_protection=False,
    materialized_view={"query": pulumi.Output.all(landing_table.dataset_id, landing_table.table_id)
                       .apply(lambda ids: geo_view_sql(*ids))},
    opts=pulumi.ResourceOptions(depends_on=[landing_table]))

# --- dead letters: a topic the Pub/Sub agent may publish to, read by a plain pull subscription
dead_letters = gcp.pubsub.Topic("dead-letters", name="dead-letter-topic")
pubsub_agent = gcp.projects.ServiceIdentity("pubsub-agent", project=project, service="pubsub.googleapis.com")
gcp.pubsub.TopicIAMMember("agent-publishes-dead-letters", topic=dead_letters.id, role="roles/pubsub.publisher",
                          member=pubsub_agent.email.apply(lambda e: f"serviceAccount:{e}"))
gcp.pubsub.Subscription("dead-letter-reader", name="default-subscription", topic=dead_letters.name)

# --- landing: Avro-checked topic, exported to the table
avro = {"type": "record", "name": "Avro", "fields": [{"name": f, "type": "string"} for f in TRIP_FIELDS]}
trip_schema = gcp.pubsub.Schema("trip-schema", name="landing-schema", type="AVRO", definition=json.dumps(avro))
landing = gcp.pubsub.Topic("landing", name="landing-17022023",
                           schema_settings={"schema": trip_schema.id, "encoding": "JSON"})

here = gcp.organizations.get_project()
agent_member = f"serviceAccount:service-{here.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
bq_roles = [gcp.projects.IAMMember(f"agent-{role.rsplit('.', 1)[1]}", project=here.project_id, role=role,
                                   member=agent_member)
            for role in ("roles/bigquery.metadataViewer", "roles/bigquery.dataEditor")]

gcp.pubsub.Subscription(
    "landing-to-bigquery",
    name="landing-17022023-sub",
    topic=landing.name,
    bigquery_config={
        "table": pulumi.Output.format("{}:{}.{}", landing_table.project, landing_table.dataset_id,
                                      landing_table.table_id),
        "use_topic_schema": True,
        "write_metadata": True,
    },
    dead_letter_policy={"dead_letter_topic": dead_letters.id, "max_delivery_attempts": 5},
    opts=pulumi.ResourceOptions(depends_on=bq_roles),
)

# --- two HTTP functions; their zips are built elsewhere and read only when deploying
code_bucket = gcp.storage.Bucket("function-code", name="5eed1e55-gcf-source", location="US",
                                 uniform_bucket_level_access=True)


def http_function(name: str, entry: str, zip_name: str, about: str, env: dict) -> gcp.cloudfunctions.Function:
    archive = gcp.storage.BucketObject(f"{name}-zip", bucket=code_bucket.name, name=zip_name,
                                       source=pulumi.FileAsset(f"../functions/{entry}/{zip_name}"))
    return gcp.cloudfunctions.Function(
        f"{name}-function", name=name, description=about, entry_point=entry, runtime="python310",
        available_memory_mb=128, timeout=60, trigger_http=True, https_trigger_security_level="SECURE_ALWAYS",
        source_archive_bucket=code_bucket.name, source_archive_object=archive.name,
        environment_variables={"PROJECT_ID": project, "TOPIC_NAME": landing.name, **env})


publish = http_function("new-trip", "new_trip", "new_trip.zip", "takes a trip as JSON and publishes it", {})
query = http_function("average", "average", "average.zip", "average trips by region or bounding box",
                      {"DATASET_ID": trips.dataset_id, "VIEW_ID": geo_view.table_id})

pulumi.export("landing_function_uri", publish.https_trigger_url)
pulumi.export("average_function_uri", query.https_trigger_url)
