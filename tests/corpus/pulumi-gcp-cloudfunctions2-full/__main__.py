# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/cloudfunctionsv2/function.py (the Cloudfunctions2 Full docstring example)
import pulumi
import pulumi_gcp as gcp

project = pulumi.Config("gcp").require("project")
REGION = "us-central1"

runner = gcp.serviceaccount.Account("resizer-runner", account_id="resizer-runner", display_name="Runs the resizer")
uploads = gcp.pubsub.Topic("uploads", name="uploads")

sources = gcp.storage.Bucket("sources", name=f"resizer-src-{project}", location="US", uniform_bucket_level_access=True)
# The archive is read only on deploy, so it need not exist here. The name shadows the builtin zip.
zip = gcp.storage.BucketObject("resizer-zip", name="resizer.zip", bucket=sources.name,
                               source=pulumi.FileAsset("resizer.zip"))

# Sizing and scaling of the service, kept apart from the wiring below.
SCALE = dict(min_instance_count=1, max_instance_count=3, max_instance_request_concurrency=80)
SIZE = dict(available_memory="4Gi", available_cpu="4", timeout_seconds=60)

# Eventarc makes the trigger's subscription at deploy: the program itself declares none.
gcp.cloudfunctionsv2.Function(
    "resizer",
    name="resizer",
    location=REGION,
    description="resizes uploaded images",
    build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
        runtime="nodejs20",
        entry_point="onUpload",
        environment_variables={"BUILD_STAGE": "ci"},
        source={"storage_source": {"bucket": sources.name, "object": zip.name}},
    ),
    service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
        **SCALE,
        **SIZE,
        ingress_settings="ALLOW_INTERNAL_ONLY",
        all_traffic_on_latest_revision=True,
        service_account_email=runner.email,
        # An output as an environment value, beside a literal one.
        environment_variables={"RUN_AS": runner.email, "TARGET_WIDTH": "1024"},
    ),
    event_trigger=gcp.cloudfunctionsv2.FunctionEventTriggerArgs(
        trigger_region=REGION,
        event_type="google.cloud.pubsub.topic.v1.messagePublished",
        pubsub_topic=uploads.id,
        retry_policy="RETRY_POLICY_RETRY",
    ),
)
