"""The declared estate as deployed: one typed, frozen model, read from a plan once.

Named `declared` for the side of the comparison it stands on: what the plan declares the target
should hold, where `pubsubguard.core.readback.actual` is what the target does hold. A plan (`pubsubguard
plan`) is the resource graph Pulumi would deploy: pulumi-gcp inputs in camelCase plus the stack
outputs. `estate(plan)` reads the inputs of every topic and subscription once into `Topic` and
`Subscription` (paths resolved, durations in seconds, the delivery type derived once) and adds what
only the stack outputs say (regions, locational endpoints, dead-letter drains, probe isolation),
when the plan has them (a plan of another Pulumi program has none). Everything downstream reads this
model: apply's requests (`Topic.inputs` for the fields the model does not name), the readback
vocabulary and drift (`settings()`), probe isolation's twins, the probe's specs, the checks'
subscription config and the report (`pubsubguard.validation.target.checked`).

`plan_from(plan_file, stack, root, state)` is the one plan loader of `verify`, `run` and `apply`: the
plan of `--plan FILE`, one made offline from `--stack`, or what `pulumi up` deployed (`--state`: a
stack's state read as a plan by `pubsubguard.core.state`, its outputs as the declared values, so the same
model is read from it). `Estate.source` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core.errors import UserError
from pubsubguard.core.settings import Setting

PULL, PUSH, BIGQUERY, CLOUD_STORAGE = facts.PULL, facts.PUSH, facts.BIGQUERY, facts.CLOUD_STORAGE  # facts.DELIVERY_TYPES


class PlanValueError(UserError):
    """A plan value that cannot be read (unknown until deploy, or malformed)."""


# --- Paths -------------------------------------------------------------------------------------
def topic_path(project: str, name: str) -> str:
    return name if name.startswith("projects/") else f"projects/{project}/topics/{name}"


def subscription_path(project: str, name: str) -> str:
    return name if name.startswith("projects/") else f"projects/{project}/subscriptions/{name}"


def is_topic(path: str) -> bool:
    return "/topics/" in path


def short_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


# --- The model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Topic:
    name: str  # as declared (the plan's `name` input)
    path: str
    project: str
    labels: dict[str, str]
    retention_s: float | int | None  # None: no topic retention
    storage_regions: tuple[str, ...] | None  # None: no message storage policy declared
    enforce_in_transit: bool | None  # None: no message storage policy declared
    kms_key: str | None  # None: Google-managed
    publisher_region: str | None = None  # stack outputs
    publisher_endpoint: str = facts.GLOBAL_ENDPOINT
    inputs: dict = field(default_factory=dict, compare=False, repr=False)  # the plan's, for apply's request

    def settings(self) -> dict:
        """The readback vocabulary (`pubsubguard.core.readback`): the settings compared with the target."""
        settings = {Setting.KIND: "topic", Setting.LABELS: dict(self.labels), Setting.RETENTION_S: self.retention_s,
                    Setting.KMS_KEY: self.kms_key}
        if self.storage_regions is not None:
            settings[Setting.STORAGE_REGIONS] = list(self.storage_regions)
            settings[Setting.ENFORCE_IN_TRANSIT] = self.enforce_in_transit
        return settings


@dataclass(frozen=True)
class Subscription:
    name: str
    path: str
    project: str
    topic: str  # the topic's declared name
    topic_path: str
    delivery_type: str  # PULL | PUSH | BIGQUERY | CLOUD_STORAGE (`delivery_type(inputs)`)
    ordering: bool
    exactly_once: bool
    declared_ack_deadline_s: int | None  # as declared; None: not declared (the service's default, `ack_deadline_s`)
    retention_s: float | int | None  # None: not declared
    retain_acked_messages: bool
    filter: str | None
    labels: dict[str, str]
    dead_letter_topic_path: str | None  # as `topic_path` beside `topic`: a path (the checks' `dead_letter_topic` is its short name)
    max_delivery_attempts: int | None  # None: no dead-letter policy
    retry_declared: bool
    retry_min_backoff_s: float | int | None  # None: the service's default
    retry_max_backoff_s: float | int | None
    expiration_ttl: str | float | int | None  # "never", seconds, or None: not declared
    push_endpoint: str | None = None
    push_oidc_service_account: str | None = None
    push_audience: str | None = None
    bigquery_table: str | None = None
    cloud_storage_bucket: str | None = None
    export_configs: tuple[str, ...] = ()  # BIGQUERY and/or CLOUD_STORAGE: the export configs declared
    consumer_region: str | None = None  # stack outputs
    consumer_endpoint: str = facts.GLOBAL_ENDPOINT
    dead_letter_drain: str | None = None  # path of the drain of an auto-created dead-letter topic
    inputs: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def dead_lettering(self) -> bool:
        return self.max_delivery_attempts is not None

    @property
    def ack_deadline_s(self) -> int:
        """The ack deadline in force: the declared one, else the service's default (the name means this everywhere
        downstream: the twins, the checks, the evidence)."""
        return self.declared_ack_deadline_s if self.declared_ack_deadline_s is not None else facts.ACK_DEADLINE_DEFAULT_S

    @property
    def not_probed(self) -> str | None:
        """Why the verification probe does not read it (None: it does)."""
        if self.delivery_type == PULL:
            return None
        return (
            f"{self.delivery_type} subscription: the service delivers it, a probe cannot pull from it without "
            "changing its delivery type"
        )

    def settings(self) -> dict:
        """The readback vocabulary (`pubsubguard.core.readback`); a setting the plan leaves to the
        service's default is absent (not compared)."""
        settings = {
            Setting.KIND: "subscription",
            Setting.TOPIC: self.topic_path,
            Setting.ORDERING: self.ordering,
            Setting.EXACTLY_ONCE: self.exactly_once,
            Setting.RETAIN_ACKED_MESSAGES: self.retain_acked_messages,
            Setting.FILTER: self.filter,
            Setting.LABELS: dict(self.labels),
            Setting.DEAD_LETTER_TOPIC: self.dead_letter_topic_path,
            Setting.MAX_DELIVERY_ATTEMPTS: self.max_delivery_attempts,
            Setting.RETRY_MIN_BACKOFF_S: None,
            Setting.RETRY_MAX_BACKOFF_S: None,
            Setting.DELIVERY: self.delivery_type,
            Setting.PUSH_ENDPOINT: self.push_endpoint,
        }
        if self.declared_ack_deadline_s is not None:
            settings[Setting.ACK_DEADLINE_S] = self.declared_ack_deadline_s
        if self.retention_s is not None:
            settings[Setting.RETENTION_S] = self.retention_s
        if self.retry_declared:
            for setting, value in ((Setting.RETRY_MIN_BACKOFF_S, self.retry_min_backoff_s),
                                   (Setting.RETRY_MAX_BACKOFF_S, self.retry_max_backoff_s)):
                if value is None:
                    settings.pop(setting)  # the service fills its default; not compared
                else:
                    settings[setting] = value
        if self.expiration_ttl is not None:
            settings[Setting.EXPIRATION_TTL] = self.expiration_ttl
        if self.delivery_type == PUSH:
            settings[Setting.PUSH_OIDC_SERVICE_ACCOUNT] = self.push_oidc_service_account
            settings[Setting.PUSH_AUDIENCE] = self.push_audience
        if BIGQUERY in self.export_configs:
            settings[Setting.BIGQUERY_TABLE] = self.bigquery_table
        if CLOUD_STORAGE in self.export_configs:
            settings[Setting.CLOUD_STORAGE_BUCKET] = self.cloud_storage_bucket
        return settings


