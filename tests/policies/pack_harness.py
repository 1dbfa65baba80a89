"""Calling the SDK policies directly, the way `_PolicyAnalyzerServicer` does: props wrapped in the
SDK's unknown-checking proxy, violations collected by a `report_violation` callback."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

import pubsub_facts as facts
from pubsub_rules.catalog import BY_NAME

UNKNOWN = UNKNOWN_STRING_VALUE  # what the CLI sends for any value unknown during preview
PROJECT = "example-project"
AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
# Properties the rules' cases give a subscription: a push endpoint, a BigQuery or Cloud Storage export, the labels
# that pin its consumers or its topic's publishers to a region.
PUSH = {"pushEndpoint": "https://orders.example.com/push", "oidcToken": {"serviceAccountEmail": "p@x.iam.gserviceaccount.com"}}
BIGQUERY = {"table": "p.d.t"}
STORAGE = {"bucket": "b"}
PINNED = {"labels": {facts.CONSUMER_REGION_LABEL: "us-east1"}}
PUBLISHERS = {"labels": {facts.PUBLISHER_REGION_LABEL: "us-east1"}}


def _opts(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::project::{type_}::{name}"


def provider(project: str | None = PROJECT) -> PolicyProviderResource:
    """The default gcp provider as the CLI passes it (its `project` from `gcp:project`)."""
    props = {"project": project} if project else {}
    return PolicyProviderResource("pulumi:providers:gcp", unknown_checking_proxy(props),
                                  "urn:pulumi:test::project::pulumi:providers:gcp::default", "default")


_POLICIES: dict[str, Any] = {}


def policy(name: str):
    if name not in _POLICIES:
        _POLICIES[name] = BY_NAME[name].policy()
    return _POLICIES[name]


CANNOT_JUDGE: list[str] = []  # the SDK's "can't run policy ... during preview" texts of the last calls


def _validate(rule: str, args, report) -> None:
    """As the SDK's servicer: an UnknownValueError becomes its advisory cannot-judge line."""
    try:
        policy(rule).validate(args, report)
    except UnknownValueError as err:
        CANNOT_JUDGE.append(err.message)


def validate_resource(rule: str, type_: str, props: dict, name: str = "res", config: dict | None = None) -> list[str]:
    messages: list[str] = []
    args = ResourceValidationArgs(type_, unknown_checking_proxy(props), urn(type_, name), name, _opts(), provider(), config)
    _validate(rule, args, lambda message, _urn=None: messages.append(message))
    return messages


def validate_stack(rule: str, resources: list[dict], config: dict | None = None) -> list[tuple[str | None, str]]:
    """`resources`: dicts with type, name, props and optional property_dependencies {prop: [names]} and
    provider_project (default: the default provider's PROJECT)."""
    built = {}
    for spec in resources:
        built[spec["name"]] = PolicyResource(
            spec["type"], unknown_checking_proxy(spec["props"]), urn(spec["type"], spec["name"]), spec["name"],
            _opts(), provider(spec.get("provider_project", PROJECT)), None, [], {},
        )
    for spec in resources:
        for key, names in (spec.get("property_dependencies") or {}).items():
            built[spec["name"]].property_dependencies[key] = [built[n] for n in names]
    found: list[tuple[str | None, str]] = []
    args = StackValidationArgs(list(built.values()), config)
    _validate(rule, args, lambda message, at=None: found.append((at, message)))
    return found


def cannot_judge(rule: str, resources: list[dict], config: dict | None = None) -> list[str]:
    """The cannot-judge texts (`string value at .X can't be known during preview`) of `rule` over
    `resources`, as the SDK reports them (the X part)."""
    CANNOT_JUDGE.clear()
    check(rule, resources, config)
    return [m.removeprefix("string value at .").removesuffix(" can't be known during preview") for m in CANNOT_JUDGE]


def check(rule: str, resources: list[dict], config: dict | None = None) -> list[str]:
    """Messages of `rule` over `resources`: one resource for resource rules, all for stack rules."""
    if BY_NAME[rule].stack:
        return [message for _, message in validate_stack(rule, resources, config)]
    messages = []
    for spec in resources:
        messages += validate_resource(rule, spec["type"], spec["props"], spec["name"], config)
    return messages


# --- Resource builders ------------------------------------------------------------------------------
def topic(name: str, **props) -> dict:
    return {"type": facts.TOPIC, "name": name, "props": {"name": name, **props}}


def sub(name: str, topic_name: str = "orders", deps: dict | None = None, **props) -> dict:
    body = {"name": name, "topic": f"projects/{PROJECT}/topics/{topic_name}", **props}
    return {"type": facts.SUBSCRIPTION, "name": name, "props": body, "property_dependencies": deps or {}}


def topic_grant(name: str, topic_name: Any, role: str = facts.PUBLISHER_ROLE, member: Any = AGENT, deps=None) -> dict:
    props = {"topic": topic_name, "role": role, "member": member}
    return {"type": facts.TOPIC_IAM_MEMBER, "name": name, "props": props, "property_dependencies": deps or {}}


def sub_grant(name: str, sub_name: Any, role: str = facts.SUBSCRIBER_ROLE, member: Any = AGENT) -> dict:
    props = {"subscription": sub_name, "role": role, "member": member}
    return {"type": facts.SUBSCRIPTION_IAM_MEMBER, "name": name, "props": props}


def dead_letter(dlt: str = "orders-dead-letter", attempts: int = 5) -> dict:
    return {"deadLetterTopic": f"projects/{PROJECT}/topics/{dlt}", "maxDeliveryAttempts": attempts}


def dead_letter_estate(*, drain: bool = True, publisher: bool = True, subscriber: bool = True, **sub_props) -> list[dict]:
    """orders -> worker dead-lettering into orders-dead-letter, with the plumbing switched on or off."""
    resources = [topic("orders"), topic("orders-dead-letter"), sub("worker", deadLetterPolicy=dead_letter(), **sub_props)]
    if drain:
        resources.append(sub("drain", "orders-dead-letter"))
    if publisher:
        resources.append(topic_grant("dlq-publisher", "orders-dead-letter"))
    if subscriber:
        resources.append(sub_grant("dlq-subscriber", "worker"))
    return resources
