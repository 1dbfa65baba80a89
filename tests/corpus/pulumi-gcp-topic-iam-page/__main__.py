# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic_iam_policy.py (the TopicIAMPolicy, TopicIAMBinding and TopicIAMMember docstring examples, in one program)
import pulumi_gcp as gcp

alerts = gcp.pubsub.Topic("alerts", name="alerts")
READER = "user:auditor@example.net"

# Every grant names the topic by its outputs: the same resource, known through the dependency.
on_alerts = {"project": alerts.project, "topic": alerts.name}

viewers = gcp.organizations.get_iam_policy(bindings=[{"role": "roles/viewer", "members": [READER]}])
gcp.pubsub.TopicIAMPolicy("alerts-policy", policy_data=viewers.policy_data, **on_alerts)
gcp.pubsub.TopicIAMBinding("alerts-viewers", role="roles/viewer", members=[READER], **on_alerts)
gcp.pubsub.TopicIAMMember("alerts-auditor", role="roles/viewer", member=READER, **on_alerts)
