# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic.py (the Pubsub Topic Multiple Smts docstring example)
import pulumi_gcp as gcp


def udf(name: str, body: str, disabled: bool = False) -> dict:
    """A JavaScript transform whose function is called `name`."""
    transform = {"javascript_udf": {"function_name": name, "code": f"function {name}(message, metadata) {{\n{body}\n}}\n"}}
    return {**transform, "disabled": True} if disabled else transform


# Applied on publish, in order; the last one is declared but switched off.
gcp.pubsub.Topic(
    "profiles",
    name="profiles",
    message_transforms=[
        udf("maskPhone", "  const p = JSON.parse(message.data);\n  p.phone = '***';\n"
                         "  message.data = JSON.stringify(p);\n  return message;"),
        udf("rejectAll", "  return null;"),
        udf("notReady", "  ...", disabled=True),
    ],
)