@dataclass(frozen=True)
class Estate:
    project: str
    stack: str
    topics: dict[str, Topic]  # by declared name, in the plan's order
    subscriptions: dict[str, Subscription]  # by declared name, in the plan's order
    probe_isolation: bool = False  # stack output: production subscriptions exclude probe messages
    dead_letter_drains: dict[str, str] = field(default_factory=dict)  # dead-letter drain path -> dead-letter topic path
    # the names the stack outputs list: the estate as its stack declares it, without plumbing
    # (auto-created dead-letter topics and their dead-letter drains); None: the plan has no such outputs
    output_names: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    # the Pub/Sub service agent the plan grants dead-lettering roles to (`serviceAccount:service-N@…`)
    service_agent: str | None = None
    # what the estate was read from (`pubsubguard.core.state.describe`): a plan, or a deployed stack's state
    # (location, stack, deployment time); None: not recorded
    source: dict | None = field(default=None, compare=False)

    def settings(self) -> dict[str, dict]:
        """Resource path -> settings, every topic then every subscription (readback vocabulary)."""
        return {
            **{t.path: t.settings() for t in self.topics.values()},
            **{s.path: s.settings() for s in self.subscriptions.values()},
        }

    def declared_by_stack(self) -> Estate:
        """The topics and subscriptions the stack declares for consumers, sorted by name, without plumbing.

        This project's program lists them in its stack outputs (`topics`, `subscriptions`). Any other
        program (no such outputs) is read from its resources: every subscription except the dead-letter drains of
        dead-letter topics (a subscription reading a topic that another subscription dead-letters to),
        every topic a remaining subscription reads; each dead-lettering subscription gets its dead-letter drain."""
        if self.output_names is None:
            return self._declared_by_resources()
        topic_names, subscription_names = self.output_names
        for kind, names, held in (("topic", topic_names, self.topics), ("subscription", subscription_names, self.subscriptions)):
            for name in names:
                if name not in held:
                    raise PlanValueError(f"plan: {kind} {name!r} is in the stack outputs but not among the resources")
        return replace(
            self,
            topics={name: self.topics[name] for name in sorted(topic_names)},
            subscriptions={name: self.subscriptions[name] for name in sorted(subscription_names)},
        )

    def _declared_by_resources(self) -> Estate:
        dead_letter_topics = {s.dead_letter_topic_path for s in self.subscriptions.values() if s.dead_letter_topic_path}
        dead_letter_drains = {s.path: s.topic_path for s in self.subscriptions.values()
                              if s.topic_path in dead_letter_topics}
        dead_letter_drain_of = {}
        for path, topic in sorted(dead_letter_drains.items()):
            dead_letter_drain_of.setdefault(topic, path)
        subscriptions = {
            name: replace(s, dead_letter_drain=s.dead_letter_drain or dead_letter_drain_of.get(s.dead_letter_topic_path))
            for name, s in sorted(self.subscriptions.items()) if s.path not in dead_letter_drains
        }
        read = {s.topic_path for s in subscriptions.values()}
        return replace(
            self,
            topics={name: t for name, t in sorted(self.topics.items()) if t.path in read},
            subscriptions=subscriptions,
            dead_letter_drains={**self.dead_letter_drains, **dead_letter_drains},
        )


