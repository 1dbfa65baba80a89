"""The pack's view of a stack: resources as plain data, the readers rules share, and the references
between resources (which topic a subscription reads, dead-letters into, which IAM grant applies where).

Identity is as Google sees it: a topic or subscription is (project, name), the project being the
resource's `project` input or, when it sets none, its provider's project (`gcp:project` for the
default provider). References are resolved in two ways, so the rules work both on an offline plan and
in a real `pulumi preview` (where a new topic's id is unknown):

1. by value: "projects/P/topics/N" names (P, N); a bare "N" names N in the referring resource's project;
2. when the value is unknown, by the property's dependencies as the engine reports them
   (`propertyDependencies`, e.g. `topic` -> the Topic resource it was computed from): exactly one
   dependency of the right type resolves it.

A reference resolved by neither is "unresolved" and every rule treats it as "cannot judge". A known
reference to a topic the stack does not declare is "external".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

import pubsub_facts as facts
from pubsub_rules.values import (UNKNOWN, as_list, as_str, display, get, known, partial_props, plain_props,
                                 resource_path_key)

COLLECTIONS = {facts.TOPIC: "topics", facts.SUBSCRIPTION: "subscriptions"}
DELIVERY_BLOCKS = tuple((facts.DELIVERY_INPUTS[delivery], spoken) for delivery, spoken in (
    (facts.PUSH, "push"), (facts.BIGQUERY, "BigQuery"), (facts.CLOUD_STORAGE, "Cloud Storage")))


@dataclass(frozen=True)
class Resource:
    """A resource as a rule reads it: plain properties (unknowns are `values.UNKNOWN`)."""

    type: str
    name: str
    urn: str
    props: Any
    property_dependencies: Mapping[str, list[str]] = field(default_factory=dict)
    parent: str | None = None
    provider_project: str | None = None  # the project of the resource's provider, when known
    partial: Mapping[tuple, str] = field(default_factory=dict)  # values.partial_strings of its properties

    @property
    def label(self) -> str:
        return display(self.props, self.name)

    @property
    def project(self) -> Any:
        """The project the resource lives in: its `project` input, else its provider's; UNKNOWN or None."""
        value = get(self.props, "project")
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(value, str) and value:
            return value
        return self.provider_project


def provider_project(provider: Any) -> str | None:
    """The `project` a provider resource (as the SDK passes it) is configured with."""
    if provider is None:
        return None
    value = plain_props(getattr(provider, "props", None) or {}).get("project")
    return value if isinstance(value, str) and value else None


def from_policy_resource(resource) -> Resource:
    """A Resource from the SDK's PolicyResource (AnalyzeStack)."""
    parent = getattr(resource, "parent", None)
    return Resource(
        type=resource.resource_type,
        name=resource.name,
        urn=resource.urn,
        props=plain_props(resource.props),
        property_dependencies={
            key: [dep.urn for dep in deps] for key, deps in (getattr(resource, "property_dependencies", None) or {}).items()
        },
        parent=parent.urn if parent is not None else None,
        provider_project=provider_project(getattr(resource, "provider", None)),
        partial=partial_props(resource.props),
    )


# --- Readers ---------------------------------------------------------------------------------------
def block(props: Any, key: str) -> Any:
    """Whether an optional block is set: True, False (absent, null or empty) or UNKNOWN."""
    value = get(props, key)
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, list):  # some SDKs send a one-element list for a nested block
        value = value[0] if value else None
    if value is UNKNOWN:
        return UNKNOWN
    return isinstance(value, dict) and len(value) > 0


def nested(props: Any, key: str) -> Any:
    """The mapping of an optional block (first element when sent as a list), UNKNOWN, or None."""
    value = get(props, key)
    if isinstance(value, list):
        value = value[0] if value else None
    return value if value is UNKNOWN or isinstance(value, dict) else None


def iam_members(resource: Resource) -> list[tuple[Any, Any]]:
    """(role, member) pairs an IAM resource grants; roles or members may be UNKNOWN."""
    props = resource.props
    if resource.type.endswith(("IAMMember", "IamMember")):
        return [(as_str(get(props, "role")), as_str(get(props, "member")))]
    if resource.type.endswith(("IAMBinding", "IamBinding")):
        members = as_list(get(props, "members"))
        role = as_str(get(props, "role"))
        if members is UNKNOWN:
            return [(role, UNKNOWN)]
        return [(role, as_str(m)) for m in members or []]
    if resource.type.endswith(("IAMPolicy", "IamPolicy")):
        data = get(props, "policyData")
        if data is UNKNOWN:
            return [(UNKNOWN, UNKNOWN)]
        try:
            policy = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            return []
        bindings = policy.get("bindings") if isinstance(policy, dict) else None
        pairs = []
        for binding in bindings if isinstance(bindings, list) else []:
            if isinstance(binding, dict) and isinstance(binding.get("members"), list):
                role = binding.get("role") if isinstance(binding.get("role"), str) else None
                pairs += [(role, m) for m in binding["members"] if isinstance(m, str)]
        return pairs
    return []


