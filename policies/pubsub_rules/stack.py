"""Stack rules: judgements that need more than one resource (dead-letter plumbing, IAM, region pinning).
Each check is a function with its rule's record (`@rule(...)`) right above it.

References between resources are resolved by `pubsub_rules.model.Stack` (by value, else by property
dependencies); an unresolved reference is "cannot judge" and produces no violation.
"""

from __future__ import annotations

from typing import Any, Iterator

import pubsub_facts as facts
from pubsub_rules.model import (Resource, Stack, block, iam_members, member_forms, nested, reads_unknown,
                                target_of_sub)
from pubsub_rules.rule import ADVISORY, MANDATORY, Rules, Undecided
from pubsub_rules.values import (STRING_SENTINEL, UNKNOWN, as_bool, as_list, as_str, could_be, enabled, get, known,
                                 known_parts)


SUB = (facts.SUBSCRIPTION,)
GET_PROJECT = "gcp:organizations/getProject:getProject"
DEAD_LETTER_READS = ("topic", "deadLetterPolicy", "deadLetterPolicy.deadLetterTopic")

rule = Rules(stack=True, types=SUB)  # each rule registered above its check; RULES at the end


# --- Rules -----------------------------------------------------------------------------------------
def _unresolved(sub: Resource, *paths: str) -> Undecided:
    """Cannot judge `sub`: the listed references (those of `paths` that are unknown) did not resolve."""
    unknown = tuple(p for p in paths if reads_unknown(sub.props, p))
    return Undecided(unknown or paths)


@rule(
    name="dead-letter-topic-not-source",
    description="Prohibits a subscription's dead-letter topic being the subscription's own topic.",
    level=MANDATORY,
    fact="The dead-letter topic must differ from the subscription's topic (same project and name).",
    unknowns=(
        "Compares (project, name) by value, else by property dependencies; reports nothing when either side "
        "is unresolved or could be either of two topics."
    ),
    reads=DEAD_LETTER_READS,
    exact_unknowns=True,
)
def _dead_letter_not_source(stack: Stack, _config) -> Iterator[tuple[str, Any]]:
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None:
            continue  # no dead-lettering: the rule does not apply
        same = stack.same(dead_letter, stack.topic_of(sub))
        if same is True:
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters into its own topic {dead_letter.describe()}, but the "
                "dead-letter topic must differ from the subscription's topic; use a separate dead-letter topic."
            )
        elif same is not False:
            yield sub.urn, _unresolved(sub, "topic", "deadLetterPolicy.deadLetterTopic")


@rule(
    name="dead-letter-topic-has-subscription",
    description="Requires every dead-letter topic declared in the stack to have a subscription in the stack.",
    level=MANDATORY,
    fact="A dead-letter topic needs a subscription of its own, or forwarded messages are lost.",
    unknowns=(
        "Cannot judge when the dead-letter topic is unresolved, when a subscription whose topic is "
        "unresolved might read it, or (by default) when it is declared outside the stack."
    ),
    reads=DEAD_LETTER_READS,
    exact_unknowns=True,
    config_schema={
        "allowExternalTopics": {
            "type": "boolean", "default": True,
            "description": (
                "treat a dead-letter topic declared outside this stack (another stack or project) as cannot "
                "judge; false requires every dead-letter topic and its subscription in this stack"
            ),
        }
    },
)
def _dead_letter_has_subscription(stack: Stack, config) -> Iterator[tuple[str, Any]]:
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None:
            continue
        if not dead_letter.resolved:
            yield sub.urn, _unresolved(sub, "deadLetterPolicy.deadLetterTopic")
            continue
        if dead_letter.external and config["allowExternalTopics"]:  # declared in another stack or project: its
            yield sub.urn, Undecided(("deadLetterPolicy.deadLetterTopic",))  # subscriptions are not visible here
            continue
        readers = stack.readers(dead_letter)
        if readers is UNKNOWN:
            unresolved = [s.urn for s in stack.subscriptions if not stack.topic_of(s).resolved]
            yield sub.urn, Undecided(tuple(f"topic of {urn.rsplit('::', 1)[-1]}" for urn in unresolved[:3])
                                     or ("deadLetterPolicy.deadLetterTopic",))
        if readers is False:
            where = "" if dead_letter.resources else " (a topic this stack does not declare)"
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters into {dead_letter.describe()}{where}, which no "
                "subscription in the stack reads, so forwarded messages would be lost; add a subscription "
                "to the dead-letter topic."
            )


