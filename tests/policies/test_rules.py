"""Each rule through its SDK policy's `validate`: a violating and a passing case, unknowns, config."""

from __future__ import annotations

import pytest

from pack_harness import (
    AGENT,
    PROJECT,
    UNKNOWN,
    cannot_judge,
    check,
    dead_letter,
    dead_letter_estate,
    sub,
    sub_grant,
    topic,
    topic_grant,
    validate_stack,
)
import pubsub_facts as facts
from pubsub_rules.catalog import BY_NAME, RULES

PUSH = {"pushEndpoint": "https://orders.example.com/push", "oidcToken": {"serviceAccountEmail": "p@x.iam.gserviceaccount.com"}}
BIGQUERY = {"table": "p.d.t"}
STORAGE = {"bucket": "b"}
PINNED = {"labels": {facts.CONSUMER_REGION_LABEL: "us-east1"}}
PUBLISHERS = {"labels": {facts.PUBLISHER_REGION_LABEL: "us-east1"}}
IAM_MEMBER = facts.TOPIC_IAM_MEMBER

# rule -> (violating resources, passing resources)
CASES = {
    "no-exactly-once-on-push": (
        [sub("s", enableExactlyOnceDelivery=True, pushConfig=PUSH)],
        [sub("s", enableExactlyOnceDelivery=True), sub("t", enableExactlyOnceDelivery=False, pushConfig=PUSH)],
    ),
    "no-exactly-once-on-export": (
        [sub("s", enableExactlyOnceDelivery=True, bigqueryConfig=BIGQUERY),
         sub("t", enableExactlyOnceDelivery=True, cloudStorageConfig=STORAGE)],
        [sub("s", bigqueryConfig=BIGQUERY), sub("t", enableExactlyOnceDelivery=True)],
    ),
    "single-delivery-type": (
        [sub("s", pushConfig=PUSH, bigqueryConfig=BIGQUERY)],
        [sub("s", pushConfig=PUSH), sub("t", cloudStorageConfig=STORAGE, bigqueryConfig=None)],
    ),
    "max-delivery-attempts-in-range": (
        [sub("s", deadLetterPolicy=dead_letter(attempts=4)), sub("t", deadLetterPolicy=dead_letter(attempts=101))],
        [sub("s", deadLetterPolicy=dead_letter(attempts=5)), sub("t", deadLetterPolicy=dead_letter(attempts=100)),
         sub("u", deadLetterPolicy=dead_letter(attempts=0))],
    ),
    "ack-deadline-in-range": (
        [sub("s", ackDeadlineSeconds=9), sub("t", ackDeadlineSeconds=601)],
        [sub("s", ackDeadlineSeconds=10), sub("t", ackDeadlineSeconds=600), sub("u")],
    ),
    "retention-in-range": (
        [sub("s", messageRetentionDuration="599s"), topic("t", messageRetentionDuration="2678401s")],
        [sub("s", messageRetentionDuration="600s"), topic("t", messageRetentionDuration="2678400s")],
    ),
    "expiration-ttl-at-least-one-day": (
        [sub("s", expirationPolicy={"ttl": "86399s"})],
        [sub("s", expirationPolicy={"ttl": ""}), sub("t", expirationPolicy={"ttl": "86400s"}), sub("u")],
    ),
    "retry-backoff-in-range": (
        [sub("s", retryPolicy={"minimumBackoff": "601s"}), sub("t", retryPolicy={"minimumBackoff": "60s", "maximumBackoff": "30s"}),
         sub("u", retryPolicy={"maximumBackoff": "5s"})],  # default minimum (10 s) above the maximum
        [sub("s", retryPolicy={"minimumBackoff": "0s", "maximumBackoff": "600s"}), sub("t", retryPolicy={"minimumBackoff": "1s"})],
    ),
    "filter-size-limit": (
        [sub("s", filter="a" * (facts.FILTER_MAX_BYTES + 1)), sub("t", filter="é" * 129)],
        [sub("s", filter="a" * facts.FILTER_MAX_BYTES), sub("t")],
    ),
    "pubsub-names-valid": (
        [topic("goog-orders"), sub("1orders"), sub("ab"), topic("orders/x")],
        [topic("orders"), sub("orders-worker.v1~x+y%z")],
    ),
    "push-endpoint-https": (
        [sub("s", pushConfig={**PUSH, "pushEndpoint": "http://orders.example.com/push"})],
        [sub("s", pushConfig=PUSH)],
    ),
    "no-public-pubsub-iam": (
        [topic_grant("g", "orders", member="allUsers"),
         {"type": facts.SUBSCRIPTION_IAM_BINDING, "name": "b", "props": {"subscription": "s", "role": "r", "members": ["user:a@b.c", "allAuthenticatedUsers"]}},
         {"type": facts.TOPIC_IAM_POLICY, "name": "p", "props": {"topic": "orders", "policyData": '{"bindings":[{"role":"roles/pubsub.viewer","members":["allUsers"]}]}'}}],
        [topic_grant("g", "orders"), {"type": facts.TOPIC_IAM_POLICY, "name": "p", "props": {"topic": "orders", "policyData": "{not json"}}],
    ),
    "ordering-on-push": (
        [sub("s", enableMessageOrdering=True, pushConfig=PUSH)],
        [sub("s", enableMessageOrdering=True), sub("t", pushConfig=PUSH)],
    ),
    "ordering-with-dead-letter": (
        [sub("s", enableMessageOrdering=True, deadLetterPolicy=dead_letter())],
        [sub("s", enableMessageOrdering=True), sub("t", deadLetterPolicy=dead_letter())],
    ),
    "exactly-once-with-ordering": (
        [sub("s", enableMessageOrdering=True, enableExactlyOnceDelivery=True)],
        [sub("s", enableMessageOrdering=True), sub("t", enableExactlyOnceDelivery=True)],
    ),
    "push-oidc-token": (
        [sub("s", pushConfig={"pushEndpoint": "https://x.example.com/"})],
        [sub("s", pushConfig=PUSH), sub("t")],
    ),
    "exactly-once-ack-deadline": (
        [sub("s", enableExactlyOnceDelivery=True, ackDeadlineSeconds=30)],
        [sub("s", enableExactlyOnceDelivery=True, ackDeadlineSeconds=60), sub("t", enableExactlyOnceDelivery=True),
         sub("u", ackDeadlineSeconds=10)],
    ),
    "subscription-expires": (
        [sub("s"), sub("t", expirationPolicy={"ttl": "172800s"})],
        [sub("s", expirationPolicy={"ttl": ""})],
    ),
    "topic-kms-key": (
        [topic("orders")],
        [topic("orders", kmsKeyName="projects/p/locations/l/keyRings/r/cryptoKeys/k")],
    ),
    # --- stack rules: the whole list is one stack ---
    "dead-letter-topic-not-source": (
        [topic("orders"), sub("worker", deadLetterPolicy=dead_letter("orders"))],
        dead_letter_estate(),
    ),
    "dead-letter-topic-has-subscription": (dead_letter_estate(drain=False), dead_letter_estate()),
    "dead-letter-service-agent-iam": (dead_letter_estate(publisher=False), dead_letter_estate()),
    "exactly-once-consumers-pinned": (
        [topic("orders", messageStoragePolicy={"allowedPersistenceRegions": ["europe-west1"]}),
         sub("s", enableExactlyOnceDelivery=True, **PINNED)],
        [topic("orders", messageStoragePolicy={"allowedPersistenceRegions": ["us-east1"]}),
         sub("s", enableExactlyOnceDelivery=True, **PINNED), sub("t", enableExactlyOnceDelivery=True)],
    ),
    "exactly-once-consumers-pin-declared": (
        [topic("orders"), sub("s", enableExactlyOnceDelivery=True)],
        [topic("orders"), sub("s", enableExactlyOnceDelivery=True, **PINNED), sub("t")],
    ),
    "ordered-publishers-pinned": (
        [topic("orders", labels={facts.PUBLISHER_REGION_LABEL: "multi-region"}), sub("s", enableMessageOrdering=True),
         # of a region's form, but no such region (docs/pubsub-facts.md's list)
         topic("other", labels={facts.PUBLISHER_REGION_LABEL: "us-east99"}), sub("t", "other", enableMessageOrdering=True)],
        [topic("orders", **PUBLISHERS), topic("other"), sub("s", enableMessageOrdering=True),
         sub("t", "other", enableMessageOrdering=True)],
    ),
    "ordered-publishers-pin-declared": (
        [topic("orders"), sub("s", enableMessageOrdering=True)],
        [topic("orders", **PUBLISHERS), sub("s", enableMessageOrdering=True)],
    ),
    "durations-api-format": (
        [sub("s", messageRetentionDuration="7d"), topic("t", messageRetentionDuration="86400"),
         sub("u", retryPolicy={"minimumBackoff": "10 s"}), sub("v", expirationPolicy={"ttl": "1d"}),
         sub("w", cloudStorageConfig={"bucket": "b", "maxDuration": "5m"})],
        [sub("s", messageRetentionDuration="604800s"), topic("t", messageRetentionDuration="600.5s"),
         sub("u", retryPolicy={"minimumBackoff": "0s", "maximumBackoff": "0.000000001s"}),
         sub("v", expirationPolicy={"ttl": ""}), sub("w", cloudStorageConfig={"bucket": "b", "maxDuration": "300s"})],
    ),
    "labels-valid": (
        [topic("t", labels={"Team": "checkout"}), sub("s", labels={"team": "Checkout"}),
         sub("u", labels={"9x": "1"}), topic("v", labels={"k": "x" * 64})],
        # Google's own services set goog- label keys (Composer): no documented rule forbids them.
        [topic("t", labels={"team": "checkout", "cost_centre": "", "env-1": "prod_2"}), sub("s"),
         topic("c", labels={"goog-composer-environment": "prod", "goog-dataproc-cluster-name": "etl"})],
    ),
    "cloud-storage-limits": (
        [sub("s", cloudStorageConfig={"bucket": "b", "maxDuration": "30s"}),
         sub("t", cloudStorageConfig={"bucket": "b", "maxBytes": 999}),
         sub("u", cloudStorageConfig={"bucket": "b", "filenameSuffix": "logs/"})],
        [sub("s", cloudStorageConfig={"bucket": "b", "maxDuration": "600s", "maxBytes": 10 * 1024**3,
                                      "filenameSuffix": ".avro"}), sub("t", cloudStorageConfig={"bucket": "b", "maxBytes": 0})],
    ),
    "bigquery-schema-options": (
        [sub("s", bigqueryConfig={"table": "p.d.t", "useTableSchema": True, "useTopicSchema": True})],
        [sub("s", bigqueryConfig={"table": "p.d.t", "useTableSchema": True}), sub("t", bigqueryConfig=BIGQUERY)],
    ),
    "cloud-storage-duration-vs-ack-deadline": (
        [sub("s", cloudStorageConfig={"bucket": "b", "maxDuration": "300s"}, ackDeadlineSeconds=60)],
        [sub("s", cloudStorageConfig={"bucket": "b", "maxDuration": "300s"}, ackDeadlineSeconds=300),
         sub("t", cloudStorageConfig={"bucket": "b"})],
    ),
    "iam-authoritative-conflict": (
        [topic("orders"), {"type": facts.TOPIC_IAM_POLICY, "name": "pol", "props": {"topic": "orders", "policyData": "{}"}},
         topic_grant("m", "orders", role="roles/pubsub.viewer", member="user:a@example.com")],
        [topic("orders"), topic("other"),
         {"type": facts.TOPIC_IAM_POLICY, "name": "pol", "props": {"topic": "orders", "policyData": "{}"}},
         topic_grant("m", "other"),
         {"type": facts.TOPIC_IAM_BINDING, "name": "b", "props": {"topic": "other", "role": "roles/pubsub.viewer", "members": []}}],
    ),
    "export-service-agent-access": (
        [topic("orders"), sub("s", bigqueryConfig=BIGQUERY)],
        [topic("orders"), sub("s", bigqueryConfig={**BIGQUERY, "serviceAccountEmail": "w@p.iam.gserviceaccount.com"}),
         sub("t", cloudStorageConfig=STORAGE),
         {"type": "gcp:storage/bucketIAMMember:BucketIAMMember", "name": "g",
          "props": {"bucket": "b", "role": "roles/storage.objectCreator", "member": AGENT}}],
    ),
}