def member_forms(resource: Resource) -> dict[int, str]:
    """{index in `iam_members`: member} of the members built from an unknown and a known part."""
    if resource.type.endswith(("IAMMember", "IamMember")):
        form = resource.partial.get(("member",))
        return {0: form} if form is not None else {}
    if resource.type.endswith(("IAMBinding", "IamBinding")):
        return {path[1]: form for path, form in resource.partial.items() if len(path) == 2 and path[0] == "members"}
    return {}


def reads_unknown(props: Any, path: str) -> bool:
    """Whether the property at a dotted `path` (or a step on the way to it) is unknown."""
    value = props
    for key in path.split("."):
        if value is UNKNOWN:
            return True
        if isinstance(value, list):
            value = value[0] if value else None
        if not isinstance(value, dict):
            return False
        value = value.get(key)
    return value is UNKNOWN


# --- References ------------------------------------------------------------------------------------
Key = tuple  # (project or None, name)


@dataclass(frozen=True)
class Target:
    """What a reference points at: stack resources it may be, its (project, name) key, if resolved."""

    resources: tuple[Resource, ...] = ()
    key: Key | None = None
    resolved: bool = False

    @property
    def external(self) -> bool:
        return self.resolved and not self.resources

    def describe(self) -> str:
        if self.resources:
            return self.resources[0].label
        if self.key:
            return f"{self.key[1]} (project {self.key[0]})" if self.key[0] else self.key[1]
        return "an unknown resource"


UNRESOLVED = Target()


