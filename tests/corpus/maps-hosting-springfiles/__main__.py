"""beyond-all-reason/maps-hosting infra/index.ts (TypeScript), transliterated to Python.

Every GCP resource, value, reference and data-source call is kept. Resources of other providers
(cloudflare, random, docker) are dropped; where a GCP input used one of their outputs, the input gets a
placeholder string that says what it stood for (marked DROPPED below).
"""

import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
region = config.require("region")

# DROPPED: cloudflare.WorkersKvNamespace("fetcher-assets-kv"), the "-preview" one on stack dev,
# cloudflare.getApiTokenPermissionGroups(), cloudflare.ApiToken("fetcher-assets-kv-api-token"),
# random.RandomInteger("fetcher-assets-bucket-suffix"), cloudflare.R2Bucket x3 (weur, wnam, apac).
fetcher_assets_kv_id = "DROPPED:cloudflare.WorkersKvNamespace.id"
fetcher_assets_kv_api_token_value = pulumi.Output.secret("DROPPED:cloudflare.ApiToken.value")
fetcher_assets_bucket_names = [f"DROPPED:cloudflare.R2Bucket.name({r})" for r in ["weur", "wnam", "apac"]]

gcp_service_secret_manager = gcp.projects.Service("gcp-service-secretmanager",
    service="secretmanager.googleapis.com")

gcp_service_artifact_registry = gcp.projects.Service("gcp-service-artifactregistry",
    service="artifactregistry.googleapis.com")

gcp_service_run = gcp.projects.Service("gcp-service-run",
    service="run.googleapis.com")

cacher = gcp.serviceaccount.Account("cacher",
    account_id="cacher",
    display_name="cacher")

cacher_invoker = gcp.serviceaccount.Account("cacher-invoker",
    account_id="cacher-invoker",
    display_name="cacher-invoker")

fetcher_worker = gcp.serviceaccount.Account("fetcher-worker",
    account_id="fetcher-worker",
    description="CloudFlare fetcher worker script",
    display_name="Fetcher Worker")

upload_bucket = gcp.storage.Bucket("upload-bucket",
    lifecycle_rules=[{
        "action": {
            "type": "Delete",
        },
        "condition": {
            "age": 1,
            "with_state": "ANY",
        },
    }],
    location=region,
    name=pulumi.Output.concat(gcp.organizations.get_project_output().project_id, "_assets-upload"),
    public_access_prevention="enforced",
    uniform_bucket_level_access=True)

upload_bucket_contributors_access = gcp.storage.BucketIAMMember("upload-bucket-contributors-access",
    bucket=upload_bucket.id,
    role="roles/storage.objectCreator",
    member="group:beyondallreasondev@googlegroups.com")

upload_bucket_cacher_access = gcp.storage.BucketIAMMember("upload-bucket-cacher-access",
    bucket=upload_bucket.id,
    role="roles/storage.objectViewer",
    member=pulumi.Output.concat("serviceAccount:", cacher.email))

worker_scripts_bucket = gcp.storage.Bucket("worker-scripts-bucket",
    location=region,
    name=pulumi.Output.concat(gcp.organizations.get_project_output().project_id, "_worker-scripts"),
    public_access_prevention="enforced",
    uniform_bucket_level_access=True)

worker_script_bucket_file = "fetcher.js"

pulumi.export("workerScriptUploadTarget", pulumi.Output.concat(worker_scripts_bucket.url, "/", worker_script_bucket_file))

main_images_repo = gcp.artifactregistry.Repository("main-images-repo",
    format="docker",
    location=region,
    repository_id="main",
    opts=pulumi.ResourceOptions(depends_on=[gcp_service_artifact_registry]))

main_repo_registry_address = pulumi.Output.concat(main_images_repo.location, "-docker.pkg.dev")

# DROPPED: docker.Provider("docker") and docker.getRegistryImageOutput(...): the image is the name the
# program asked the registry for (the digest came from the registry).
cacher_image = pulumi.Output.concat(main_repo_registry_address, "/", main_images_repo.project, "/",
                                    main_images_repo.repository_id, "/cacher:latest")

cf_kv_api_token_secret = gcp.secretmanager.Secret("cloudflare-kv-api-token-secret",
    replication={
        "user_managed": {
            "replicas": [{
                "location": region,
            }],
        },
    },
    secret_id="cloudflare-kv-api-token",
    opts=pulumi.ResourceOptions(depends_on=[gcp_service_secret_manager]))

cacher_cf_kv_api_token_secret_access = gcp.secretmanager.SecretIamMember("cloudflare-kv-api-token-secret-cacher-access",
    secret_id=cf_kv_api_token_secret.secret_id,
    role="roles/secretmanager.secretAccessor",
    member=pulumi.Output.concat("serviceAccount:", cacher.email))

cf_kv_api_token_secret_version = gcp.secretmanager.SecretVersion("cloudflare-kv-api-token-secret-version",
    secret=cf_kv_api_token_secret.id,
    secret_data=fetcher_assets_kv_api_token_value)

cf_r2_access_key_secret = gcp.secretmanager.Secret("cloudflare-r2-access-key-secret",
    replication={
        "user_managed": {
            "replicas": [{
                "location": region,
            }],
        },
    },
    secret_id="cloudflare-r2-access-key-secret",
    opts=pulumi.ResourceOptions(depends_on=[gcp_service_secret_manager]))

cacher_r2_access_key_access = gcp.secretmanager.SecretIamMember("cloudflare-r2-access-key-secret-cacher-access",
    secret_id=cf_r2_access_key_secret.secret_id,
    role="roles/secretmanager.secretAccessor",
    member=pulumi.Output.concat("serviceAccount:", cacher.email))

