# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/cloudrun/service.py (the Cloud Run Service Pubsub docstring example)
import pulumi_gcp as gcp

receiver = gcp.cloudrun.Service(
    "orders-receiver",
    name="orders-receiver",
    location="us-central1",
    template={"spec": {"containers": [{"image": "us-docker.pkg.dev/psg-corpus-sandbox/apps/orders-receiver:1"}]}},
    traffics=[{"percent": 100, "latest_revision": True}],
)

pusher = gcp.serviceaccount.Account("orders-pusher", account_id="orders-pusher", display_name="Pushes orders")
as_member = pusher.email.apply(lambda email: f"serviceAccount:{email}")

gcp.cloudrun.IamBinding("orders-receiver-invoker", location=receiver.location, service=receiver.name,
                        role="roles/run.invoker", members=[as_member])
# projects.IAMBinding requires `project`. It is left out below, so the program stops there.
gcp.projects.IAMBinding("orders-pusher-tokens", role="roles/iam.serviceAccountTokenCreator", members=[as_member])

orders = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-push",
    name="orders-push",
    topic=orders.name,
    push_config={
        "push_endpoint": receiver.statuses[0].url,
        "oidc_token": {"service_account_email": pusher.email},
        "attributes": {"x-goog-version": "v1"},
    },
)