def keys_match(left: Key | None, right: Key | None) -> bool:
    """Two (project, name) keys may name the same resource; a missing project matches any project."""
    if left is None or right is None or left[1] != right[1]:
        return False
    return left[0] is None or right[0] is None or left[0] == right[0]


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

    @staticmethod
    def key_of(resource: Resource) -> Key | None:
        name = get(resource.props, "name")
        if not isinstance(name, str) or name is UNKNOWN:
            return None
        project = resource.project
        return (project if isinstance(project, str) else None), name

    def resolve(self, value: Any, dependencies: list[str] | None, type_: str, referrer: Resource | None = None) -> Target:
        """The target of a reference `value` to a resource of `type_` (see module docstring)."""
        key = resource_path_key(value, COLLECTIONS[type_]) if isinstance(value, str) else None
        if key is not None:
            if key[0] is None and referrer is not None and isinstance(referrer.project, str):
                key = (referrer.project, key[1])
            candidates = [r for r in self._by_name[type_].get(key[1], []) if keys_match(self.key_of(r), key)]
            return Target(tuple(candidates), key, True)
        if value is UNKNOWN or value is None:
            deps = [self.by_urn[u] for u in dependencies or [] if u in self.by_urn and self.by_urn[u].type == type_]
            if len(deps) == 1:
                return Target((deps[0],), self.key_of(deps[0]), True)
        return UNRESOLVED

    def topic_of(self, sub: Resource) -> Target:
        return self.resolve(get(sub.props, "topic"), sub.property_dependencies.get("topic"), facts.TOPIC, sub)

    def target_of_grant(self, grant: Resource) -> tuple[str, Target]:
        """(resource type, target) of a topic or subscription IAM resource."""
        type_ = facts.TOPIC if grant.type in facts.TOPIC_IAM_TYPES else facts.SUBSCRIPTION
        field_name = "topic" if type_ == facts.TOPIC else "subscription"
        return type_, self.resolve(get(grant.props, field_name), grant.property_dependencies.get(field_name), type_, grant)

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
        return self.resolve(value, sub.property_dependencies.get("deadLetterPolicy"), facts.TOPIC, sub)

    @staticmethod
    def same(left: Target, right: Target) -> Any:
        """Whether two references are certainly the same resource: True, False, or UNKNOWN."""
        if not left.resolved or not right.resolved:
            return UNKNOWN
        if left.resources and right.resources:
            shared = {r.urn for r in left.resources} & {r.urn for r in right.resources}
            if not shared:
                return False
            return True if len(left.resources) == 1 and len(right.resources) == 1 else UNKNOWN
        if left.key is None or right.key is None:
            return UNKNOWN
        if left.key[1] != right.key[1]:
            return False
        if left.key[0] is not None and right.key[0] is not None:
            return left.key[0] == right.key[0]
        return UNKNOWN

    # --- indexes (built on first use, so each rule stays linear in the number of resources) ------
    def _reading(self) -> tuple[set[str], dict[str, list[Key]], bool]:
        if self._readers is None:
            urns: set[str] = set()
            keys: dict[str, list[Key]] = {}
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
        if any(keys_match(k, read) for k in own_keys for read in keys.get(k[1], [])):
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
                type_, target = self.target_of_grant(grant)
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

    def grants_on(self, target: Target, type_: str) -> list[Resource]:
        """IAM resources that may apply to `target`: on it, on its project, or on an unresolved target."""
        by_target, anywhere = self._grant_index()
        found = {id(g): g for g in anywhere}
        for r in target.resources:
            for grant in by_target.get((type_, "urn:" + r.urn), []):
                found[id(grant)] = grant
        own_keys = [k for k in [target.key] + [self.key_of(r) for r in target.resources] if k is not None]
        for key in own_keys:
            for grant in by_target.get((type_, "name:" + key[1]), []):
                _, grant_target = self.target_of_grant(grant)
                if grant_target.key is None or keys_match(grant_target.key, key):
                    found[id(grant)] = grant
        return list(found.values())

    def granted(self, target: Target, type_: str, roles: tuple[str, ...], member_ok) -> tuple[Any, list[str]]:
        """Whether a grant gives one of `roles` on `target` (or its project) to a member `member_ok`
        accepts, and what blocks the answer: (True, []) a known grant does; (UNKNOWN, blockers) only grants
        with an unknown role, member or target might; (False, []) none can. `member_ok` gets a known member,
        a member built from an unknown and a known part (`values.partial_strings`: its known parts may
        decide), or UNKNOWN, and answers True, False or UNKNOWN. An unknown member that comes only from
        service accounts the stack creates (its property dependencies) is not the Pub/Sub service agent:
        it cannot count. A blocker is `PROPERTY@URN`, the unknown property of the grant that blocked."""
        blockers: list[str] = []
        exact = {id(g) for g in self.grants_on_exactly(target, type_)}
        for grant in self.grants_on(target, type_):
            forms = member_forms(grant)
            for index, (role, member) in enumerate(iam_members(grant)):
                if known(role) and role not in roles:
                    continue
                if not known(member) and self.created_accounts_only(grant):
                    continue
                ok = member_ok(member if known(member) else forms.get(index, UNKNOWN))
                if ok is False:
                    continue
                if ok is True and known(role) and id(grant) in exact:
                    return True, []
                blockers += [f"{path}@{grant.urn}" for path in self.unknown_grant_properties(grant, role, ok)]
        return (UNKNOWN, sorted(set(blockers))) if blockers else (False, [])

    def unknown_grant_properties(self, grant: Resource, role: Any, member_verdict: Any) -> list[str]:
        """The properties of `grant` that keep it from deciding (its target, role or members)."""
        paths = []
        _, anywhere = self._grant_index()
        if grant.type not in facts.PROJECT_IAM_TYPES and any(g is grant for g in anywhere):
            paths.append("topic" if grant.type in facts.TOPIC_IAM_TYPES else "subscription")
        if not known(role):
            paths.append("policyData" if grant.type.endswith(("IAMPolicy", "IamPolicy")) else "role")
        if member_verdict is UNKNOWN:
            paths.append("policyData" if grant.type.endswith(("IAMPolicy", "IamPolicy")) else
                         "members" if grant.type.endswith(("IAMBinding", "IamBinding")) else "member")
        return list(dict.fromkeys(paths)) or ["member"]

    def grants_on_exactly(self, target: Target, type_: str) -> list[Resource]:
        """The grants of `grants_on` whose target is resolved (or that are project-level)."""
        _, anywhere = self._grant_index()
        unresolved = {id(g) for g in anywhere if g.type not in facts.PROJECT_IAM_TYPES}
        return [g for g in self.grants_on(target, type_) if id(g) not in unresolved]

    def created_accounts_only(self, grant: Resource) -> bool:
        """Whether the grant's members come only from service accounts this stack creates (by property
        dependencies): a created account's email (`ACCOUNT_ID@PROJECT.iam.gserviceaccount.com`) and
        anything computed from it alone is never the Pub/Sub service agent."""
        deps = [u for key in ("member", "members", "policyData") for u in grant.property_dependencies.get(key, [])]
        return bool(deps) and all(u in self.by_urn and self.by_urn[u].type == facts.SERVICE_ACCOUNT for u in deps)


def target_of_sub(sub: Resource) -> Target:
    return Target((sub,), Stack.key_of(sub), True)