def test_every_rule_has_a_case():
    assert set(CASES) == set(BY_NAME)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_violating_resources_are_reported(rule):
    violating, _ = CASES[rule]
    messages = check(rule, violating)
    expected = len(violating) if not BY_NAME[rule].stack else 1
    assert len(messages) >= expected, messages
    for message in messages:
        assert message.endswith(".") and message.count(". ") == 0, f"one sentence: {message!r}"


@pytest.mark.parametrize("rule", sorted(CASES))
def test_passing_resources_are_not_reported(rule):
    _, passing = CASES[rule]
    assert check(rule, passing) == []


@pytest.mark.parametrize("rule", sorted(r.name for r in RULES if not r.stack))
def test_resource_messages_name_the_resource(rule):
    violating, _ = CASES[rule]
    for resource in violating:
        for message in check(rule, [resource]):
            assert resource["name"] in message


def test_rule_metadata():
    for rule in RULES:
        assert rule.name == rule.name.lower() and " " not in rule.name
        assert rule.description.startswith(("Requires", "Prohibits")), rule.name
        assert rule.level in ("mandatory", "advisory")


# --- Specific behaviour -------------------------------------------------------------------------------
def test_both_retry_faults_reported_separately():
    messages = check("retry-backoff-in-range", [sub("s", retryPolicy={"minimumBackoff": "700s", "maximumBackoff": "800s"})])
    assert len(messages) == 2 and all("outside" in m for m in messages)


