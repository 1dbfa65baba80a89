"""Each rule through its SDK policy's `validate`: a violating and a passing case for every rule, its metadata, and the
regions it knows (test_rule_behaviour.py: what single rules decide; test_rule_unknowns.py: values unknown at preview)."""

from __future__ import annotations

import pytest

from pack_harness import (
    AGENT,
    BIGQUERY,
    PINNED,
    PUBLISHERS,
    PUSH,
    STORAGE,
    check,
    dead_letter,
    dead_letter_estate,
    sub,
    topic,
    topic_grant,
)
import pubsub_facts as facts
from pubsub_rules.catalog import BY_NAME, RULES


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
