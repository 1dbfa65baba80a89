import pulumi
import pulumi_gcp as gcp

example = gcp.pubsub.Topic("example", name="example-topic")
example_subscription = gcp.pubsub.Subscription("example",
    name="example-subscription",
    topic=example.id,
    message_transforms=[
        {
            "javascript_udf": {
                "function_name": "redactSSN",
                "code": """function redactSSN(message, metadata) {
  const data = JSON.parse(message.data);
  delete data['ssn'];
  message.data = JSON.stringify(data);
  return message;
}
""",
            },
        },
        {
            "javascript_udf": {
                "function_name": "otherFunc",
                "code": """function otherFunc(message, metadata) {
  return null;
}
""",
            },
        },
        {
            "disabled": True,
            "javascript_udf": {
                "function_name": "someSMTWeDisabled",
                "code": "...",
            },
        },
    ])
