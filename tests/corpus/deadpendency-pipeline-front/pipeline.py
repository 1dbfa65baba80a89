# Written here after the shape of deadpendency/deadpendency terraform/app/pipeline/modules (failure, front-door, check-run-creator, error-processor)
"""Building blocks of one pipeline stage: its queue pair, its Cloud Run worker and the push into it."""
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

HOME = gcp.organizations.get_project(project_id="dgtw-deadpendency-action-2")  # unknown offline
AGENT = f"serviceAccount:service-{HOME.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
REGISTRY = "gcr.io/dgtw-deadpendency-action-2"


@dataclass
class Release:
    env: str
    live: str
    version: str
    sha: str

    def named(self, what: str) -> str:
        return f"{self.env}-{self.live}-{what}"


def as_member(account: gcp.serviceaccount.Account) -> pulumi.Output:
    return account.email.apply(lambda e: "serviceAccount:" + e)


def account(rel: Release, short: str, title: str) -> gcp.serviceaccount.Account:
    return gcp.serviceaccount.Account(f"sa-{short}", project=HOME.project_id, account_id=rel.named(short),
                                      display_name=f"{title} {rel.env}")


def topic_grant(label: str, topic, role: str, member) -> None:
    gcp.pubsub.TopicIAMMember(label, project=HOME.project_id, topic=topic, role=role, member=member)


def queue_pair(rel: Release, stage: str):
    """A stage's topic and its dead-letter twin, which the Pub/Sub agent may publish to."""
    main = gcp.pubsub.Topic(f"q-{stage}", project=HOME.project_id,
                            name=rel.named(f"deadpendency-action-{stage}"))
    dead = gcp.pubsub.Topic(f"q-{stage}-dead", project=HOME.project_id,
                            name=rel.named(f"deadpendency-action-{stage}-dlq"))
    topic_grant(f"agent-publishes-{stage}-dead", dead.id, "roles/pubsub.publisher", AGENT)
    return main, dead


def project_roles(short: str, member, roles: list[str]) -> None:
    for role in roles:
        gcp.projects.IAMMember(f"{short}-{role.split('/')[1]}", project=HOME.project_id, role=role, member=member)


def secret_reader(short: str, secret: str, member) -> None:
    gcp.secretmanager.SecretIamMember(f"{short}-reads-{secret}", project=HOME.project_id, secret_id=secret,
                                      role="roles/secretmanager.secretAccessor", member=member)


def worker(rel: Release, part: str, runs_as, env: dict) -> gcp.cloudrun.Service:
    variables = {**env, "APP_ENV": rel.env, "APP_VERSION": rel.version, "APP_LIVE": rel.live}
    return gcp.cloudrun.Service(
        f"run-{part}",
        project=HOME.project_id,
        name=rel.named(f"deadpendency-action-{part}"),
        location="us-central1",
        template=gcp.cloudrun.ServiceTemplateArgs(
            metadata=gcp.cloudrun.ServiceTemplateMetadataArgs(labels={"app_env": rel.env}),
            spec=gcp.cloudrun.ServiceTemplateSpecArgs(
                service_account_name=runs_as.email,
                timeout_seconds=60,
                containers=[gcp.cloudrun.ServiceTemplateSpecContainerArgs(
                    image=f"{REGISTRY}/deadpendency-action-{part}:{rel.sha}",
                    envs=[gcp.cloudrun.ServiceTemplateSpecContainerEnvArgs(name=k, value=v)
                          for k, v in variables.items()],
                )],
            ),
        ),
        traffics=[gcp.cloudrun.ServiceTrafficArgs(percent=100, latest_revision=True)],
    )


def only_invoker(label: str, service: gcp.cloudrun.Service, member) -> None:
    """Authoritative run.invoker policy on the service, from a policy document built by an invoke."""
    doc = gcp.organizations.get_iam_policy_output(bindings=[{"role": "roles/run.invoker", "members": [member]}])
    gcp.cloudrun.IamPolicy(label, project=HOME.project_id, location=service.location, service=service.name,
                           policy_data=doc.policy_data)


def push_into(rel: Release, label: str, short: str, title: str, source_id, service, dead_letter_id=None):
    """A push subscription from a topic into a worker, with its invoker account and grants."""
    invoker = account(rel, short, title)
    caller = as_member(invoker)
    sub = gcp.pubsub.Subscription(
        f"push-{label}",
        project=HOME.project_id,
        name=rel.named(f"{label}-subscription"),
        topic=source_id,
        ack_deadline_seconds=60,
        push_config=gcp.pubsub.SubscriptionPushConfigArgs(
            push_endpoint=service.statuses.apply(lambda s: s[0].url),
            oidc_token=gcp.pubsub.SubscriptionPushConfigOidcTokenArgs(service_account_email=invoker.email),
            attributes={"x-goog-version": "v1"},
        ),
        retry_policy=gcp.pubsub.SubscriptionRetryPolicyArgs(minimum_backoff="1s", maximum_backoff="5s"),
        dead_letter_policy=dead_letter_id and gcp.pubsub.SubscriptionDeadLetterPolicyArgs(
            dead_letter_topic=dead_letter_id, max_delivery_attempts=5),
    )
    grants = {"invoker-editor": (caller, "roles/editor"), "agent-subscriber": (AGENT, "roles/pubsub.subscriber")}
    for suffix, (who, role) in grants.items():
        gcp.pubsub.SubscriptionIAMMember(f"{label}-{suffix}", project=HOME.project_id, subscription=sub.name,
                                         role=role, member=who)
    return sub, invoker, caller
