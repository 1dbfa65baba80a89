import pulumi
import pulumi_gcp as gcp

default = gcp.cloudrun.Service("default",
    name="cloud_run_service_name",
    location="us-central1",
    template={
        "spec": {
            "containers": [{
                "image": "gcr.io/cloudrun/hello",
            }],
        },
    },
    traffics=[{
        "percent": 100,
        "latest_revision": True,
    }])
sa = gcp.serviceaccount.Account("sa",
    account_id="cloud-run-pubsub-invoker",
    display_name="Cloud Run Pub/Sub Invoker")
binding = gcp.cloudrun.IamBinding("binding",
    location=default.location,
    service=default.name,
    role="roles/run.invoker",
    members=[sa.email.apply(lambda email: f"serviceAccount:{email}")])
project = gcp.projects.IAMBinding("project",
    role="roles/iam.serviceAccountTokenCreator",
    members=[sa.email.apply(lambda email: f"serviceAccount:{email}")])
topic = gcp.pubsub.Topic("topic", name="pubsub_topic")
subscription = gcp.pubsub.Subscription("subscription",
    name="pubsub_subscription",
    topic=topic.name,
    push_config={
        "push_endpoint": default.statuses[0].url,
        "oidc_token": {
            "service_account_email": sa.email,
        },
        "attributes": {
            "x-goog-version": "v1",
        },
    })
