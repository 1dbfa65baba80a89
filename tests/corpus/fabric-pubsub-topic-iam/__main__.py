"""GoogleCloudPlatform/cloud-foundation-fabric, modules/pubsub/README.md, examples "Simple topic with IAM" and
"Subscriptions with IAM" (two module calls, as one stack), in Python. The README's test variables are stack config.
"""
import pulumi

from pubsub_module import PubsubModule

config = pulumi.Config()
project_id = config.require("project_id")
group_email = config.require("group_email")
service_account = config.require_object("service_account")

# "Simple topic with IAM": module "pubsub"
PubsubModule("pubsub",
    project_id=project_id,
    name="my-topic",
    context={
        "iam_principals": {
            "mygroup": f"group:{group_email}",
        },
    },
    iam={
        "roles/pubsub.viewer": ["$iam_principals:mygroup"],
        "roles/pubsub.subscriber": [f"serviceAccount:{service_account['email']}"],
    })

# "Subscriptions with IAM": module "pubsub" (its own topic of the same name in the README; a second topic
# my-topic-subs here, since both examples share one stack)
PubsubModule("pubsub-subs",
    project_id=project_id,
    name="my-topic-subs",
    subscriptions={
        "test-1": {
            "iam": {
                "roles/pubsub.subscriber": [f"serviceAccount:{service_account['email']}"],
            },
        },
    })