# --- Reading a plan ----------------------------------------------------------------------------
def _seconds(value: Any, where: str) -> float | int:
    seconds = facts.parse_api_duration(value)
    if seconds is None:
        raise PlanValueError(f"{where}: expected an API duration like '600s', got {value!r}")
    return int(seconds) if seconds == int(seconds) else seconds


def _known(value: Any, where: str) -> Any:
    from pubsubguard.core.project import UNKNOWN

    if value is None and where.endswith(".name"):
        raise PlanValueError(f"{where}: chosen at deploy (autonamed); rehearse with `pubsubguard apply --emulator`, "
                             "or read the deployed names with --state")
    if value == UNKNOWN:
        raise PlanValueError(f"{where}: unknown until deploy; compare against a plan whose values are known")
    return value


def delivery_type(inputs: dict) -> str:
    """One of facts.DELIVERY_TYPES: the first whose input block is set (facts.DELIVERY_INPUTS), else pull."""
    for delivery, block in facts.DELIVERY_INPUTS.items():
        if inputs.get(block):
            return delivery
    return PULL


def read_topic(inputs: dict, project: str, where: str = "topic", outputs: dict | None = None) -> Topic:
    project = inputs.get("project") or project
    name = _known(inputs.get("name"), f"{where}.name")
    storage = inputs.get("messageStoragePolicy")
    out = outputs or {}
    return Topic(
        name=short_name(name),
        path=topic_path(project, name),
        project=project,
        labels=dict(inputs.get("labels") or {}),
        retention_s=(
            _seconds(inputs["messageRetentionDuration"], f"{where}.messageRetentionDuration")
            if inputs.get("messageRetentionDuration") else None
        ),
        storage_regions=tuple(sorted(storage.get("allowedPersistenceRegions") or [])) if storage else None,
        enforce_in_transit=bool(storage.get("enforceInTransit")) if storage else None,
        kms_key=inputs.get("kmsKeyName") or None,
        publisher_region=out.get("publisher_region"),
        publisher_endpoint=out.get("publisher_endpoint") or facts.GLOBAL_ENDPOINT,
        inputs=inputs,
    )