cf_r2_access_key_secret_version = gcp.secretmanager.SecretVersion("cloudflare-r2-access-key-secret-version",
    secret=cf_r2_access_key_secret.id,
    secret_data=config.require("cfR2AccessKeySecret"))

cacher_service = gcp.cloudrun.Service("cacher-service",
    name="cacher",
    location=region,
    autogenerate_revision_name=True,
    template={
        "metadata": {
            "annotations": {
                "autoscaling.knative.dev/maxScale": "100",
                "run.googleapis.com/execution-environment": "gen2",
            },
            "labels": {
                "run.googleapis.com/startupProbeType": "Default",
            },
        },
        "spec": {
            "container_concurrency": 2,
            "containers": [{
                "envs": [{
                    "name": "CF_ACCOUNT_ID",
                    "value": config.require("cloudflareAccountId"),
                }, {
                    "name": "CF_KV_API_TOKEN",
                    "value_from": {
                        "secret_key_ref": {
                            "key": cf_kv_api_token_secret_version.version,
                            "name": cf_kv_api_token_secret.secret_id,
                        },
                    },
                }, {
                    "name": "CF_KV_NAMESPACE_ID",
                    "value": fetcher_assets_kv_id,
                }, {
                    "name": "CF_R2_ACCESS_KEY_ID",
                    "value": config.require("cfR2AccessKeyId"),
                }, {
                    "name": "CF_R2_ACCESS_KEY_SECRET",
                    "value_from": {
                        "secret_key_ref": {
                            "key": cf_r2_access_key_secret_version.version,
                            "name": cf_r2_access_key_secret.secret_id,
                        },
                    },
                }, {
                    "name": "CF_R2_BUCKETS",
                    "value": pulumi.Output.all(*fetcher_assets_bucket_names).apply(lambda names: ",".join(names)),
                }],
                "image": cacher_image,
                "ports": [{
                    "container_port": 8080,
                    "name": "http1",
                }],
                "resources": {
                    "limits": {
                        "cpu": "1000m",
                        "memory": "1Gi",
                    },
                },
            }],
            "service_account_name": cacher.email,
            "timeout_seconds": 600,
        },
    },
    traffics=[{
        "latest_revision": True,
        "percent": 100,
    }],
    opts=pulumi.ResourceOptions(depends_on=[cacher_cf_kv_api_token_secret_access, cacher_r2_access_key_access, gcp_service_run]))

cacher_service_invoker = gcp.cloudrun.IamMember("cacher-service-invoker-access",
    location=region,
    service=cacher_service.name,
    role="roles/run.invoker",
    member=pulumi.Output.concat("serviceAccount:", cacher_invoker.email))

cache_requests = gcp.pubsub.Topic("cache-requests",
    name="cache-requests")

cache_requests_policy = gcp.pubsub.TopicIAMPolicy("cache-requests-policy",
    policy_data=gcp.organizations.get_iam_policy_output(bindings=[{
        "role": "roles/pubsub.publisher",
        "members": [pulumi.Output.concat("serviceAccount:", fetcher_worker.email)],
    }]).apply(lambda p: p.policy_data),
    topic=cache_requests.id)

cacher_sub = gcp.pubsub.Subscription("cacher-sub",
    ack_deadline_seconds=600,
    expiration_policy={
        "ttl": "",
    },
    message_retention_duration="7200s",
    name="cacher-sub",
    push_config={
        "oidc_token": {
            "service_account_email": cacher_invoker.email,
        },
        "push_endpoint": pulumi.Output.concat(cacher_service.statuses[0].url, "/cache"),
    },
    retry_policy={
        "maximum_backoff": "600s",
        "minimum_backoff": "10s",
    },
    topic=cache_requests.id)

upload_requests = gcp.pubsub.Topic("upload-requests",
    name="upload-requests")

gcs_account = gcp.storage.get_project_service_account_output()

upload_requests_policy = gcp.pubsub.TopicIAMPolicy("upload-requests-policy",
    policy_data=gcp.organizations.get_iam_policy_output(bindings=[{
        "role": "roles/pubsub.publisher",
        "members": [pulumi.Output.concat("serviceAccount:", gcs_account.email_address)],
    }]).apply(lambda p: p.policy_data),
    topic=upload_requests.id)

upload_requests_sub = gcp.pubsub.Subscription("upload-requests-sub",
    ack_deadline_seconds=600,
    expiration_policy={
        "ttl": "",
    },
    message_retention_duration="7200s",
    name="upload-requests-sub",
    push_config={
        "oidc_token": {
            "service_account_email": cacher_invoker.email,
        },
        "push_endpoint": pulumi.Output.concat(cacher_service.statuses[0].url, "/upload"),
    },
    retry_policy={
        "maximum_backoff": "600s",
        "minimum_backoff": "10s",
    },
    topic=upload_requests.id)

upload_bucket_notification = gcp.storage.Notification("upload-bucket-notification",
    bucket=upload_bucket.name,
    event_types=["OBJECT_FINALIZE"],
    payload_format="JSON_API_V1",
    topic=upload_requests.id,
    opts=pulumi.ResourceOptions(depends_on=[upload_requests_policy, upload_bucket]))

fetcher_worker_key = gcp.serviceaccount.Key("mykey",
    service_account_id=fetcher_worker.name)

fetcher_script_content = gcp.storage.get_bucket_object_content_output(
    # This apply is purely to not fetch file before bucket exists.
    bucket=worker_scripts_bucket.id.apply(lambda _: worker_scripts_bucket.name),
    name=worker_script_bucket_file)

# DROPPED: cloudflare.WorkerScript("fetcher") (it read fetcher_script_content.content, cache_requests.id and
# fetcher_worker_key.private_key), cloudflare.Zone("fetcher-zone"), cloudflare.WorkerDomain("fetcher-domain").
