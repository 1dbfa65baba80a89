# Written here after the shape of GoogleCloudPlatform/cloud-foundation-fabric modules/pubsub (main.tf, iam.tf)
"""A topic, its subscriptions, and authoritative IAM on both; members may name an alias as "$alias"."""
from string import Template

import pulumi_gcp as gcp


class TopicWithAccess:
    def __init__(self, label, *, project, topic, aliases=None, topic_roles=None, subscriptions=None):
        self._aliases = aliases or {}
        self.topic = gcp.pubsub.Topic(label, project=project, name=topic, labels={})
        for role, members in (topic_roles or {}).items():
            gcp.pubsub.TopicIAMBinding(f"{label}:{role}", project=project, topic=self.topic.id, role=role,
                                       members=self._resolve(members))
        self.subscriptions = {}
        for sub_name, sub_roles in (subscriptions or {}).items():
            sub = gcp.pubsub.Subscription(f"{label}/{sub_name}", project=project, name=sub_name,
                                          topic=self.topic.id, labels={}, retain_acked_messages=False,
                                          enable_message_ordering=False, enable_exactly_once_delivery=False)
            self.subscriptions[sub_name] = sub
            for role, members in sub_roles.items():
                gcp.pubsub.SubscriptionIAMBinding(f"{label}/{sub_name}:{role}", project=project,
                                                  subscription=sub.id, role=role,
                                                  members=self._resolve(members))

    def _resolve(self, members):
        return [Template(m).safe_substitute(self._aliases) for m in members]