def test_exactly_once_ack_deadline_minimum_is_configurable():
    resource = [sub("s", enableExactlyOnceDelivery=True, ackDeadlineSeconds=90)]
    assert check("exactly-once-ack-deadline", resource) == []
    assert len(check("exactly-once-ack-deadline", resource, {"minimumSeconds": 120})) == 1


def test_external_dead_letter_topic_cannot_be_judged_unless_strict():
    resources = [topic("orders"), sub("worker", deadLetterPolicy=dead_letter("shared-dlq")),
                 topic_grant("p", "shared-dlq"), sub_grant("s", "worker")]
    assert check("dead-letter-topic-has-subscription", resources) == []
    (undecided,) = cannot_judge("dead-letter-topic-has-subscription", resources)  # listed, never silently passed
    assert "deadLetterPolicy.deadLetterTopic" in undecided
    (message,) = check("dead-letter-topic-has-subscription", resources, {"allowExternalTopics": False})
    assert "shared-dlq" in message and "does not declare" in message


def test_identity_is_project_and_name_with_the_provider_project():
    """Two topics named orders in two projects are two topics (the default provider's project counts)."""
    other = {"type": facts.TOPIC, "name": "orders-b", "props": {"name": "orders", "project": "other-project"}}
    worker = sub("worker", deadLetterPolicy={"deadLetterTopic": "projects/other-project/topics/orders", "maxDeliveryAttempts": 5})
    resources = [topic("orders"), other, worker, sub("drain", "orders", project="other-project")]
    assert check("dead-letter-topic-not-source", resources) == []
    same = sub("worker", deadLetterPolicy=dead_letter("orders"))
    assert len(check("dead-letter-topic-not-source", [topic("orders"), other, same])) == 1
    # A topic in a stack whose provider project is another: "projects/P/topics/orders" is not it.
    elsewhere = {**topic("orders"), "provider_project": "third"}
    reader = sub("w", deps={"topic": ["orders"]}, deadLetterPolicy=dead_letter("orders"))
    reader["props"]["topic"] = UNKNOWN
    assert check("dead-letter-topic-not-source", [elsewhere, reader]) == []


