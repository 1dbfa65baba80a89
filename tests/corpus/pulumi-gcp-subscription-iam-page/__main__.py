import pulumi
import pulumi_gcp as gcp

# ## pubsub.SubscriptionIAMPolicy
admin = gcp.organizations.get_iam_policy(bindings=[{
    "role": "roles/editor",
    "members": ["user:jane@example.com"],
}])
editor = gcp.pubsub.SubscriptionIAMPolicy("editor",
    subscription="your-subscription-name",
    policy_data=admin.policy_data)

# ## pubsub.SubscriptionIAMBinding
# (each section of the page names its resource "editor"; Pulumi needs unique names in one program,
# so the second and third get a suffix)
editor_binding = gcp.pubsub.SubscriptionIAMBinding("editor-binding",
    subscription="your-subscription-name",
    role="roles/editor",
    members=["user:jane@example.com"])

# ## pubsub.SubscriptionIAMMember
editor_member = gcp.pubsub.SubscriptionIAMMember("editor-member",
    subscription="your-subscription-name",
    role="roles/editor",
    member="user:jane@example.com")
