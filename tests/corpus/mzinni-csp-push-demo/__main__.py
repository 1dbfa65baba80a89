# Written here after the shape of mzinni/gcp-csp-push-demo tf/csp-pubsub-push-subscription.tf
"""A topic whose one subscription pushes to a fixed Cloud Run address."""
import pulumi_gcp as gcp

RUN_HOST = "https://csppubsubdemo-762434879017.us-central1.run.app"

demo_topic = gcp.pubsub.Topic("demo-topic", name="csppubsubdemo-topic")

demo_push = gcp.pubsub.Subscription(
    "demo-push",
    name="csppubsubdemo-subscription",
    topic=demo_topic.id,  # projects/P/topics/N, known only after create
    ack_deadline_seconds=20,
    labels={"foo": "bar"},
    push_config=gcp.pubsub.SubscriptionPushConfigArgs(
        push_endpoint=RUN_HOST + "/pubsub",
        attributes={"x-goog-version": "v1"},
    ),
)
