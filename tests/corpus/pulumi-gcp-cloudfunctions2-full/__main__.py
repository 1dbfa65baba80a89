import pulumi
import pulumi_gcp as gcp

project = "my-project-name"
account = gcp.serviceaccount.Account("account",
    account_id="gcf-sa",
    display_name="Test Service Account")
topic = gcp.pubsub.Topic("topic", name="functions2-topic")
bucket = gcp.storage.Bucket("bucket",
    name=f"gcf-source-{project}",
    location="US",
    uniform_bucket_level_access=True)
object = gcp.storage.BucketObject("object",
    name="function-source.zip",
    bucket=bucket.name,
    source=pulumi.FileAsset("function-source.zip"))
function = gcp.cloudfunctionsv2.Function("function",
    name="gcf-function",
    location="us-central1",
    description="a new function",
    build_config={
        "runtime": "nodejs20",
        "entry_point": "helloPubSub",
        "environment_variables": {
            "BUILD_CONFIG_TEST": "build_test",
        },
        "source": {
            "storage_source": {
                "bucket": bucket.name,
                "object": object.name,
            },
        },
    },
    service_config={
        "max_instance_count": 3,
        "min_instance_count": 1,
        "available_memory": "4Gi",
        "timeout_seconds": 60,
        "max_instance_request_concurrency": 80,
        "available_cpu": "4",
        "environment_variables": {
            "SERVICE_CONFIG_TEST": "config_test",
            "SERVICE_CONFIG_DIFF_TEST": account.email,
        },
        "ingress_settings": "ALLOW_INTERNAL_ONLY",
        "all_traffic_on_latest_revision": True,
        "service_account_email": account.email,
    },
    event_trigger={
        "trigger_region": "us-central1",
        "event_type": "google.cloud.pubsub.topic.v1.messagePublished",
        "pubsub_topic": topic.id,
        "retry_policy": "RETRY_POLICY_RETRY",
    })
