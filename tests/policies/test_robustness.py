"""Generated properties never crash the pack (a crashing rule blocks every deploy), and an unknown
never adds a violation: whatever a rule reports with some values unknown, it also reports once those
values are known."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pack_harness import UNKNOWN, validate_resource, validate_stack
import pubsub_facts as facts
from pubsub_rules.catalog import RULES

RESOURCE_RULES = [r for r in RULES if not r.stack]
STACK_RULES = [r for r in RULES if r.stack]
TYPES = [facts.TOPIC, facts.SUBSCRIPTION, *facts.IAM_TYPES, *facts.PROJECT_IAM_TYPES]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.just(UNKNOWN), st.sampled_from(["600s", "0s", "700s", "", "abc", "1.5s", "86400s"]),
    st.sampled_from(["orders", "projects/p/topics/orders", "goog", "allUsers", facts.PUBLISHER_ROLE,
                     "serviceAccount:service-1@gcp-sa-pubsub.iam.gserviceaccount.com", "us-east1", "http://x"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)

KEYS = ["name", "topic", "subscription", "project", "enableExactlyOnceDelivery", "enableMessageOrdering", "ackDeadlineSeconds",
        "messageRetentionDuration", "filter", "labels", "kmsKeyName", "role", "member", "members", "policyData"]
BLOCKS = {
    "pushConfig": ["pushEndpoint", "oidcToken"], "bigqueryConfig": ["table"], "cloudStorageConfig": ["bucket"],
    "deadLetterPolicy": ["deadLetterTopic", "maxDeliveryAttempts"], "expirationPolicy": ["ttl"],
    "retryPolicy": ["minimumBackoff", "maximumBackoff"], "messageStoragePolicy": ["allowedPersistenceRegions"],
}


@st.composite
def props(draw):
    result = {}
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS))):
        result[key] = draw(values)
    for block, fields in BLOCKS.items():
        if draw(st.booleans()):
            shape = draw(st.sampled_from(["dict", "list", "other"]))
            inner = {f: draw(values) for f in fields if draw(st.booleans())}
            result[block] = inner if shape == "dict" else [inner] if shape == "list" else draw(values)
    if draw(st.booleans()):
        result["labels"] = {draw(st.sampled_from([facts.CONSUMER_REGION_LABEL, facts.PUBLISHER_REGION_LABEL, "x"])): draw(values)}
    return result


def with_unknowns(value, choices):
    """`value` with some leaves replaced by UNKNOWN, `choices` an iterator of booleans."""
    if isinstance(value, dict):
        return {k: with_unknowns(v, choices) for k, v in value.items()}
    if isinstance(value, list):
        return [with_unknowns(v, choices) for v in value]
    return UNKNOWN if next(choices, False) else value


def reported(rule, type_, body) -> set[str]:
    return {rule.name} if validate_resource(rule.name, type_, body) else set()


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(type_=st.sampled_from(TYPES), body=props())
def test_resource_rules_never_crash(type_, body):
    for rule in RESOURCE_RULES:
        messages = validate_resource(rule.name, type_, body)
        assert all(isinstance(m, str) and m for m in messages)


@FAST
@given(type_=st.sampled_from(TYPES), body=props(), mask=st.lists(st.booleans(), max_size=40))
def test_unknowns_never_add_a_resource_violation(type_, body, mask):
    masked = with_unknowns(body, iter(mask))
    for rule in RESOURCE_RULES:
        assert reported(rule, type_, masked) <= reported(rule, type_, body), rule.name


@st.composite
def stacks(draw):
    count = draw(st.integers(1, 6))
    names = [f"r{i}" for i in range(count)]
    resources = []
    for name in names:
        type_ = draw(st.sampled_from(TYPES))
        body = draw(props())
        if draw(st.booleans()):  # refer to another resource of the stack by value
            body["topic"] = draw(st.sampled_from(["projects/p/topics/" + n for n in names] + names))
            if draw(st.booleans()):
                body["name"] = name
        deps = {}
        if draw(st.booleans()):
            deps[draw(st.sampled_from(["topic", "deadLetterPolicy", "subscription"]))] = draw(
                st.lists(st.sampled_from(names), max_size=2))
        resources.append({"type": type_, "name": name, "props": body, "property_dependencies": deps})
    return resources


@FAST
@given(resources=stacks(), mask=st.lists(st.booleans(), max_size=60))
def test_stack_rules_never_crash_and_unknowns_never_add_a_violation(resources, mask):
    choices = iter(mask)
    masked = [{**r, "props": with_unknowns(r["props"], choices)} for r in resources]
    for rule in STACK_RULES:
        full = {urn for urn, _ in validate_stack(rule.name, resources)}
        partial = {urn for urn, _ in validate_stack(rule.name, masked)}
        assert partial <= full, rule.name
