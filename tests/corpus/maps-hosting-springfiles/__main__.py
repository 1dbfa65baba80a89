# Written here after the shape of beyond-all-reason/maps-hosting infra/index.ts
"""A cacher on Cloud Run takes two kinds of work by authenticated push: cache requests published by an
edge worker's account, and upload notifications of a bucket. Topic IAM is authoritative, each policy
document built by an invoke. The edge provider's resources live outside GCP; plain strings stand in
for their outputs here."""
import pulumi
import pulumi_gcp as gcp

cfg = pulumi.Config()
region = cfg.require("region")
project_id = gcp.organizations.get_project_output().project_id

# stand-ins for outputs of the edge provider (a key-value namespace, its API token, three object stores)
EDGE_KV = "edge-kv-namespace-stand-in"
edge_token = pulumi.Output.secret("edge-api-token-stand-in")
edge_stores = [f"edge-store-{area}-stand-in" for area in ("weur", "wnam", "apac")]

apis = {short: gcp.projects.Service(f"api-{short}", service=f"{short}.googleapis.com")
        for short in ("secretmanager", "artifactregistry", "run")}


def service_account(account_id: str, **names) -> gcp.serviceaccount.Account:
    return gcp.serviceaccount.Account(account_id, account_id=account_id, **names)


def sa_member(account: gcp.serviceaccount.Account) -> pulumi.Output:
    return pulumi.Output.concat("serviceAccount:", account.email)


runner = service_account("cacher", display_name="cacher")
pusher = service_account("cacher-invoker", display_name="cacher-invoker")
edge_worker = service_account("fetcher-worker", display_name="Fetcher Worker",
                              description="account of the edge worker that requests caching")


def private_bucket(label: str, suffix: str, **extra) -> gcp.storage.Bucket:
    return gcp.storage.Bucket(label, name=project_id.apply(lambda p: p + suffix), location=region,
                              uniform_bucket_level_access=True, public_access_prevention="enforced", **extra)


uploads = private_bucket("uploads", "_assets-upload",
                         lifecycle_rules=[{"action": {"type": "Delete"},
                                           "condition": {"age": 1, "with_state": "ANY"}}])
gcp.storage.BucketIAMMember("uploads-writers", bucket=uploads.id, role="roles/storage.objectCreator",
                            member="group:beyondallreasondev@googlegroups.com")
gcp.storage.BucketIAMMember("uploads-runner-reads", bucket=uploads.id, role="roles/storage.objectViewer",
                            member=sa_member(runner))

scripts = private_bucket("scripts", "_worker-scripts")
SCRIPT = "fetcher.js"
pulumi.export("workerScriptUploadTarget", scripts.url.apply(lambda u: f"{u}/{SCRIPT}"))

images = gcp.artifactregistry.Repository("images", repository_id="main", format="docker", location=region,
                                         opts=pulumi.ResourceOptions(depends_on=[apis["artifactregistry"]]))
image = pulumi.Output.format("{0}-docker.pkg.dev/{1}/{2}/cacher:latest", images.location, images.project,
                             images.repository_id)


def runner_secret(secret_id: str, value) -> tuple:
    """A regional secret, one version holding the value, and read access for the runner."""
    secret = gcp.secretmanager.Secret(secret_id, secret_id=secret_id,
                                      replication={"user_managed": {"replicas": [{"location": region}]}},
                                      opts=pulumi.ResourceOptions(depends_on=[apis["secretmanager"]]))
    version = gcp.secretmanager.SecretVersion(f"{secret_id}-v", secret=secret.id, secret_data=value)
    access = gcp.secretmanager.SecretIamMember(f"{secret_id}-runner", secret_id=secret.secret_id,
                                               role="roles/secretmanager.secretAccessor", member=sa_member(runner))
    return secret, version, access


kv_secret, kv_version, kv_access = runner_secret("cloudflare-kv-api-token", edge_token)
store_secret, store_version, store_access = runner_secret("cloudflare-r2-access-key-secret",
                                                          cfg.require("objectStoreKeySecret"))  # secure in the stack