def test_dead_letter_grant_must_go_to_the_subscriptions_own_project_agent():
    estate = dead_letter_estate()
    numbers = {"projectNumbers": {PROJECT: "123456789012"}}
    assert check("dead-letter-service-agent-iam", estate, numbers) == []
    (message,) = check("dead-letter-service-agent-iam", estate, {"projectNumbers": {PROJECT: "999"}})
    assert "service-999@" in message


def test_label_contract_is_advisory_unless_the_labels_declare_a_violation():
    assert BY_NAME["exactly-once-consumers-pin-declared"].level == "advisory"
    assert BY_NAME["ordered-publishers-pin-declared"].level == "advisory"
    unlabelled = [topic("orders"), sub("s", enableExactlyOnceDelivery=True, enableMessageOrdering=True)]
    assert check("exactly-once-consumers-pinned", unlabelled) == []
    assert check("ordered-publishers-pinned", unlabelled) == []
    (message,) = check("exactly-once-consumers-pin-declared", unlabelled)
    assert "cannot verify region pinning" in message and facts.CONSUMER_REGION_LABEL in message


def test_iam_binding_and_member_for_the_same_role_conflict():
    resources = [topic("orders"),
                 {"type": facts.TOPIC_IAM_BINDING, "name": "b", "props": {"topic": "orders", "role": facts.PUBLISHER_ROLE, "members": []}},
                 topic_grant("m", "orders")]
    (message,) = check("iam-authoritative-conflict", resources)
    assert "m" in message and "b" in message
    other_role = [resources[0], resources[1], topic_grant("m", "orders", role=facts.SUBSCRIBER_ROLE)]
    assert check("iam-authoritative-conflict", other_role) == []


