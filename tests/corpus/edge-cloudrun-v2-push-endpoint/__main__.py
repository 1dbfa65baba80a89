"""Written here: push delivery to a Cloud Run service, the endpoint built from the service's URL as Cloud Run's Pub/Sub
tutorial does. The URL is unknown until deploy, but Cloud Run service URLs are HTTPS by the provider's
contract (https://SERVICE-HASH-REGION.a.run.app), so push-endpoint-https can judge it."""

import pulumi_gcp as gcp

invoker = gcp.serviceaccount.Account("invoker", account_id="pubsub-invoker")
service = gcp.cloudrunv2.Service(
    "orders-handler", location="us-central1", deletion_protection=False,
    template={"containers": [{"image": "us-docker.pkg.dev/cloudrun/container/hello"}]})
topic = gcp.pubsub.Topic("orders", name="orders", message_retention_duration="86400s")
gcp.pubsub.Subscription(
    "orders-push", name="orders-push", topic=topic.id, expiration_policy={"ttl": ""},
    push_config={"push_endpoint": service.uri.apply(lambda uri: f"{uri}/pubsub"),
                 "oidc_token": {"service_account_email": invoker.email}})
