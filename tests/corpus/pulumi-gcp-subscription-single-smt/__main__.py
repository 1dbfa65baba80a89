# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Single Smt docstring example)
import pulumi_gcp as gcp

readings = gcp.pubsub.Topic("readings", name="readings")

# One transform; it answers a boolean where Pub/Sub expects a message or null.
gcp.pubsub.Subscription(
    "readings-hot",
    name="readings-hot",
    topic=readings.id,
    message_transforms=[{
        "javascript_udf": {
            "function_name": "isTooHot",
            "code": """function isTooHot(message, metadata) {
  const reading = JSON.parse(message.data);
  return reading.celsius > 40;
}
""",
        },
    }],
)