def read_subscription(inputs: dict, project: str, where: str = "subscription", outputs: dict | None = None) -> Subscription:
    project = inputs.get("project") or project
    name = _known(inputs.get("name"), f"{where}.name")
    topic = _known(inputs.get("topic"), f"{where}.topic")
    dead_letter = inputs.get("deadLetterPolicy") or {}
    retry = inputs.get("retryPolicy")
    push = inputs.get("pushConfig") or {}
    oidc = push.get("oidcToken") or {}
    expiration = None
    if "expirationPolicy" in inputs:
        ttl = (inputs["expirationPolicy"] or {}).get("ttl") or ""
        expiration = "never" if ttl == "" else _seconds(ttl, f"{where}.expirationPolicy.ttl")
    retry_backoff = {}
    for key in ("minimumBackoff", "maximumBackoff"):
        value = (retry or {}).get(key)
        retry_backoff[key] = _seconds(value, f"{where}.retryPolicy.{key}") if value else None
    out = outputs or {}
    return Subscription(
        name=short_name(name),
        path=subscription_path(project, name),
        project=project,
        topic=short_name(topic),
        topic_path=topic_path(project, topic),
        delivery_type=delivery_type(inputs),
        ordering=bool(inputs.get("enableMessageOrdering")),
        exactly_once=bool(inputs.get("enableExactlyOnceDelivery")),
        declared_ack_deadline_s=inputs.get("ackDeadlineSeconds"),
        retention_s=(
            _seconds(inputs["messageRetentionDuration"], f"{where}.messageRetentionDuration")
            if inputs.get("messageRetentionDuration") else None
        ),
        retain_acked_messages=bool(inputs.get("retainAckedMessages")),
        filter=inputs.get("filter") or None,
        labels=dict(inputs.get("labels") or {}),
        dead_letter_topic_path=(
            topic_path(project, _known(dead_letter["deadLetterTopic"], f"{where}.deadLetterPolicy.deadLetterTopic"))
            if dead_letter.get("deadLetterTopic") else None
        ),
        max_delivery_attempts=(
            int(dead_letter.get("maxDeliveryAttempts") or facts.MAX_DELIVERY_ATTEMPTS_DEFAULT) if dead_letter else None
        ),
        retry_declared=retry is not None,
        retry_min_backoff_s=retry_backoff["minimumBackoff"],
        retry_max_backoff_s=retry_backoff["maximumBackoff"],
        expiration_ttl=expiration,
        push_endpoint=push.get("pushEndpoint") or None,
        push_oidc_service_account=oidc.get("serviceAccountEmail") or None,
        push_audience=oidc.get("audience") or None,
        bigquery_table=(inputs.get("bigqueryConfig") or {}).get("table"),
        cloud_storage_bucket=(inputs.get("cloudStorageConfig") or {}).get("bucket"),
        export_configs=tuple(kind for kind, key in ((BIGQUERY, "bigqueryConfig"), (CLOUD_STORAGE, "cloudStorageConfig")) if inputs.get(key)),
        consumer_region=out.get("consumer_region"),
        consumer_endpoint=out.get("consumer_endpoint") or facts.GLOBAL_ENDPOINT,
        dead_letter_drain=out.get("dead_letter_drain"),
        inputs=inputs,
    )


