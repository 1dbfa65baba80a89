"""mzinni/gcp-csp-push-demo tf/csp-pubsub-push-subscription.tf (Terraform), in Python."""
import pulumi_gcp as gcp

csp_demo_topic = gcp.pubsub.Topic("csp-demo-topic",
    name="csppubsubdemo-topic")

csp_demo_subscription = gcp.pubsub.Subscription("csp-demo-subscription",
    name="csppubsubdemo-subscription",
    topic=csp_demo_topic.id,
    ack_deadline_seconds=20,
    labels={
        "foo": "bar",
    },
    push_config={
        "push_endpoint": "https://csppubsubdemo-762434879017.us-central1.run.app/pubsub",
        "attributes": {
            "x-goog-version": "v1",
        },
    })
