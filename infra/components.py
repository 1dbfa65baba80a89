"""ComponentResources: one `TopicComponent` per declared topic, one `SubscriptionComponent` per declared subscription
(parented to its topic's component) holding the subscription and its dead-letter plumbing."""

from __future__ import annotations

from typing import Mapping

import pulumi
import pulumi_gcp as gcp
from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import probe_contract

from pubsubguard.infra import estate as model

MANAGED_BY = {"managed-by": "pubsubguard"}


def resource_path(collection: str, name: pulumi.Output[str]) -> pulumi.Output[str]:
    """`projects/P/<collection>/N` in the provider's project (known at preview, unlike a new id)."""
    return pulumi.Output.concat("projects/", gcp.config.project, f"/{collection}/", name)


def endpoint(region: str | None) -> str:
    return facts.locational_endpoint(region) if region else facts.GLOBAL_ENDPOINT


class TopicComponent(pulumi.ComponentResource):
    """A topic, plus the publisher grant for the Pub/Sub service agent when it receives dead letters."""

    topic: gcp.pubsub.Topic
    path: pulumi.Output[str]

    def __init__(
        self,
        spec: model.TopicSpec,
        *,
        service_agent: pulumi.Input[str],
        receives_dead_letters: bool,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("pubsubguard:index:Topic", spec.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {**MANAGED_BY, **spec.labels}
        if spec.publisher_region:
            labels[facts.PUBLISHER_REGION_LABEL] = spec.publisher_region
        storage = None
        if spec.persistence_regions:
            storage = gcp.pubsub.TopicMessageStoragePolicyArgs(
                allowed_persistence_regions=spec.persistence_regions,
                enforce_in_transit=spec.enforce_in_transit or None,
            )
        self.topic = gcp.pubsub.Topic(
            spec.name,
            name=spec.name,
            labels=labels,
            message_retention_duration=(
                facts.api_duration(spec.message_retention) if spec.message_retention else None
            ),
            message_storage_policy=storage,
            kms_key_name=spec.kms_key,
            opts=child,
        )
        # The path from the project and name (a new topic's id is unknown until it is created).
        self.path = resource_path("topics", self.topic.name)
        if receives_dead_letters:
            # The service agent forwards dead letters into this topic (docs/pubsub-facts.md: dead-letter topics).
            dead_letter_publisher(f"{spec.name}-dead-letter-publisher", self.topic, service_agent, child)
        self.register_outputs({"path": self.path})


def dead_letter_publisher(name, topic: gcp.pubsub.Topic, service_agent, opts) -> gcp.pubsub.TopicIAMMember:
    return gcp.pubsub.TopicIAMMember(
        name, topic=topic.name, role=facts.PUBLISHER_ROLE, member=service_agent, opts=opts
    )


class SubscriptionComponent(pulumi.ComponentResource):
    """A subscription with its dead-letter topic (auto-created or named), drain and service-agent IAM."""

    subscription: gcp.pubsub.Subscription
    path: pulumi.Output[str]
    dead_letter_topic: pulumi.Output[str] | None

    def __init__(
        self,
        spec: model.SubscriptionSpec,
        *,
        topic: TopicComponent,
        topics: Mapping[str, TopicComponent],
        service_agent: pulumi.Input[str],
        probe_isolation: bool,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("pubsubguard:index:Subscription", spec.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {**MANAGED_BY, **spec.labels}
        if spec.consumer_region:
            labels[facts.CONSUMER_REGION_LABEL] = spec.consumer_region

        self.dead_letter_topic = None
        self.dead_letter_drain = None
        dead_letter_policy = self._dead_letter(spec, topics, service_agent, probe_isolation, child)

        self.subscription = gcp.pubsub.Subscription(
            spec.name,
            name=spec.name,
            topic=topic.path,
            labels=labels,
            ack_deadline_seconds=spec.ack_deadline_seconds,
            message_retention_duration=facts.api_duration(spec.retention),
            retain_acked_messages=spec.retain_acked_messages or None,
            enable_message_ordering=spec.ordering,
            enable_exactly_once_delivery=spec.exactly_once,
            filter=probe_contract.with_probe_exclusion(spec.filter) if probe_isolation else spec.filter,
            expiration_policy=_expiration(spec.expiration),
            retry_policy=_retry(spec.retry_policy),
            dead_letter_policy=dead_letter_policy,
            **_delivery_args(spec.delivery),
            opts=child,
        )
        self.path = resource_path("subscriptions", self.subscription.name)
        if spec.dead_letter:
            # The service agent must be able to ack (pull) the source subscription to forward.
            gcp.pubsub.SubscriptionIAMMember(
                f"{spec.name}-dead-letter-subscriber",
                subscription=self.subscription.name,
                role=facts.SUBSCRIBER_ROLE,
                member=service_agent,
                opts=child,
            )
        self.register_outputs({"path": self.path, "dead_letter_topic": self.dead_letter_topic})

    def _dead_letter(self, spec: model.SubscriptionSpec, topics: Mapping[str, TopicComponent], service_agent,
                     probe_isolation: bool, child: pulumi.ResourceOptions):
        """The dead-letter policy (None without one): the named topic, or one made here with its publisher
        grant and its drain subscription (`dead_letter_topic`, `dead_letter_drain`)."""
        if not spec.dead_letter:
            return None
        if spec.dead_letter.topic:
            dl_topic = topics[spec.dead_letter.topic].topic
        else:
            dl_topic_name, drain_name = model.auto_dead_letter_names(spec.name)
            dl_topic = gcp.pubsub.Topic(
                dl_topic_name, name=dl_topic_name, labels={**MANAGED_BY, **spec.labels}, opts=child
            )
            dead_letter_publisher(f"{dl_topic_name}-publisher", dl_topic, service_agent, child)
            # Forwarded messages are lost unless the dead-letter topic has a subscription.
            drain = gcp.pubsub.Subscription(
                drain_name,
                name=drain_name,
                topic=resource_path("topics", dl_topic.name),
                labels={**MANAGED_BY, **spec.labels},
                ack_deadline_seconds=60,
                message_retention_duration=facts.api_duration(facts.RETENTION_MAX_S),
                expiration_policy=gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl=""),
                filter=probe_contract.PROBE_EXCLUSION_FILTER if probe_isolation else None,
                opts=child,
            )
            self.dead_letter_drain = resource_path("subscriptions", drain.name)
        self.dead_letter_topic = resource_path("topics", dl_topic.name)
        return gcp.pubsub.SubscriptionDeadLetterPolicyArgs(
            dead_letter_topic=self.dead_letter_topic,
            max_delivery_attempts=spec.dead_letter.max_delivery_attempts,
        )


def _expiration(expiration):
    if expiration is None:
        return None
    ttl = "" if expiration == "never" else facts.api_duration(expiration)
    return gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl=ttl)


def _retry(retry_policy):
    if not retry_policy:
        return None
    return gcp.pubsub.SubscriptionRetryPolicyArgs(
        minimum_backoff=facts.api_duration(retry_policy.minimum_backoff),
        maximum_backoff=facts.api_duration(retry_policy.maximum_backoff),
    )


def _delivery_args(delivery) -> dict:
    if isinstance(delivery, model.PushDelivery):
        oidc = None
        if delivery.oidc_service_account:
            oidc = gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(
                service_account_email=delivery.oidc_service_account, audience=delivery.audience
            )
        return {"push_config": gcp.pubsub.SubscriptionPushConfigArgs(push_endpoint=delivery.endpoint, oidc_token=oidc)}
    if isinstance(delivery, model.BigQueryDelivery):
        return {
            "bigquery_config": gcp.pubsub.SubscriptionBigqueryConfigArgs(
                table=delivery.table,
                use_topic_schema=delivery.use_topic_schema or None,
                write_metadata=delivery.write_metadata or None,
            )
        }
    if isinstance(delivery, model.CloudStorageDelivery):
        return {
            "cloud_storage_config": gcp.pubsub.SubscriptionCloudStorageConfigArgs(
                bucket=delivery.bucket,
                filename_prefix=delivery.filename_prefix,
                max_duration=delivery.max_duration,
            )
        }
    return {}
