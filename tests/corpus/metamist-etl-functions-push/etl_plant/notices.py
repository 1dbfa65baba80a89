# Written here after the shape of populationgenomics/metamist metamist_infrastructure/slack_notification.py
"""Slack notices of the ETL: messages published to a topic are pushed to a function that posts them;
optionally, log-based alerts of the watched functions go to a Slack channel."""
import enum
from functools import cached_property

import pulumi_gcp as gcp

from etl_plant.common import HERE, gen2_function, only_role, pubsub_agent, sa_member


class Mode(enum.Flag):
    PUSHED = enum.auto()
    ALERTS = enum.auto()


def slack_token(project: str, name: str) -> str:
    """The real token is read from Secret Manager at deploy time; offline a stand-in string."""
    return f"token-of-{name}-in-{project}"


class SlackNotices:
    def __init__(self, prefix: str, *, project: str, region: str, runner, bucket, channel: str, token_project: str,
                 token_name: str, watched: list[str], mode: Mode, after: list):
        self.prefix, self.project, self.region = prefix, project, region
        self.runner, self.bucket, self.channel = runner, bucket, channel
        self.token = slack_token(token_project, token_name)
        self.watched, self.mode, self.after = watched, mode, after

    # each piece is made the first time it is read
    @cached_property
    def topic(self) -> gcp.pubsub.Topic:
        return gcp.pubsub.Topic(self.prefix, project=self.project)

    @cached_property
    def dead_topic(self) -> gcp.pubsub.Topic:
        topic = gcp.pubsub.Topic(f"{self.prefix}-dead", project=self.project)
        gcp.pubsub.TopicIAMPolicy(f"{self.prefix}-dead-agent-publishes", project=self.project, topic=topic.name,
                                  policy_data=only_role("roles/pubsub.publisher", pubsub_agent()))
        return topic

    @cached_property
    def dead_reader(self) -> gcp.pubsub.Subscription:  # never read below, so never made
        return gcp.pubsub.Subscription(f"{self.prefix}-dead-pull", project=self.project, topic=self.dead_topic.name,
                                       ack_deadline_seconds=20)

    @cached_property
    def poster(self) -> gcp.cloudfunctionsv2.Function:
        return gen2_function(f"{self.prefix}-func", project=self.project, region=self.region, bucket=self.bucket,
                             folder=HERE / "code" / "notify", entry_point="etl_notify", runner=self.runner,
                             env={"SLACK_BOT_TOKEN": self.token, "SLACK_CHANNEL": self.channel},
                             depends_on=self.after, suffixes=(".gz", ".py", ".txt", ".json"))

    @cached_property
    def push(self) -> gcp.pubsub.Subscription:
        sub = gcp.pubsub.Subscription(
            f"{self.prefix}-push",
            project=self.project,
            topic=self.topic.name,
            ack_deadline_seconds=20,
            dead_letter_policy={"dead_letter_topic": self.dead_topic.id, "max_delivery_attempts": 5},
            push_config={
                "push_endpoint": self.poster.service_config.uri,
                "oidc_token": {"service_account_email": self.runner.email},
                "attributes": {"x-goog-version": "v1"},
            },
        )
        gcp.pubsub.SubscriptionIAMPolicy(f"{self.prefix}-push-agent-subscribes", project=self.project,
                                         subscription=sub.name,
                                         policy_data=only_role("roles/pubsub.subscriber", pubsub_agent()))
        return sub

    @cached_property
    def slack_channel(self) -> gcp.monitoring.NotificationChannel:
        return gcp.monitoring.NotificationChannel(
            f"{self.prefix}-slack", project=self.project, type="slack", display_name=f"{self.prefix} alerts",
            labels={"channel_name": self.channel}, sensitive_labels={"auth_token": self.token})

    def _alerts(self):
        for fn in self.watched:
            gcp.monitoring.AlertPolicy(
                f"{self.prefix}-{fn}-alert",
                display_name=f"{fn} warnings",
                combiner="OR",
                notification_channels=[self.slack_channel.id],
                conditions=[{"display_name": f"{fn} warning or worse", "condition_matched_log": {
                    "filter": f'resource.type="cloud_run_revision" AND resource.labels.service_name="{fn}" '
                              'AND severity>=WARNING'}}],
                alert_strategy={"notification_rate_limit": {"period": "300s"}, "auto_close": "1800s"},
            )
        return self.slack_channel.name

    def build(self):
        """Makes what the mode asks for; returns (alert channel name or None, notice topic or None)."""
        channel_name = self._alerts() if Mode.ALERTS in self.mode else None
        topic = None
        if Mode.PUSHED in self.mode:
            gcp.projects.IAMMember(f"{self.prefix}-runner-invokes", project=self.project, role="roles/run.invoker",
                                   member=sa_member(self.runner))
            _ = self.push
            topic = self.topic
        return channel_name, topic
