# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/subscription_iam_policy.py (the SubscriptionIAMPolicy, SubscriptionIAMBinding and SubscriptionIAMMember docstring examples, in one program)
import pulumi_gcp as gcp

# A subscription made elsewhere, named here by its literal name.
SUBSCRIPTION = "refunds-worker"
ROLE = "roles/editor"
OPERATOR = "user:ops-oncall@example.net"

# The whole policy of the subscription, from the policy-data invoke ...
whole_policy = gcp.organizations.get_iam_policy(bindings=[{"role": ROLE, "members": [OPERATOR]}])
gcp.pubsub.SubscriptionIAMPolicy("refunds-policy", subscription=SUBSCRIPTION, policy_data=whole_policy.policy_data)

# ... and, on the same subscription and role, a binding and a member as well.
gcp.pubsub.SubscriptionIAMBinding("refunds-binding", subscription=SUBSCRIPTION, role=ROLE, members=[OPERATOR])
gcp.pubsub.SubscriptionIAMMember("refunds-member", subscription=SUBSCRIPTION, role=ROLE, member=OPERATOR)
