"""bigsandia/gcp-data-platform, infra/terraform/module/*.tf (the module's resources), in Python.
Variables are stack config with the module's defaults; each block names the .tf file it comes from."""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
project_id = config.require("project_id")
cloud_run_region = config.require("cloud_run_region")
data_loader_image_version = config.get("data_loader_image_version") or "latest"
raw_data_buckets = config.require_object("raw_data_buckets")
location = config.get("location") or "US"

# project.tf
current_project = gcp.organizations.get_project(project_id=project_id)

# services.tf
pubsub_service = gcp.projects.Service("pubsub", project=project_id, service="pubsub.googleapis.com")
bigquery_service = gcp.projects.Service("bigquery", project=project_id, service="bigquery.googleapis.com")
cloud_run_service = gcp.projects.Service("cloud_run", project=project_id, service="run.googleapis.com")

# service_account.tf
data_loader_sa = gcp.serviceaccount.Account("data_loader",
    project=project_id,
    account_id="data-loader",
    description="Service account for data-loader")
data_loader_invoker = gcp.serviceaccount.Account("data_loader_invoker",
    project=project_id,
    account_id="data-loader-invoker",
    description="Cloud Run Pub/Sub Invoker for data-loader")

# storage.tf
data_loader_configuration = gcp.storage.Bucket("data_loader_configuration",
    project=project_id,
    name=f"{project_id}-data-loader-config",
    location=location)

# run.tf
data_loader = gcp.cloudrun.Service("data_loader",
    project=project_id,
    name="data-loader",
    location=cloud_run_region,
    template={
        "metadata": {
            "annotations": {"autoscaling.knative.dev/maxScale": "1"},
        },
        "spec": {
            "containers": [{
                "image": f"eu.gcr.io/another-data-platform/run/data-loader:{data_loader_image_version}",
                "envs": [
                    {"name": "CONFIG_BUCKET_NAME", "value": data_loader_configuration.name},
                    {"name": "DATA_LOCATION", "value": location},
                ],
            }],
            "container_concurrency": 1,
            "service_account_name": data_loader_sa.email,
        },
    },
    traffics=[{"percent": 100, "latest_revision": True}],
    autogenerate_revision_name=True,
    opts=pulumi.ResourceOptions(depends_on=[cloud_run_service]))

# pubsub.tf
raw_data_buckets_notifications = gcp.pubsub.Topic("raw_data_buckets_notifications",
    project=project_id,
    name="raw-data-buckets-notifications",
    opts=pulumi.ResourceOptions(depends_on=[pubsub_service]))

data_loader_dead_letter = gcp.pubsub.Topic("data_loader_dead_letter",
    project=project_id,
    name="data-loader-dead-letter-topic",
    opts=pulumi.ResourceOptions(depends_on=[pubsub_service]))

data_loader_push = gcp.pubsub.Subscription("data_loader_push",
    project=project_id,
    name="data-loader",
    topic=raw_data_buckets_notifications.name,
    push_config={
        "push_endpoint": data_loader.statuses.apply(lambda statuses: statuses[0].url),
        "oidc_token": {"service_account_email": data_loader_invoker.email},
    },
    dead_letter_policy={
        "dead_letter_topic": data_loader_dead_letter.id,
        "max_delivery_attempts": 5,
    },
    opts=pulumi.ResourceOptions(depends_on=[pubsub_service]))

# iam.tf
gcp.projects.IAMBinding("pubsub_service_agent_token_creator",
    project=project_id,
    role="roles/iam.serviceAccountTokenCreator",
    members=[f"serviceAccount:service-{current_project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"])
gcp.projects.IAMBinding("data_loader_bigquery_job_user",
    project=project_id,
    role="roles/bigquery.jobUser",
    members=[data_loader_sa.email.apply(lambda email: f"serviceAccount:{email}")])
gcp.projects.IAMBinding("data_loader_storage_object_viewer",
    project=project_id,
    role="roles/storage.objectViewer",
    members=[data_loader_sa.email.apply(lambda email: f"serviceAccount:{email}")])
gcp.projects.IAMBinding("data_loader_invoker_run_invoker",
    project=project_id,
    role="roles/run.invoker",
    members=[data_loader_invoker.email.apply(lambda email: f"serviceAccount:{email}")],
    opts=pulumi.ResourceOptions(depends_on=[data_loader]))
gcp.cloudrun.IamBinding("data_loader_invoker_run_invoker",
    location=cloud_run_region,
    project=project_id,
    service=data_loader.name,
    role="roles/run.invoker",
    members=[data_loader_invoker.email.apply(lambda email: f"serviceAccount:{email}")])

# notification.tf
enable_notifications = gcp.pubsub.TopicIAMBinding("enable_notifications",
    project=project_id,
    topic=raw_data_buckets_notifications.name,
    role="roles/pubsub.publisher",
    members=[f"serviceAccount:service-{current_project.number}@gs-project-accounts.iam.gserviceaccount.com"])

for bucket in raw_data_buckets:
    gcp.storage.Notification(f"raw_data_buckets_notifications-{bucket}",
        bucket=bucket,
        payload_format="JSON_API_V1",
        topic=raw_data_buckets_notifications.id,
        event_types=["OBJECT_FINALIZE"],
        opts=pulumi.ResourceOptions(depends_on=[enable_notifications]))