def estate(plan: dict) -> Estate:
    """The plan's topics and subscriptions, read once (see the module docstring)."""
    from pubsubguard.core.plan_file import resources_of

    for key in ("gcp_project", "resources"):
        if key not in plan:
            raise PlanValueError(f"plan: missing {key!r} (make a plan with `pubsubguard plan --out FILE`)")
    project = plan["gcp_project"]
    outputs = plan.get("outputs") or {}
    # this project's program exports `topics` and `subscriptions` as mappings by name; another program's
    # outputs of those names (a list of names, say) say nothing this model reads
    ours = isinstance(outputs.get("topics"), dict) and isinstance(outputs.get("subscriptions"), dict)
    topic_outputs, subscription_outputs = (outputs["topics"], outputs["subscriptions"]) if ours else ({}, {})
    topics: dict[str, Topic] = {}
    for resource in resources_of(plan, facts.TOPIC):
        where = f"plan resource {resource['name']!r}"
        inputs = resource["inputs"]
        name = short_name(_known(inputs.get("name"), f"{where}.name"))
        topics[name] = read_topic(inputs, project, where, topic_outputs.get(name))
    subscriptions: dict[str, Subscription] = {}
    for resource in resources_of(plan, facts.SUBSCRIPTION):
        where = f"plan resource {resource['name']!r}"
        inputs = resource["inputs"]
        name = short_name(_known(inputs.get("name"), f"{where}.name"))
        subscriptions[name] = read_subscription(inputs, project, where, subscription_outputs.get(name))
    dead_letter_drains = {
        out["dead_letter_drain"]: out["dead_letter_topic"] for out in subscription_outputs.values() if out.get("dead_letter_drain")
    }
    agents = sorted({
        r["inputs"]["member"] for kind in (facts.SUBSCRIPTION_IAM_MEMBER, facts.TOPIC_IAM_MEMBER)
        for r in resources_of(plan, kind) if facts.SERVICE_AGENT_RE.fullmatch(str(r["inputs"].get("member", "")))
    })
    return Estate(
        project=project or "unknown-project",
        stack=plan.get("stack") or "unknown",
        topics=topics,
        subscriptions=subscriptions,
        probe_isolation=bool(outputs.get("probe_isolation")),
        dead_letter_drains=dead_letter_drains,
        output_names=(
            (tuple(topic_outputs), tuple(subscription_outputs)) if ours else None
        ),
        service_agent=agents[0] if agents else None,
        source=plan.get("state"),
    )


# --- The one plan loader -------------------------------------------------------------------------
def plan_from(plan_file: Path | None, stack: str | None, root: Path | None = None, state: str | Path | None = None) -> dict:
    """The plan of `--plan FILE`, of `--state FILE|URI` (a deployed stack's state read as a plan,
    `pubsubguard.core.state`; `--state` without a value: `--stack`'s checkpoint in a self-managed backend), or
    one made offline from `--stack` (default dev). `--plan` with `--stack` or `--state` is a usage error."""
    from pubsubguard.core import plan_file as plan_files
    from pubsubguard.core.project import project_root

    if plan_file is not None and state is not None:
        raise UserError("--plan and --state: give one of them (a plan declares what to deploy, a state what was deployed)")
    if plan_file is not None and stack is not None:
        raise UserError("--plan and --stack: give one of them (a plan file already names its stack)")
    if state is not None:
        from pubsubguard.core import state as states

        return states.load(state or None, stack, Path(root or project_root()))
    if plan_file is not None:
        return plan_files.load_plan(plan_file)
    from pubsubguard.core import plan as planning  # runs the program: the language host and the engine

    return planning.make_plan(stack or "dev", root)
