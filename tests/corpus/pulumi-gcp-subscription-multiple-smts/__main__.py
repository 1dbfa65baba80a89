# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription.py (the Pubsub Subscription Multiple Smts docstring example)
import pulumi_gcp as gcp

STRIP_CARD = """function stripCard(message, metadata) {
  const body = JSON.parse(message.data);
  delete body.card_number;
  message.data = JSON.stringify(body);
  return message;
}
"""

DROP_EVERYTHING = """function dropEverything(message, metadata) {
  return null;
}
"""

checkouts = gcp.pubsub.Topic("checkouts", name="checkouts")

# Transforms run in order: strip the card number, then drop the message. The third one is kept but off,
# its code a placeholder.
gcp.pubsub.Subscription(
    "checkouts-scrubbed",
    name="checkouts-scrubbed",
    topic=checkouts.id,
    message_transforms=[
        {"javascript_udf": {"function_name": "stripCard", "code": STRIP_CARD}},
        {"javascript_udf": {"function_name": "dropEverything", "code": DROP_EVERYTHING}},
        {"disabled": True, "javascript_udf": {"function_name": "laterMaybe", "code": "..."}},
    ],
)