def _agent_check(sub: Resource, numbers: dict) -> Any:
    """Which members count as the Pub/Sub service agent for `sub`: the agent of the subscription's own
    project when its number is configured, else any Pub/Sub service agent. `member_ok` answers True,
    False or UNKNOWN for a known member, an unknown one, or one built from an unknown and a known part
    (`serviceAccount:service-{getProject().number}@gcp-sa-pubsub...`, a pubsub.googleapis.com service
    identity's email: its known parts show the agent's form, the project number unknown)."""
    project = sub.project
    own = numbers.get(project) if isinstance(project, str) else None

    def member_ok(member: Any) -> Any:
        if member is UNKNOWN:
            return UNKNOWN
        parts = member.split(STRING_SENTINEL)
        if len(parts) == 1:
            match = facts.SERVICE_AGENT_RE.fullmatch(member)
            return bool(match) and (own is None or match.group(1) == str(own))
        if member == facts.pubsub_service_agent(STRING_SENTINEL):
            return True if own is None else UNKNOWN  # an agent; of its own project, only the number can tell
        return UNKNOWN if could_be(member, facts.pubsub_service_agent(str(own or 0))) else False

    return member_ok, own


@rule(
    name="dead-letter-service-agent-iam",
    description=(
        "Requires the Pub/Sub service agent of the subscription's project to be publisher on each "
        "dead-letter topic and subscriber on the dead-lettering subscription."
    ),
    level=MANDATORY,
    fact=(
        "The service agent (service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com of the "
        "subscription's project) needs roles/pubsub.publisher on the dead-letter topic and "
        "roles/pubsub.subscriber on the source subscription; without them nothing is forwarded."
    ),
    unknowns=(
        "A missing grant decides alone (no grant of roles/pubsub.subscriber on the subscription at all is a "
        "violation, whatever else is unknown). A member whose known parts have the service agent's form "
        "(serviceAccount:service-<unknown>@gcp-sa-pubsub.iam.gserviceaccount.com: built from getProject()'s "
        "number or a pubsub.googleapis.com ServiceIdentity's email) is the agent; a grant whose role, target "
        "or member is otherwise unknown could be the one, so the rule is not judged and names that grant's "
        "properties. Project-level grants count for every topic and subscription; without projectNumbers any "
        "Pub/Sub service agent counts."
    ),
    reads=DEAD_LETTER_READS,
    exact_unknowns=True,
    config_schema={
        "projectNumbers": {
            "type": "object", "default": {},
            "description": (
                "project id -> project number, so that only the service agent of the subscription's own "
                "project counts (pubsubguard check fills it from --invoke-results getProject answers)"
            ),
            # how: each given getProject result's projectId (else the stack's project) -> its number
            "x-pubsubguard-from-invokes": {"token": GET_PROJECT, "key": "projectId", "value": "number"},
        }
    },
)
def _dead_letter_iam(stack: Stack, config) -> Iterator[tuple[str, Any]]:
    numbers = config.get("projectNumbers") or {}
    for sub in stack.subscriptions:
        dead_letter = stack.dead_letter_topic_of(sub)
        if dead_letter is None:
            continue
        member_ok, own = _agent_check(sub, numbers)
        agent = (f"serviceAccount:service-{own}@gcp-sa-pubsub.iam.gserviceaccount.com" if own else
                 "service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com of the subscription's project")
        missing, blockers = [], []
        if dead_letter.resolved:
            publish, publish_blockers = stack.granted(dead_letter, facts.TOPIC, facts.PUBLISH_ROLES, member_ok)
        else:  # which topic is unknown: only the subscriber grant can still decide
            publish, publish_blockers = UNKNOWN, list(_unresolved(sub, "deadLetterPolicy.deadLetterTopic").paths)
        consume, consume_blockers = stack.granted(target_of_sub(sub), facts.SUBSCRIPTION, facts.CONSUME_ROLES,
                                                  member_ok)
        if publish is False:
            missing.append(f"{facts.PUBLISHER_ROLE} on the dead-letter topic {dead_letter.describe()}")
        if consume is False:
            missing.append(f"{facts.SUBSCRIBER_ROLE} on the subscription itself")
        blockers = (publish_blockers if publish is UNKNOWN else []) + (consume_blockers if consume is UNKNOWN else [])
        if missing:
            yield sub.urn, (
                f"Subscription {sub.label} dead-letters without granting the Pub/Sub service agent ({agent}) "
                f"{' and '.join(missing)}, so nothing is forwarded and attempts are not counted; add those IAM members."
            )
        elif blockers:
            yield sub.urn, Undecided(tuple(dict.fromkeys(blockers)))


