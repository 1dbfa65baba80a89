# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Pull Filter docstring example)
import pulumi_gcp as gcp

shipments = gcp.pubsub.Topic("shipments", name="shipments")

# The filter spans lines and keeps its indentation: its size in bytes is what the API limits.
EU_PARCELS = """
    attributes.region = "eu"
    AND attributes.kind = "parcel"
"""

gcp.pubsub.Subscription(
    "eu-parcels",
    name="eu-parcels",
    topic=shipments.id,
    filter=EU_PARCELS,
    ack_deadline_seconds=20,
    labels={"owner": "logistics"},
)