def test_dead_letter_iam_names_what_is_missing():
    (message,) = check("dead-letter-service-agent-iam", dead_letter_estate(subscriber=False))
    assert facts.SUBSCRIBER_ROLE in message and facts.PUBLISHER_ROLE not in message
    (both,) = check("dead-letter-service-agent-iam", dead_letter_estate(subscriber=False, publisher=False))
    assert facts.SUBSCRIBER_ROLE in both and facts.PUBLISHER_ROLE in both


def test_dead_letter_iam_wrong_member_or_role_does_not_count():
    estate = dead_letter_estate(publisher=False)
    wrong_member = estate + [topic_grant("g", "orders-dead-letter", member="user:someone@example.com")]
    wrong_role = estate + [topic_grant("g", "orders-dead-letter", role="roles/pubsub.viewer")]
    other_topic = estate + [topic_grant("g", "orders")]
    for resources in (wrong_member, wrong_role, other_topic):
        assert len(check("dead-letter-service-agent-iam", resources)) == 1


def test_dead_letter_iam_accepts_binding_policy_and_project_grants():
    estate = dead_letter_estate(publisher=False)
    binding = {"type": facts.TOPIC_IAM_BINDING, "name": "b", "props": {
        "topic": f"projects/{PROJECT}/topics/orders-dead-letter", "role": "roles/pubsub.editor", "members": [AGENT]}}
    policy = {"type": facts.TOPIC_IAM_POLICY, "name": "p", "props": {
        "topic": "orders-dead-letter", "policyData": '{"bindings": [{"role": "roles/pubsub.publisher", "members": ["%s"]}]}' % AGENT}}
    project = {"type": facts.PROJECT_IAM_MEMBER, "name": "proj", "props": {"project": PROJECT, "role": facts.PUBLISHER_ROLE, "member": AGENT}}
    for grant in (binding, policy, project):
        assert check("dead-letter-service-agent-iam", estate + [grant]) == [], grant["type"]


def test_exactly_once_region_outside_persistence_regions():
    resources = [topic("orders", messageStoragePolicy={"allowedPersistenceRegions": ["europe-west1"]}),
                 sub("s", enableExactlyOnceDelivery=True, **PINNED)]
    (message,) = check("exactly-once-consumers-pinned", resources)
    assert "us-east1" in message and "europe-west1" in message


