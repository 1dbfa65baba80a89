"""What single rules decide, through their SDK policy's `validate`: retry faults, configurable minimums, external
dead-letter topics, identity, dead-letter grants, label contracts, IAM conflicts, regions, stack violations."""

from __future__ import annotations

from pack_harness import (
    AGENT,
    PINNED,
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
from pubsub_rules.catalog import BY_NAME


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
