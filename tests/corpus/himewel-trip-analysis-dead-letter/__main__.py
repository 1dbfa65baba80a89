"""himewel/trip-analysis gcp/ (bootstrap.tf, variables.tf, landing.tf, deadletter.tf, bigquery.tf,
functions.tf) transliterated from Terraform to Pulumi Python."""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
# variables.tf (defaults); the provider's project/region/zone are gcp:project, gcp:region, gcp:zone
project = config.get("project") or "trip-analysis-18022023"

# bigquery.tf
jobsity_trips = gcp.bigquery.Dataset("jobsity_trips", dataset_id="jobsity_trips")

with open("schema.json") as schema_file:
    landing_schema = schema_file.read()

landing_trips = gcp.bigquery.Table("landing_trips",
    deletion_protection=False,
    table_id="landing_trips",
    dataset_id=jobsity_trips.dataset_id,
    labels={},
    schema=landing_schema)

refined_trips = gcp.bigquery.Table("refined_trips",
    deletion_protection=False,
    table_id="refined_trips",
    dataset_id=jobsity_trips.dataset_id,
    materialized_view={
        "query": pulumi.Output.concat("""SELECT
  region,
  ST_GEOGFROMTEXT(origin_coord) origin_coord,
  ST_GEOGFROMTEXT(destination_coord) destination_coord,
  datetime,
  datasource
FROM """, landing_trips.dataset_id, ".", landing_trips.table_id, "\n"),
    },
    opts=pulumi.ResourceOptions(depends_on=[landing_trips]))

# deadletter.tf
# Creates PubSub topic
deadletter = gcp.pubsub.Topic("deadletter", name="dead-letter-topic")

# Gives to PubSub service identity permission to publish in the topic
pubsub = gcp.projects.ServiceIdentity("pubsub",
    service="pubsub.googleapis.com",
    project=project)

dlq_publisher = gcp.pubsub.TopicIAMMember("dlq_publisher",
    topic=deadletter.id,
    member=pubsub.email.apply(lambda email: f"serviceAccount:{email}"),
    role="roles/pubsub.publisher")

# Create a default subscription
default = gcp.pubsub.Subscription("default",
    name="default-subscription",
    topic=deadletter.name)

# landing.tf
schema = gcp.pubsub.Schema("schema",
    name="landing-schema",
    type="AVRO",
    definition="""{
  "type": "record",
  "name": "Avro",
  "fields": [
    {
      "name": "region",
      "type": "string"
    },
    {
      "name": "origin_coord",
      "type": "string"
    },
    {
      "name": "destination_coord",
      "type": "string"
    },
    {
      "name": "datetime",
      "type": "string"
    },
    {
      "name": "datasource",
      "type": "string"
    }
  ]
}
""")

# Creates PubSub topic
landing = gcp.pubsub.Topic("landing",
    name="landing-17022023",
    schema_settings={
        "schema": schema.id,
        "encoding": "JSON",
    })

current = gcp.organizations.get_project()

viewer = gcp.projects.IAMMember("viewer",
    project=current.project_id,
    role="roles/bigquery.metadataViewer",
    member=f"serviceAccount:service-{current.number}@gcp-sa-pubsub.iam.gserviceaccount.com")

editor = gcp.projects.IAMMember("editor",
    project=current.project_id,
    role="roles/bigquery.dataEditor",
    member=f"serviceAccount:service-{current.number}@gcp-sa-pubsub.iam.gserviceaccount.com")

# Creates Push subscription calling BigQuery
subscription = gcp.pubsub.Subscription("subscription",
    name="landing-17022023-sub",
    topic=landing.name,
    bigquery_config={
        "table": pulumi.Output.concat(landing_trips.project, ":", landing_trips.dataset_id, ".",
                                      landing_trips.table_id),
        "use_topic_schema": True,
        "write_metadata": True,
    },
    dead_letter_policy={
        "max_delivery_attempts": 5,
        "dead_letter_topic": deadletter.id,
    },
    opts=pulumi.ResourceOptions(depends_on=[viewer, editor]))

# functions.tf
# random_id.bucket_prefix (random provider) dropped: its hex is a placeholder
bucket_prefix_hex = "DROPPED-random-id-hex"

bucket = gcp.storage.Bucket("bucket",
    name=f"{bucket_prefix_hex}-gcf-source".lower(),
    location="US",
    uniform_bucket_level_access=True)

landing_object = gcp.storage.BucketObject("landing_object",
    name="new_trip.zip",
    bucket=bucket.name,
    source=pulumi.FileAsset("../functions/new_trip/new_trip.zip"))

average_object = gcp.storage.BucketObject("average_object",
    name="average.zip",
    bucket=bucket.name,
    source=pulumi.FileAsset("../functions/average/average.zip"))

landing_function = gcp.cloudfunctions.Function("landing_function",
    name="new-trip",
    description="Function to receive a JSON file and ingest it into PubSub",
    runtime="python310",
    available_memory_mb=128,
    source_archive_bucket=bucket.name,
    source_archive_object=landing_object.name,
    trigger_http=True,
    https_trigger_security_level="SECURE_ALWAYS",
    timeout=60,
    entry_point="new_trip",
    environment_variables={
        "PROJECT_ID": project,
        "TOPIC_NAME": landing.name,
    })

average_function = gcp.cloudfunctions.Function("average_function",
    name="average",
    description="Function to receive a JSON file and returns average by bounding box or region",
    runtime="python310",
    available_memory_mb=128,
    source_archive_bucket=bucket.name,
    source_archive_object=average_object.name,
    trigger_http=True,
    https_trigger_security_level="SECURE_ALWAYS",
    timeout=60,
    entry_point="average",
    environment_variables={
        "PROJECT_ID": project,
        "TOPIC_NAME": landing.name,
        "DATASET_ID": jobsity_trips.dataset_id,
        "VIEW_ID": refined_trips.table_id,
    })

pulumi.export("landing_function_uri", landing_function.https_trigger_url)
pulumi.export("average_function_uri", average_function.https_trigger_url)
