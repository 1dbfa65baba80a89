# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic.py (the Pubsub Topic Basic docstring example)
import pulumi_gcp as gcp

# A topic that keeps published messages a little over a day; no subscription reads it.
audit_log = gcp.pubsub.Topic(
    "audit-log",
    name="audit-log-events",
    message_retention_duration="86600s",
    labels={"owner": "platform"},
)
