"""Values unknown at preview through the rules' SDK policies: an unknown value produces no violation, references
resolve through property dependencies, and what cannot be resolved is not judged."""

from __future__ import annotations

import pytest

from pack_harness import BIGQUERY, PUSH, UNKNOWN, check, dead_letter_estate, sub, sub_grant, topic, topic_grant
import pubsub_facts as facts


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
