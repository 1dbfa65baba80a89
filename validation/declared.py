"""The declared estate as the verification job needs it, read from a plan (`pubsubguard.plan`).

One function, `estate_from_plan(plan)`, turns the plan's raw resource inputs and its stack outputs
(`topics`, `subscriptions`, `probe_isolation`) into:

- `DeclaredTopic`: path, publisher region and endpoint;
- `DeclaredTarget`: one declared subscription with its `evidence.DeclaredSubscription` (what the
  checks judge), its paths, consumer endpoint, dead-letter topic and drain, the settings a probe twin
  copies, and why it is not probed (push / BigQuery / Cloud Storage delivery), if so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pubsub_rules import facts

from validation.evidence import DeclaredSubscription


@dataclass(frozen=True)
class DeclaredTopic:
    name: str
    path: str
    publisher_region: str | None
    publisher_endpoint: str


@dataclass(frozen=True)
class DeclaredTarget:
    declared: DeclaredSubscription
    path: str
    topic_path: str
    consumer_region: str | None
    consumer_endpoint: str
    dead_letter_topic: str | None  # full path
    dead_letter_drain: str | None  # full path of the auto-created drain, if any
    retry_min_backoff_s: float | None = None
    retry_max_backoff_s: float | None = None
    not_probed: str | None = None  # reason; None: probed

    @property
    def name(self) -> str:
        return self.declared.name


@dataclass(frozen=True)
class DeclaredEstate:
    project: str
    stack: str
    topics: dict[str, DeclaredTopic]
    subscriptions: dict[str, DeclaredTarget]
    probe_isolation: bool
    drains: dict[str, str] = field(default_factory=dict)  # drain path -> dead-letter topic path

    def declared_subscriptions(self) -> list[DeclaredSubscription]:
        return [target.declared for target in self.subscriptions.values()]


class PlanShapeError(ValueError):
    """The plan lacks what the verification job reads (it was not made by this project's program)."""


def short_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _delivery_type(inputs: dict) -> str:
    if inputs.get("pushConfig"):
        return "push"
    if inputs.get("bigqueryConfig"):
        return "bigquery"
    if inputs.get("cloudStorageConfig"):
        return "cloud_storage"
    return "pull"


def estate_from_plan(plan: dict) -> DeclaredEstate:
    outputs = plan.get("outputs") or {}
    if "topics" not in outputs or "subscriptions" not in outputs:
        raise PlanShapeError(
            f"plan for stack {plan.get('stack')!r}: outputs: expected 'topics' and 'subscriptions' "
            "(the stack outputs of this project's Pulumi program)"
        )
    inputs_by_name = {
        r["inputs"].get("name", r["name"]): r["inputs"] for r in plan["resources"] if r["type"] == facts.SUBSCRIPTION
    }
    topics = {
        name: DeclaredTopic(
            name=name,
            path=out["path"],
            publisher_region=out.get("publisher_region"),
            publisher_endpoint=out.get("publisher_endpoint") or facts.GLOBAL_ENDPOINT,
        )
        for name, out in sorted(outputs["topics"].items())
    }
    targets: dict[str, DeclaredTarget] = {}
    drains: dict[str, str] = {}
    for name, out in sorted(outputs["subscriptions"].items()):
        inputs = inputs_by_name.get(name)
        if inputs is None:
            raise PlanShapeError(f"plan: subscription {name!r} is in the stack outputs but not among the resources")
        dead_letter = inputs.get("deadLetterPolicy") or {}
        delivery = _delivery_type(inputs)
        retry = inputs.get("retryPolicy") or {}
        declared = DeclaredSubscription(
            name=name,
            topic=out["topic"],
            ordering=bool(inputs.get("enableMessageOrdering")),
            exactly_once=bool(inputs.get("enableExactlyOnceDelivery")),
            ack_deadline_s=int(inputs.get("ackDeadlineSeconds") or facts.ACK_DEADLINE_DEFAULT_S),
            max_delivery_attempts=(
                int(dead_letter.get("maxDeliveryAttempts") or facts.MAX_DELIVERY_ATTEMPTS_DEFAULT) if dead_letter else None
            ),
            dead_letter_topic=short_name(dead_letter["deadLetterTopic"]) if dead_letter else None,
            delivery_type=delivery,
        )
        if out.get("dead_letter_drain"):
            drains[out["dead_letter_drain"]] = out["dead_letter_topic"]
        targets[name] = DeclaredTarget(
            declared=declared,
            path=out["path"],
            topic_path=topics[out["topic"]].path,
            consumer_region=out.get("consumer_region"),
            consumer_endpoint=out.get("consumer_endpoint") or facts.GLOBAL_ENDPOINT,
            dead_letter_topic=out.get("dead_letter_topic") or (dead_letter.get("deadLetterTopic") if dead_letter else None),
            dead_letter_drain=out.get("dead_letter_drain"),
            retry_min_backoff_s=facts.parse_api_duration(retry.get("minimumBackoff")),
            retry_max_backoff_s=facts.parse_api_duration(retry.get("maximumBackoff")),
            not_probed=(
                None
                if delivery == "pull"
                else f"{delivery} subscription: the service delivers it, a probe cannot pull from it without "
                "changing its delivery type"
            ),
        )
    return DeclaredEstate(
        project=plan.get("gcp_project") or "unknown-project",
        stack=plan.get("stack") or "unknown",
        topics=topics,
        subscriptions=targets,
        probe_isolation=bool(outputs.get("probe_isolation")),
        drains=drains,
    )
