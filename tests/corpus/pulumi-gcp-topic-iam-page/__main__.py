import pulumi
import pulumi_gcp as gcp

# The docstring refers to a topic `example` it does not declare (example["project"], example["name"]);
# it is declared here as in the Topic docstring's "Pubsub Topic Basic", and referenced as attributes.
example = gcp.pubsub.Topic("example", name="example-topic")

# ## pubsub.TopicIAMPolicy
admin = gcp.organizations.get_iam_policy(bindings=[{
    "role": "roles/viewer",
    "members": ["user:jane@example.com"],
}])
policy = gcp.pubsub.TopicIAMPolicy("policy",
    project=example.project,
    topic=example.name,
    policy_data=admin.policy_data)

# ## pubsub.TopicIAMBinding
binding = gcp.pubsub.TopicIAMBinding("binding",
    project=example.project,
    topic=example.name,
    role="roles/viewer",
    members=["user:jane@example.com"])

# ## pubsub.TopicIAMMember
member = gcp.pubsub.TopicIAMMember("member",
    project=example.project,
    topic=example.name,
    role="roles/viewer",
    member="user:jane@example.com")
