import pulumi
import pulumi_gcp as gcp

example = gcp.pubsub.Topic("example",
    name="example-topic",
    labels={
        "foo": "bar",
    },
    message_retention_duration="86600s")