def _region_label(resource: Resource, label: str) -> Any:
    """The pinned region from `label`: a region, UNKNOWN, or None (missing or not a region)."""
    value = get(resource.props, "labels", label)
    if value is UNKNOWN:
        return UNKNOWN
    return value if facts.is_region(value) else None


def _declared_region(resource: Resource, label: str) -> Any:
    """The label's value: a string, UNKNOWN (labels or value unknown), or None (no label)."""
    labels = get(resource.props, "labels")
    if labels is UNKNOWN:
        return UNKNOWN
    value = get(labels, label) if isinstance(labels, dict) else None
    return value if value is UNKNOWN or isinstance(value, str) else None


def _persistence(topic: Resource) -> tuple[Any, Any]:
    """(allowed persistence regions, enforce in transit) of a topic's storage policy."""
    policy = nested(topic.props, "messageStoragePolicy")
    allowed = as_list(get(policy, "allowedPersistenceRegions")) if isinstance(policy, dict) else None
    enforce = as_bool(get(policy, "enforceInTransit")) if isinstance(policy, dict) else None
    return allowed, enforce


def _excludes(allowed: Any, region: str) -> bool:
    """A known, non-empty list of allowed persistence regions without `region`."""
    return known(allowed) and bool(allowed) and UNKNOWN not in allowed and region not in allowed


def _exactly_once_subs(stack: Stack):
    for sub in stack.subscriptions:
        if enabled(get(sub.props, "enableExactlyOnceDelivery")) is True:
            yield sub, _declared_region(sub, facts.CONSUMER_REGION_LABEL)