def test_region_label_must_be_a_region():
    resources = [topic("orders"), sub("s", enableExactlyOnceDelivery=True, labels={facts.CONSUMER_REGION_LABEL: "anywhere"})]
    assert len(check("exactly-once-consumers-pinned", resources)) == 1
    assert check("exactly-once-consumers-pin-declared", resources) == []


def test_stack_violations_carry_the_subscription_urn():
    ((at, _),) = validate_stack("dead-letter-topic-has-subscription", dead_letter_estate(drain=False))
    assert at.endswith("::worker") and facts.SUBSCRIPTION in at


# --- Unknowns: no crash, no false violation -------------------------------------------------------------
UNKNOWN_CASES = {
    "no-exactly-once-on-push": [sub("s", enableExactlyOnceDelivery=UNKNOWN, pushConfig=PUSH), sub("t", enableExactlyOnceDelivery=True, pushConfig=UNKNOWN)],
    "single-delivery-type": [sub("s", pushConfig=PUSH, bigqueryConfig=UNKNOWN)],
    "max-delivery-attempts-in-range": [sub("s", deadLetterPolicy={"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": UNKNOWN}), sub("t", deadLetterPolicy=UNKNOWN)],
    "ack-deadline-in-range": [sub("s", ackDeadlineSeconds=UNKNOWN)],
    "retention-in-range": [sub("s", messageRetentionDuration=UNKNOWN)],
    "expiration-ttl-at-least-one-day": [sub("s", expirationPolicy={"ttl": UNKNOWN}), sub("t", expirationPolicy=UNKNOWN)],
    "retry-backoff-in-range": [sub("s", retryPolicy={"minimumBackoff": UNKNOWN, "maximumBackoff": "5s"})],
    "filter-size-limit": [sub("s", filter=UNKNOWN)],
    "pubsub-names-valid": [{"type": facts.TOPIC, "name": "t", "props": {"name": UNKNOWN}}],
    "push-endpoint-https": [sub("s", pushConfig={"pushEndpoint": UNKNOWN})],
    "no-public-pubsub-iam": [topic_grant("g", "orders", member=UNKNOWN)],
    "push-oidc-token": [sub("s", pushConfig={"pushEndpoint": "https://x/", "oidcToken": UNKNOWN}), sub("t", pushConfig=UNKNOWN)],
    "exactly-once-ack-deadline": [sub("s", enableExactlyOnceDelivery=True, ackDeadlineSeconds=UNKNOWN)],
    "subscription-expires": [sub("s", expirationPolicy=UNKNOWN), sub("t", expirationPolicy={"ttl": UNKNOWN})],
    "topic-kms-key": [topic("orders", kmsKeyName=UNKNOWN)],
    "exactly-once-consumers-pinned": [topic("orders"), sub("s", enableExactlyOnceDelivery=True, labels=UNKNOWN),
                                      sub("t", enableExactlyOnceDelivery=UNKNOWN)],
    "ordered-publishers-pinned": [topic("orders", labels=UNKNOWN), sub("s", enableMessageOrdering=True)],
    "exactly-once-consumers-pin-declared": [topic("orders"), sub("s", enableExactlyOnceDelivery=True, labels=UNKNOWN),
                                            sub("t", enableExactlyOnceDelivery=UNKNOWN)],
    "ordered-publishers-pin-declared": [topic("orders", labels=UNKNOWN), sub("s", enableMessageOrdering=True)],
    "durations-api-format": [sub("s", messageRetentionDuration=UNKNOWN, retryPolicy=UNKNOWN), topic("t", messageRetentionDuration=UNKNOWN)],
    "labels-valid": [topic("t", labels=UNKNOWN), sub("s", labels={"Team": UNKNOWN})],
    "cloud-storage-limits": [sub("s", cloudStorageConfig={"bucket": "b", "maxDuration": UNKNOWN, "maxBytes": UNKNOWN}),
                             sub("t", cloudStorageConfig=UNKNOWN)],
    "bigquery-schema-options": [sub("s", bigqueryConfig={"table": "t", "useTableSchema": True, "useTopicSchema": UNKNOWN})],
    "iam-authoritative-conflict": [topic("orders"), {"type": facts.TOPIC_IAM_POLICY, "name": "pol", "props": {"topic": UNKNOWN, "policyData": "{}"}},
                                   topic_grant("m", "orders")],
    "export-service-agent-access": [topic("orders"), sub("s", bigqueryConfig={**BIGQUERY, "serviceAccountEmail": UNKNOWN}),
                                    sub("t", bigqueryConfig=BIGQUERY),
                                    {"type": "gcp:bigquery/datasetIamMember:DatasetIamMember", "name": "g",
                                     "props": {"datasetId": "d", "role": "roles/bigquery.dataEditor", "member": UNKNOWN}}],
}


