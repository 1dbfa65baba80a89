# Written here after the shape of bigsandia/gcp-data-platform infra/terraform/module/ (pubsub.tf, iam.tf, notification.tf, run.tf)
"""Objects landing in raw buckets notify a topic; a push subscription hands each notice to a Cloud Run
loader and sends failures to a dead-letter topic."""
import pulumi
import pulumi_gcp as gcp

cfg = pulumi.Config()
project = cfg.require("project_id")
run_region = cfg.require("cloud_run_region")
image_tag = cfg.get("data_loader_image_version") or "latest"
data_location = cfg.get("location") or "US"
watched_buckets: list = cfg.require_object("raw_data_buckets")

number = gcp.organizations.get_project(project_id=project).number


def enable(api: str) -> gcp.projects.Service:
    return gcp.projects.Service(f"{api}-api", project=project, service=f"{api}.googleapis.com")


pubsub_api, _, run_api = enable("pubsub"), enable("bigquery"), enable("run")
needs_pubsub = pulumi.ResourceOptions(depends_on=[pubsub_api])


def bind(label: str, role: str, member, opts=None) -> gcp.projects.IAMBinding:
    """Authoritative project-level binding with a single member."""
    return gcp.projects.IAMBinding(label, project=project, role=role, members=[member], opts=opts)


loader_sa = gcp.serviceaccount.Account("loader-sa", project=project, account_id="data-loader",
                                       description="runs the loader")
caller_sa = gcp.serviceaccount.Account("caller-sa", project=project, account_id="data-loader-invoker",
                                       description="calls the loader on behalf of Pub/Sub push")
loader_as, caller_as = (sa.email.apply("serviceAccount:{}".format) for sa in (loader_sa, caller_sa))

config_bucket = gcp.storage.Bucket("loader-config", project=project, name=f"{project}-data-loader-config",
                                   location=data_location)

loader = gcp.cloudrun.Service(
    "loader",
    project=project,
    name="data-loader",
    location=run_region,
    autogenerate_revision_name=True,
    traffics=[gcp.cloudrun.ServiceTrafficArgs(percent=100, latest_revision=True)],
    template=gcp.cloudrun.ServiceTemplateArgs(
        metadata=gcp.cloudrun.ServiceTemplateMetadataArgs(annotations={"autoscaling.knative.dev/maxScale": "1"}),
        spec=gcp.cloudrun.ServiceTemplateSpecArgs(
            service_account_name=loader_sa.email,
            container_concurrency=1,
            containers=[gcp.cloudrun.ServiceTemplateSpecContainerArgs(
                image=f"eu.gcr.io/another-data-platform/run/data-loader:{image_tag}",
                envs=[gcp.cloudrun.ServiceTemplateSpecContainerEnvArgs(name="CONFIG_BUCKET_NAME",
                                                                       value=config_bucket.name),
                      gcp.cloudrun.ServiceTemplateSpecContainerEnvArgs(name="DATA_LOCATION", value=data_location)],
            )],
        ),
    ),
    opts=pulumi.ResourceOptions(depends_on=[run_api]),
)

notices = gcp.pubsub.Topic("bucket-notices", project=project, name="raw-data-buckets-notifications",
                           opts=needs_pubsub)
undeliverable = gcp.pubsub.Topic("undeliverable", project=project, name="data-loader-dead-letter-topic",
                                 opts=needs_pubsub)

gcp.pubsub.Subscription(
    "notices-to-loader",
    project=project,
    name="data-loader",
    topic=notices.name,  # bare name here, full id for the dead-letter topic below
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint=loader.statuses.apply(lambda found: found[0].url),
        oidc_token=gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(service_account_email=caller_sa.email),
    ),
    dead_letter_policy=gcp.pubsub.SubscriptionDeadLetterPolicyArgs(dead_letter_topic=undeliverable.id,
                                                                   max_delivery_attempts=5),
    opts=needs_pubsub,
)

# the Pub/Sub agent only ever gets token creation, at project level
bind("agent-token-creator", "roles/iam.serviceAccountTokenCreator",
     f"serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com")
bind("loader-bq-jobs", "roles/bigquery.jobUser", loader_as)
bind("loader-reads-objects", "roles/storage.objectViewer", loader_as)
bind("caller-invokes-project", "roles/run.invoker", caller_as, pulumi.ResourceOptions(depends_on=[loader]))
gcp.cloudrun.IamBinding("caller-invokes-loader", project=project, location=run_region, service=loader.name,
                        role="roles/run.invoker", members=[caller_as])

# Cloud Storage's own agent publishes the notices
storage_may_publish = gcp.pubsub.TopicIAMBinding(
    "storage-publishes-notices", project=project, topic=notices.name, role="roles/pubsub.publisher",
    members=[f"serviceAccount:service-{number}@gs-project-accounts.iam.gserviceaccount.com"])

for bucket in watched_buckets:
    gcp.storage.Notification(f"notify-{bucket}", bucket=bucket, topic=notices.id, payload_format="JSON_API_V1",
                             event_types=["OBJECT_FINALIZE"],
                             opts=pulumi.ResourceOptions(depends_on=[storage_may_publish]))
