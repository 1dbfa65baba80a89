# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic_iam_policy.py (the TopicIAMPolicy docstring example)
import pulumi_gcp as gcp

alerts = gcp.pubsub.Topic("alerts", name="alerts")

# The topic's whole policy: one viewer, nothing public, and no binding or member beside it.
viewers = gcp.organizations.get_iam_policy(bindings=[{"role": "roles/viewer", "members": ["user:auditor@example.net"]}])
gcp.pubsub.TopicIAMPolicy("alerts-policy", project=alerts.project, topic=alerts.name, policy_data=viewers.policy_data)