@pytest.mark.parametrize("rule", sorted(UNKNOWN_CASES))
def test_unknown_values_produce_no_violation(rule):
    assert check(rule, UNKNOWN_CASES[rule]) == []


def _preview_estate(**changes):
    """The dead-letter estate as a real preview sees it: topic ids unknown, references known only
    through property dependencies."""
    worker = sub("worker", deps={"topic": ["orders"], "deadLetterPolicy": ["orders-dead-letter"]},
                 deadLetterPolicy={"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5})
    worker["props"]["topic"] = UNKNOWN
    drain = sub("drain", deps={"topic": ["orders-dead-letter"]})
    drain["props"]["topic"] = UNKNOWN
    resources = {"orders": topic("orders"), "orders-dead-letter": topic("orders-dead-letter"), "worker": worker, "drain": drain,
                 "pub": topic_grant("pub", UNKNOWN, deps={"topic": ["orders-dead-letter"]}), "sub": sub_grant("sub", "worker")}
    for name, value in changes.items():
        if value is None:
            resources.pop(name)
        else:
            resources[name] = value
    return list(resources.values())


def test_unknown_references_resolve_through_property_dependencies():
    for rule in ("dead-letter-topic-not-source", "dead-letter-topic-has-subscription", "dead-letter-service-agent-iam"):
        assert check(rule, _preview_estate()) == [], rule
    assert len(check("dead-letter-topic-has-subscription", _preview_estate(drain=None))) == 1
    own = sub("worker", deps={"topic": ["orders"], "deadLetterPolicy": ["orders"]}, deadLetterPolicy={"deadLetterTopic": UNKNOWN})
    own["props"]["topic"] = UNKNOWN
    assert len(check("dead-letter-topic-not-source", _preview_estate(worker=own))) == 1


def test_unresolvable_references_produce_no_violation():
    worker = sub("worker", deadLetterPolicy={"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5})
    resources = [topic("orders"), worker, sub_grant("sub", "worker")]
    for rule in ("dead-letter-topic-not-source", "dead-letter-topic-has-subscription", "dead-letter-service-agent-iam"):
        assert check(rule, resources) == [], rule
    # A subscription whose topic is unknown might read the dead-letter topic: not reported.
    maybe_reader = sub("maybe")
    maybe_reader["props"]["topic"] = UNKNOWN
    estate = dead_letter_estate(drain=False) + [maybe_reader]
    assert check("dead-letter-topic-has-subscription", estate) == []


def test_a_region_label_must_name_a_documented_region_not_just_its_form():
    violating, _ = CASES["ordered-publishers-pinned"]
    assert len(check("ordered-publishers-pinned", violating)) == 2  # "multi-region" and "us-east99"
    real = [topic("orders", labels={facts.PUBLISHER_REGION_LABEL: "europe-west12"}), sub("s", enableMessageOrdering=True)]
    assert check("ordered-publishers-pinned", real) == []


def test_the_documented_region_list_is_the_one_the_rules_use():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "pubsub-facts.md").read_text()
    listed = text.split("as of 2026-11:", 1)[1].split("A name of that form", 1)[0]
    assert sorted(word.strip(" ,;.") for word in listed.split()) == sorted(facts.REGIONS)
