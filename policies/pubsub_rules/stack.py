"""Stack rules: judgements that need more than one resource (dead-letter plumbing, region pinning).

References between resources are resolved in two ways, so the rules work both on an offline plan
(where ids are known) and in a real `pulumi preview` (where a new topic's id is unknown):

1. by value: "projects/P/topics/N" or a bare "N" matches the topic whose `name` input is N (and whose
   `project`, when both are set, is P);
2. when the value is unknown, by the property's dependencies as the engine reports them
   (`propertyDependencies`, e.g. `topic` -> the Topic resource it was computed from): exactly one
   dependency of the right type resolves it.

A reference resolved by neither is "unresolved" and every rule treats it as "cannot judge": no
violation. A known reference to a topic the stack does not declare is "external".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from pubsub_rules import facts
from pubsub_rules.resources import iam_members, nested
from pubsub_rules.rule import MANDATORY, Resource, Rule
from pubsub_rules.values import UNKNOWN, as_list, enabled, get, known, resource_path_key, same_key

COLLECTIONS = {facts.TOPIC: "topics", facts.SUBSCRIPTION: "subscriptions"}


@dataclass(frozen=True)
class Target:
    """What a reference points at: stack resources it may be, its (project, name) key, if resolved."""

    resources: tuple[Resource, ...] = ()
    key: tuple[str | None, str] | None = None
    resolved: bool = False

    @property
    def external(self) -> bool:
        return self.resolved and not self.resources

    def describe(self) -> str:
        if self.resources:
            return self.resources[0].label
        return self.key[1] if self.key else "an unknown resource"


UNRESOLVED = Target()


class Stack:
    """All resources of a stack, indexed for the rules."""

    def __init__(self, resources: list[Resource]):
        self.resources = resources
        self.by_urn = {r.urn: r for r in resources}
        self.topics = [r for r in resources if r.type == facts.TOPIC]
        self.subscriptions = [r for r in resources if r.type == facts.SUBSCRIPTION]
        self.grants = [r for r in resources if r.type in facts.IAM_TYPES or r.type in facts.PROJECT_IAM_TYPES]
        self._by_name: dict[str, dict[str, list[Resource]]] = {facts.TOPIC: {}, facts.SUBSCRIPTION: {}}
        for resource in self.topics + self.subscriptions:
            name = get(resource.props, "name")
            if isinstance(name, str) and name is not UNKNOWN:
                self._by_name[resource.type].setdefault(name, []).append(resource)
        self._readers = None
        self._grants = None

    # --- references -------------------------------------------------------------------------------
    def key_of(self, resource: Resource) -> tuple[str | None, str] | None:
        name, project = get(resource.props, "name"), get(resource.props, "project")
        if not isinstance(name, str) or name is UNKNOWN:
            return None
        return (project if isinstance(project, str) and project is not UNKNOWN else None), name

    def resolve(self, value: Any, dependencies: list[str] | None, type_: str) -> Target:
        """The target of a reference `value` to a resource of `type_` (see module docstring)."""
        key = resource_path_key(value, COLLECTIONS[type_]) if isinstance(value, str) else None
        if key is not None:
            candidates = [r for r in self._by_name[type_].get(key[1], []) if same_key(self.key_of(r), key)]
            return Target(tuple(candidates), key, True)
        if value is UNKNOWN or value is None:
            deps = [self.by_urn[u] for u in dependencies or [] if u in self.by_urn and self.by_urn[u].type == type_]
            if len(deps) == 1:
                return Target((deps[0],), self.key_of(deps[0]), True)
        return UNRESOLVED

    def topic_of(self, sub: Resource) -> Target:
        return self.resolve(get(sub.props, "topic"), sub.property_dependencies.get("topic"), facts.TOPIC)

    def dead_letter_topic_of(self, sub: Resource) -> Target | None:
        """The dead-letter topic of `sub`, None without dead-lettering, UNRESOLVED when unknown."""
        policy = get(sub.props, "deadLetterPolicy")
        if policy is UNKNOWN:
            return UNRESOLVED
        policy = nested(sub.props, "deadLetterPolicy")
        if not isinstance(policy, dict) or not policy:
            return None
        value = policy.get("deadLetterTopic")
        if value is None or value == "":
            return None
        return self.resolve(value, sub.property_dependencies.get("deadLetterPolicy"), facts.TOPIC)

    @staticmethod
    def same(left: Target, right: Target) -> Any:
        """Whether two targets are the same resource: True, False, or UNKNOWN when either is unresolved."""
        if not left.resolved or not right.resolved:
            return UNKNOWN
        if left.resources and right.resources:
            return bool({r.urn for r in left.resources} & {r.urn for r in right.resources})
        return same_key(left.key, right.key)

    # --- indexes (built on first use, so each rule stays linear in the number of resources) ------
    def _reading(self) -> tuple[set[str], dict[str, list[tuple[str | None, str]]], bool]:
        if self._readers is None:
            urns: set[str] = set()
            keys: dict[str, list[tuple[str | None, str]]] = {}
            unresolved = False
            for sub in self.subscriptions:
                target = self.topic_of(sub)
                if not target.resolved:
                    unresolved = True
                urns.update(r.urn for r in target.resources)
                for key in [target.key] + [self.key_of(r) for r in target.resources]:
                    if key is not None:
                        keys.setdefault(key[1], []).append(key)
            self._readers = (urns, keys, unresolved)
        return self._readers

    def readers(self, topic: Target) -> Any:
        """Whether some subscription in the stack reads `topic`: True, False, or UNKNOWN."""
        urns, keys, unresolved = self._reading()
        if any(r.urn in urns for r in topic.resources):
            return True
        own_keys = [k for k in [topic.key] + [self.key_of(r) for r in topic.resources] if k is not None]
        if any(same_key(k, read) for k in own_keys for read in keys.get(k[1], [])):
            return True
        return UNKNOWN if unresolved or not topic.resolved else False

    def _grant_index(self):
        if self._grants is None:
            by_target: dict[tuple[str, str], list[Resource]] = {}
            anywhere: list[Resource] = []  # project-level grants and grants on an unresolved target
            for grant in self.grants:
                if grant.type in facts.PROJECT_IAM_TYPES:
                    anywhere.append(grant)
                    continue
                type_ = facts.TOPIC if grant.type in facts.TOPIC_IAM_TYPES else facts.SUBSCRIPTION
                field = "topic" if type_ == facts.TOPIC else "subscription"
                target = self.resolve(get(grant.props, field), grant.property_dependencies.get(field), type_)
                if not target.resolved:
                    anywhere.append(grant)
                    continue
                for r in target.resources:
                    by_target.setdefault((type_, "urn:" + r.urn), []).append(grant)
                for key in [target.key] + [self.key_of(r) for r in target.resources]:
                    if key is not None:
                        by_target.setdefault((type_, "name:" + key[1]), []).append(grant)
            self._grants = (by_target, anywhere)
        return self._grants

    def granted(self, target: Target, type_: str, roles: tuple[str, ...]) -> bool:
        """Whether the Pub/Sub service agent may hold one of `roles` on `target` (or its project).

        Conservative: a grant whose role, member or target is unknown counts, so an unknown never
        produces a violation.
        """
        by_target, anywhere = self._grant_index()
        field = "topic" if type_ == facts.TOPIC else "subscription"
        candidates = list(anywhere)
        for r in target.resources:
            candidates += by_target.get((type_, "urn:" + r.urn), [])
        own_keys = [k for k in [target.key] + [self.key_of(r) for r in target.resources] if k is not None]
        for key in own_keys:
            for grant in by_target.get((type_, "name:" + key[1]), []):
                grant_key = resource_path_key(get(grant.props, field), COLLECTIONS[type_])
                if grant_key is None or same_key(grant_key, key):
                    candidates.append(grant)
        for grant in candidates:
            for role, member in iam_members(grant):
                role_ok = not known(role) or role in roles
                member_ok = not known(member) or bool(facts.SERVICE_AGENT_RE.fullmatch(member))
                if role_ok and member_ok:
                    return True
        return False


def _target_of_sub(sub: Resource) -> Target:
    return Target((sub,), None, True)


# --- Rules -----------------------------------------------------------------------------------------
def _dead_letter_not_source(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None:
            continue
        if stack.same(dead_letter, stack.topic_of(sub)) is True:
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters into its own topic {dead_letter.describe()}, but the "
                "dead-letter topic must differ from the subscription's topic; use a separate dead-letter topic."
            )


def _dead_letter_has_subscription(stack: Stack, config) -> Iterator[tuple[str, str]]:
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None or not dead_letter.resolved:
            continue
        if dead_letter.external and config["allowExternalTopics"]:
            continue
        if stack.readers(dead_letter) is False:
            where = "" if dead_letter.resources else " (a topic this stack does not declare)"
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters into {dead_letter.describe()}{where}, which no "
                "subscription in the stack reads, so forwarded messages would be lost; add a subscription "
                "to the dead-letter topic."
            )


def _dead_letter_iam(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None or not dead_letter.resolved:
            continue
        missing = []
        if not stack.granted(dead_letter, facts.TOPIC, facts.PUBLISH_ROLES):
            missing.append(f"{facts.PUBLISHER_ROLE} on the dead-letter topic {dead_letter.describe()}")
        if not stack.granted(_target_of_sub(sub), facts.SUBSCRIPTION, facts.CONSUME_ROLES):
            missing.append(f"{facts.SUBSCRIBER_ROLE} on the subscription itself")
        if missing:
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters without granting the Pub/Sub service agent "
                f"(service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com) {' and '.join(missing)}, so "
                "nothing is forwarded and attempts are not counted; add those IAM members."
            )


def _region_label(resource: Resource, label: str) -> Any:
    """The pinned region from `label`: a region, UNKNOWN, or None (missing or not a region)."""
    value = get(resource.props, "labels", label)
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, str) and facts.REGION_RE.fullmatch(value) else None


def _exactly_once_pinned(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.CONSUMER_REGION_LABEL
    for sub in stack.subscriptions:
        if enabled(get(sub.props, "enableExactlyOnceDelivery")) is not True:
            continue
        if get(sub.props, "labels") is UNKNOWN:
            continue
        region = _region_label(sub, label)
        if region is None:
            yield sub.urn, (
                f"Subscription {sub.label} is exactly-once but does not declare the one region its consumers "
                f"connect to, and exactly-once holds only when subscribers use one region; set label "
                f"{label} to that region and point consumers at its locational endpoint "
                f"({facts.locational_endpoint('REGION')})."
            )
            continue
        if region is UNKNOWN:
            continue
        topic = stack.topic_of(sub)
        for candidate in topic.resources:
            allowed = as_list(get(nested(candidate.props, "messageStoragePolicy"), "allowedPersistenceRegions"))
            if known(allowed) and allowed and UNKNOWN not in allowed and region not in allowed:
                yield sub.urn, (
                    f"Subscription {sub.label} pins its exactly-once consumers to {region}, but its topic "
                    f"{candidate.label} may persist messages only in {', '.join(map(str, allowed))}; add {region} "
                    "to the topic's allowedPersistenceRegions or pin consumers to an allowed region."
                )


def _ordered_publishers_pinned(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.PUBLISHER_REGION_LABEL
    for sub in stack.subscriptions:
        if enabled(get(sub.props, "enableMessageOrdering")) is not True:
            continue
        for topic in stack.topic_of(sub).resources:
            if get(topic.props, "labels") is UNKNOWN:
                continue
            if _region_label(topic, label) is None:
                yield sub.urn, (
                    f"Subscription {sub.label} is ordered, but its topic {topic.label} does not pin its "
                    "publishers to one region, and order holds only for messages published in the same "
                    f"region; set label {label} on the topic and publish through that region's locational "
                    "endpoint."
                )


RULES = [
    Rule(
        name="dead-letter-topic-not-source",
        description="Prohibits a subscription's dead-letter topic being the subscription's own topic.",
        level=MANDATORY,
        fact="The dead-letter topic must differ from the subscription's topic.",
        unknowns="Compares by value, else by property dependencies; reports nothing when either side is unresolved.",
        check=_dead_letter_not_source,
        stack=True,
    ),
    Rule(
        name="dead-letter-topic-has-subscription",
        description="Requires every dead-letter topic to have a subscription in the stack.",
        level=MANDATORY,
        fact="A dead-letter topic needs a subscription of its own, or forwarded messages are lost.",
        unknowns=(
            "Reports nothing when the dead-letter topic is unresolved, or when a subscription whose topic "
            "is unresolved might read it."
        ),
        check=_dead_letter_has_subscription,
        stack=True,
        config_schema={
            "allowExternalTopics": {
                "type": "boolean", "default": False,
                "description": "accept dead-letter topics declared outside this stack (their subscription is elsewhere)",
            }
        },
    ),
    Rule(
        name="dead-letter-service-agent-iam",
        description=(
            "Requires the Pub/Sub service agent to be publisher on each dead-letter topic and subscriber "
            "on the dead-lettering subscription."
        ),
        level=MANDATORY,
        fact=(
            "The service agent needs roles/pubsub.publisher on the dead-letter topic and "
            "roles/pubsub.subscriber on the source subscription; without them nothing is forwarded."
        ),
        unknowns=(
            "A grant whose role, member or target is unknown counts as present; project-level grants "
            "count for every topic and subscription."
        ),
        check=_dead_letter_iam,
        stack=True,
    ),
    Rule(
        name="exactly-once-consumers-pinned",
        description=(
            f"Requires exactly-once subscriptions to pin consumers to one region (label "
            f"{facts.CONSUMER_REGION_LABEL}) that the topic's allowed persistence regions include."
        ),
        level=MANDATORY,
        fact="Exactly-once holds only when subscribers connect to one region (a locational endpoint).",
        unknowns="Reports nothing when the labels, the switch, the topic or its persistence regions are unknown.",
        check=_exactly_once_pinned,
        stack=True,
    ),
    Rule(
        name="ordered-publishers-pinned",
        description=(
            f"Requires the topic of an ordered subscription to pin its publishers to one region (label "
            f"{facts.PUBLISHER_REGION_LABEL})."
        ),
        level=MANDATORY,
        fact="Order holds per ordering key only for messages published in the same region.",
        unknowns=(
            "Reports nothing when the switch or the topic's labels are unknown, or when the topic is not "
            "in the stack (its labels are not visible)."
        ),
        check=_ordered_publishers_pinned,
        stack=True,
    ),
]

