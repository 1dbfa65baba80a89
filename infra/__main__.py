"""The Pulumi program: read the estate from stack config, declare it, export paths and endpoints."""

import pulumi

from pubsubguard.infra.components import SubscriptionComponent, TopicComponent, endpoint
from pubsubguard.infra.config import read_estate, service_agent

estate = read_estate()
agent = service_agent()
named_dead_letter_topics = {
    sub.dead_letter.topic for _, sub in estate.subscriptions() if sub.dead_letter and sub.dead_letter.topic
}

topics = {
    spec.name: TopicComponent(spec, service_agent=agent, receives_dead_letters=spec.name in named_dead_letter_topics)
    for spec in estate.topics
}
subscriptions = {
    sub.name: SubscriptionComponent(
        sub,
        topic=topics[topic.name],
        topics=topics,
        service_agent=agent,
        probe_isolation=estate.probe_isolation,
        opts=pulumi.ResourceOptions(parent=topics[topic.name]),
    )
    for topic, sub in estate.subscriptions()
}

pulumi.export(
    "topics",
    {
        spec.name: {
            "path": topics[spec.name].path,
            "publisher_region": spec.publisher_region,
            "publisher_endpoint": endpoint(spec.publisher_region),
        }
        for spec in estate.topics
    },
)
pulumi.export(
    "subscriptions",
    {
        sub.name: {
            "path": subscriptions[sub.name].path,
            "topic": topic.name,
            "consumer_region": sub.consumer_region,
            "consumer_endpoint": endpoint(sub.consumer_region),
            "dead_letter_topic": subscriptions[sub.name].dead_letter_topic,
            "dead_letter_drain": subscriptions[sub.name].dead_letter_drain,
        }
        for topic, sub in estate.subscriptions()
    },
)
pulumi.export("probe_isolation", estate.probe_isolation)