@rule(
    name="exactly-once-consumers-pinned",
    description=(
        f"Prohibits an exactly-once subscription whose label {facts.CONSUMER_REGION_LABEL} declares no single "
        "region or a region outside its topic's allowed persistence regions."
    ),
    level=MANDATORY,
    fact="Exactly-once holds only when subscribers connect to one region (a locational endpoint).",
    unknowns="Reports nothing when the label, the switch, the topic or its persistence regions are unknown.",
    reads=("enableExactlyOnceDelivery", "labels"),
)
def _exactly_once_pinned(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.CONSUMER_REGION_LABEL
    for sub, region in _exactly_once_subs(stack):
        if region is None or region is UNKNOWN:
            continue  # nothing declared: the advisory rule says so
        if not facts.is_region(region):
            yield sub.urn, (
                f"Subscription {sub.label} is exactly-once and its label {label} declares {region!r}, which is not "
                "one region, but exactly-once holds only when subscribers connect to one region; set the label to "
                f"that region and point consumers at its locational endpoint ({facts.locational_endpoint('REGION')})."
            )
            continue
        for topic in stack.topic_of(sub).resources:
            allowed, _ = _persistence(topic)
            if _excludes(allowed, region):
                yield sub.urn, (
                    f"Subscription {sub.label} pins its exactly-once consumers to {region}, but its topic "
                    f"{topic.label} may persist messages only in {', '.join(map(str, allowed))}; add {region} "
                    "to the topic's allowedPersistenceRegions or pin consumers to an allowed region."
                )


@rule(
    name="exactly-once-consumers-pin-declared",
    description=(
        f"Requires exactly-once subscriptions to declare their consumers' region (label "
        f"{facts.CONSUMER_REGION_LABEL}) so pinning can be verified (advisory)."
    ),
    level=ADVISORY,
    fact="Exactly-once holds only when subscribers connect to one region (a locational endpoint).",
    unknowns="Reports nothing when the labels or the switch are unknown.",
    reads=("enableExactlyOnceDelivery", "labels"),
)
def _exactly_once_pin_declared(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.CONSUMER_REGION_LABEL
    for sub, region in _exactly_once_subs(stack):
        if region is None:
            yield sub.urn, (
                f"Subscription {sub.label} is exactly-once, which holds only when subscribers connect to one "
                f"region; cannot verify region pinning: declare label {label} with the region whose locational "
                f"endpoint ({facts.locational_endpoint('REGION')}) its consumers use."
            )


def _ordered_topics(stack: Stack):
    seen = set()
    for sub in stack.subscriptions:
        if enabled(get(sub.props, "enableMessageOrdering")) is not True:
            continue
        for topic in stack.topic_of(sub).resources:
            if topic.urn not in seen:
                seen.add(topic.urn)
                yield sub, topic, _declared_region(topic, facts.PUBLISHER_REGION_LABEL)


@rule(
    name="ordered-publishers-pinned",
    description=(
        f"Prohibits a topic of an ordered subscription whose label {facts.PUBLISHER_REGION_LABEL} declares no "
        "single region, or a region its enforced storage policy excludes."
    ),
    level=MANDATORY,
    fact="Order holds per ordering key only for messages published in the same region.",
    unknowns=(
        "Reports nothing when the switch or the topic's labels are unknown, or when the topic is not "
        "in the stack (its labels are not visible)."
    ),
    reads=("enableMessageOrdering",),
)
def _ordered_publishers_pinned(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.PUBLISHER_REGION_LABEL
    for sub, topic, region in _ordered_topics(stack):
        if region is None or region is UNKNOWN:
            continue
        if not facts.is_region(region):
            yield sub.urn, (
                f"Subscription {sub.label} is ordered, but its topic {topic.label} declares publishers in {region!r} "
                f"(label {label}), which is not one region, and order holds only for messages published in the "
                "same region; set the label to one region and publish through its locational endpoint."
            )
            continue
        allowed, enforce = _persistence(topic)
        if enforce is True and _excludes(allowed, region):
            yield sub.urn, (
                f"Subscription {sub.label} is ordered and its topic {topic.label} pins publishers to {region}, but "
                f"the topic enforces in-transit storage in {', '.join(map(str, allowed))} only, so those publishes "
                "are rejected; pin publishers to an allowed region or add it to allowedPersistenceRegions."
            )


@rule(
    name="ordered-publishers-pin-declared",
    description=(
        f"Requires the topic of an ordered subscription to declare its publishers' region (label "
        f"{facts.PUBLISHER_REGION_LABEL}) so pinning can be verified (advisory)."
    ),
    level=ADVISORY,
    fact="Order holds per ordering key only for messages published in the same region.",
    unknowns="Reports nothing when the switch or the topic's labels are unknown, or the topic is not in the stack.",
    reads=("enableMessageOrdering",),
)
def _ordered_publishers_pin_declared(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    label = facts.PUBLISHER_REGION_LABEL
    for sub, topic, region in _ordered_topics(stack):
        if region is None:
            yield sub.urn, (
                f"Subscription {sub.label} is ordered, and order holds only for messages published in the same "
                f"region; cannot verify region pinning: declare label {label} on its topic {topic.label} with the "
                "region whose locational endpoint its publishers use."
            )


@rule(
    name="iam-authoritative-conflict",
    description=(
        "Prohibits an authoritative IAMPolicy together with another IAM resource on the same topic or "
        "subscription, and an IAMMember for a role an IAMBinding on it sets."
    ),
    level=MANDATORY,
    fact=(
        "IAMPolicy replaces the whole policy and IAMBinding all members of its role; with other IAM "
        "resources on the same target they overwrite each other on every update (provider docs)."
    ),
    unknowns="Groups grants by resolved target only; an unresolved target or unknown role is not judged.",
    types=facts.IAM_TYPES,
    reads=("topic", "subscription", "role"),
    exact_unknowns=True,
)
def _iam_conflicts(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    groups: dict[str, list[Resource]] = {}
    for grant in stack.grants:
        if grant.type in facts.PROJECT_IAM_TYPES:
            continue
        type_, target = stack.target_of_grant(grant)
        if not target.resolved:
            field_name = "topic" if type_ == facts.TOPIC else "subscription"
            yield grant.urn, Undecided((field_name,))
            continue
        if target.resources:
            identity = "urn:" + target.resources[0].urn if len(target.resources) == 1 else None
        else:
            identity = f"key:{type_}:{target.key}" if target.key and target.key[0] else None
        if identity:
            groups.setdefault(identity, []).append(grant)
    for grants in groups.values():
        policies = [g for g in grants if g.type in facts.IAM_POLICY_TYPES]
        others = [g for g in grants if g.type not in facts.IAM_POLICY_TYPES]
        _, target = stack.target_of_grant(grants[0])
        for policy in policies:
            for other in others + [p for p in policies if p is not policy][:1]:
                yield policy.urn, (
                    f"IAM policy {policy.name} is authoritative for {target.describe()} and {other.name} "
                    f"({other.type.split(':')[-1]}) also sets IAM on it, so each update overwrites the other; "
                    "keep the IAMPolicy alone or use only IAMBinding/IAMMember resources."
                )
        bindings = {}
        for binding in (g for g in others if g.type.endswith("IAMBinding")):
            role = as_str(get(binding.props, "role"))
            if known(role):
                bindings.setdefault(role, []).append(binding)
        for member in (g for g in others if g.type.endswith("IAMMember")):
            role = as_str(get(member.props, "role"))
            for binding in bindings.get(role, []) if known(role) else []:
                yield member.urn, (
                    f"IAM member {member.name} grants {role} on {target.describe()}, which IAM binding "
                    f"{binding.name} sets authoritatively, so they overwrite each other; add the member to the "
                    "binding's members instead."
                )


@rule(
    name="export-service-agent-access",
    description=(
        "Requires export subscriptions without a service account to have the Pub/Sub service agent's "
        "write access visible in the stack (advisory)."
    ),
    level=ADVISORY,
    fact=(
        "BigQuery and Cloud Storage subscriptions write as the Pub/Sub service agent unless they set "
        "service_account_email; it needs write access to the table or bucket."
    ),
    unknowns="A grant whose member is unknown counts; an unknown serviceAccountEmail counts as set.",
    reads=("bigqueryConfig.serviceAccountEmail", "cloudStorageConfig.serviceAccountEmail"),
)
def _export_agent_access(stack: Stack, _config) -> Iterator[tuple[str, str]]:
    grants = [r for r in stack.resources if r.type in facts.EXPORT_GRANT_TYPES or r.type in facts.PROJECT_IAM_TYPES]
    agent_may_write = any(
        not known(member) or facts.SERVICE_AGENT_RE.fullmatch(member)
        for grant in grants for _, member in iam_members(grant)
    )
    for sub in stack.subscriptions:
        for key, label, grant in (("bigqueryConfig", "BigQuery table", "roles/bigquery.dataEditor on the table"),
                                  ("cloudStorageConfig", "Cloud Storage bucket",
                                   "roles/storage.objectCreator and roles/storage.legacyBucketReader on the bucket")):
            config = nested(sub.props, key)
            if not isinstance(config, dict) or block(sub.props, key) is not True:
                continue
            account = get(config, "serviceAccountEmail")
            if account is UNKNOWN or (isinstance(account, str) and account) or agent_may_write:
                continue
            yield sub.urn, (
                f"Subscription {sub.label} exports to a {label} as the Pub/Sub service agent (no "
                f"serviceAccountEmail), and this stack grants that agent nothing there; make sure "
                f"service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com has {grant}, or set "
                f"{key}.serviceAccountEmail."
            )


@rule(
    name="push-endpoint-https",
    description="Requires push endpoints to be https:// URLs.",
    level=MANDATORY,
    fact="Push endpoints are public HTTPS URLs.",
    unknowns=(
        "An endpoint unknown until deploy is judged by its known beginning: built from a Cloud Run or Cloud "
        "Functions URL output (uri, statuses[].url, url, serviceConfig.uri, httpsTriggerUrl), which is "
        "https:// by its documented form, it holds; starting with http:// (or another scheme) it is violated; "
        "any other unknown endpoint (a service's name, an autonamed value) is not judged. Under `pulumi "
        "preview` an interpolated unknown is wholly unknown: not judged."
    ),
    reads=("pushConfig.pushEndpoint",),
    exact_unknowns=True,
)
def _push_https(stack: Stack, _config) -> Iterator[tuple[str, Any]]:
    for sub in stack.subscriptions:
        push = nested(sub.props, "pushConfig")
        if push is UNKNOWN:
            yield sub.urn, Undecided(("pushConfig",))
            continue
        endpoint = as_str(get(push, "pushEndpoint")) if isinstance(push, dict) else None
        if endpoint is None:
            continue  # a pull subscription: the rule does not apply
        if known(endpoint):
            if not endpoint.lower().startswith(facts.HTTPS_SCHEME):
                yield sub.urn, (
                    f"Subscription {sub.label} pushes to {endpoint!r}, but Pub/Sub push endpoints must be public "
                    "HTTPS URLs; use an https:// endpoint."
                )
            continue
        # Unknown until deploy: its known beginning may still decide (a Cloud Run or Cloud Functions URL
        # output is "https://" + <unknown> by its documented form; "http://" + <unknown> never is HTTPS).
        parts = known_parts(sub.partial, "pushConfig", "pushEndpoint")
        head = parts[0].lower() if parts else ""
        if head.startswith(facts.HTTPS_SCHEME):
            continue
        if "://" in head or (head and not facts.HTTPS_SCHEME.startswith(head)):
            shown = "<unknown>".join(parts)
            yield sub.urn, (
                f"Subscription {sub.label} pushes to {shown!r} (a part unknown until deploy), but Pub/Sub push "
                "endpoints must be public HTTPS URLs; use an https:// endpoint (a Cloud Run service's uri)."
            )
            continue
        yield sub.urn, Undecided(("pushConfig.pushEndpoint",))


def _may_be_public(form: str | None) -> bool:
    """Whether an unknown member could be public: wholly unknown, or built so that its known parts fit
    allUsers or allAuthenticatedUsers."""
    return form is None or any(could_be(form, member) for member in facts.PUBLIC_MEMBERS)


@rule(
    name="no-public-pubsub-iam",
    description="Prohibits granting any role on a Pub/Sub topic or subscription to allUsers or allAuthenticatedUsers.",
    level=MANDATORY,
    fact="allUsers / allAuthenticatedUsers make a topic or subscription public.",
    unknowns="Judges known members; an unknown member computed only from service accounts the stack creates is "
              "not public, nor one whose known parts cannot be allUsers or allAuthenticatedUsers "
              "(serviceAccount:service-<unknown>@gcp-sa-pubsub.iam.gserviceaccount.com); any other unknown "
              "member or policyData is not judged.",
    types=facts.IAM_TYPES,
    reads=("member", "members", "policyData"),
    exact_unknowns=True,
)
def _public_iam(stack: Stack, _config) -> Iterator[tuple[str, Any]]:
    for grant in (r for r in stack.resources if r.type in facts.IAM_TYPES):
        members, forms = [m for _, m in iam_members(grant)], member_forms(grant)
        public = sorted({m for m in members if known(m) and m in facts.PUBLIC_MEMBERS})
        if public:
            target = as_str(get(grant.props, "topic" if grant.type in facts.TOPIC_IAM_TYPES else "subscription"))
            where = f" on {target}" if known(target) else ""
            yield grant.urn, (
                f"IAM resource {grant.name} grants{where} to {' and '.join(public)}, which opens the Pub/Sub "
                "resource to anyone; grant to specific principals instead."
            )
        elif any(not known(m) and _may_be_public(forms.get(i)) for i, m in enumerate(members)) \
                and not stack.created_accounts_only(grant):
            yield grant.urn, Undecided(tuple(p for p in ("member", "members", "policyData")
                                             if reads_unknown(grant.props, p)) or ("member",))


RULES = rule.all