def env(name: str, value=None, secret=None, version=None) -> dict:
    if secret is None:
        return {"name": name, "value": value}
    return {"name": name, "value_from": {"secret_key_ref": {"name": secret.secret_id, "key": version.version}}}


cacher = gcp.cloudrun.Service(
    "cacher-run",
    name="cacher",
    location=region,
    autogenerate_revision_name=True,
    traffics=[{"percent": 100, "latest_revision": True}],
    template={
        "metadata": {
            "annotations": {"run.googleapis.com/execution-environment": "gen2",
                            "autoscaling.knative.dev/maxScale": "100"},
            "labels": {"run.googleapis.com/startupProbeType": "Default"},
        },
        "spec": {
            "service_account_name": runner.email,
            "timeout_seconds": 600,
            "container_concurrency": 2,
            "containers": [{
                "image": image,
                "ports": [{"name": "http1", "container_port": 8080}],
                "resources": {"limits": {"memory": "1Gi", "cpu": "1000m"}},
                "envs": [
                    env("CF_ACCOUNT_ID", cfg.require("edgeAccount")),
                    env("CF_KV_API_TOKEN", secret=kv_secret, version=kv_version),
                    env("CF_KV_NAMESPACE_ID", EDGE_KV),
                    env("CF_R2_ACCESS_KEY_ID", cfg.require("objectStoreKeyId")),
                    env("CF_R2_ACCESS_KEY_SECRET", secret=store_secret, version=store_version),
                    env("CF_R2_BUCKETS", ",".join(edge_stores)),
                ],
            }],
        },
    },
    opts=pulumi.ResourceOptions(depends_on=[kv_access, store_access, apis["run"]]),
)
gcp.cloudrun.IamMember("cacher-run-invoker", location=region, service=cacher.name, role="roles/run.invoker",
                       member=sa_member(pusher))


def pushed_queue(name: str, sub_name: str, route: str, publisher: pulumi.Output):
    """A topic that only `publisher` may publish to, pushed to the cacher at `route`."""
    topic = gcp.pubsub.Topic(f"{name}-topic", name=name)
    document = gcp.organizations.get_iam_policy_output(
        bindings=[{"role": "roles/pubsub.publisher", "members": [publisher]}])
    policy = gcp.pubsub.TopicIAMPolicy(f"{name}-only-publisher", topic=topic.id,
                                       policy_data=document.apply(lambda d: d.policy_data))
    gcp.pubsub.Subscription(
        f"{name}-push",
        name=sub_name,
        topic=topic.id,
        ack_deadline_seconds=600,
        message_retention_duration="7200s",
        expiration_policy={"ttl": ""},  # never expires
        retry_policy={"minimum_backoff": "10s", "maximum_backoff": "600s"},
        push_config={
            "push_endpoint": cacher.statuses.apply(lambda s: s[0].url + route),
            "oidc_token": {"service_account_email": pusher.email},
        },
    )
    return topic, policy


pushed_queue("cache-requests", "cacher-sub", "/cache", sa_member(edge_worker))
storage_agent = gcp.storage.get_project_service_account_output()
upload_topic, upload_policy = pushed_queue("upload-requests", "upload-requests-sub", "/upload",
                                           storage_agent.email_address.apply(lambda e: "serviceAccount:" + e))
gcp.storage.Notification("uploads-finalized", bucket=uploads.name, topic=upload_topic.id,
                         payload_format="JSON_API_V1", event_types=["OBJECT_FINALIZE"],
                         opts=pulumi.ResourceOptions(depends_on=[upload_policy, uploads]))

edge_key = gcp.serviceaccount.Key("fetcher-worker-key", service_account_id=edge_worker.name)
# read only after the bucket exists: the bucket's id gates the name through an apply
script_text = gcp.storage.get_bucket_object_content_output(bucket=scripts.id.apply(lambda _: scripts.name),
                                                           name=SCRIPT)
