"""Written here: project-level config defaults in Pulumi.yaml (typed), not repeated in the stack file."""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
region = config.require("region")          # from Pulumi.yaml's default: us-east1
retention = config.require("retention")    # from Pulumi.yaml's default: 604800s

orders = gcp.pubsub.Topic("orders",
    name="orders",
    message_storage_policy={"allowed_persistence_regions": [region]},
    message_retention_duration=retention)
gcp.pubsub.Subscription("orders-worker",
    name="orders-worker",
    topic=orders.id,
    ack_deadline_seconds=60,
    message_retention_duration=retention)
