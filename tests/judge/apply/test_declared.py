"""The declared model (`pubsubguard.core.declared`): the plan read once into typed topics and subscriptions,
and what apply, readback, isolation and the checks take from it."""

from __future__ import annotations

import pytest
from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import probe_contract

from pubsubguard.core import declared
from pubsubguard.core.errors import UserError
from pubsubguard.core.plan import UNKNOWN, make_plan
from pubsubguard.core.plan_file import resources_of
from pubsubguard.validation.evidence.records import DeclaredSubscription
from pubsubguard.validation.probe.twins import plan_twins
from pubsubguard.validation.target import checked

PROJECT = "pubsubguard-dev"


@pytest.fixture(scope="module")
def dev_plan() -> dict:
    return make_plan("dev")


def test_every_topic_and_subscription_of_the_plan_once(dev_plan):
    estate = declared.estate(dev_plan)
    assert {t.path for t in estate.topics.values()} == {
        declared.topic_path(PROJECT, r["inputs"]["name"]) for r in resources_of(dev_plan, facts.TOPIC)
    }
    assert {s.path for s in estate.subscriptions.values()} == {
        declared.subscription_path(PROJECT, r["inputs"]["name"]) for r in resources_of(dev_plan, facts.SUBSCRIPTION)
    }
    assert estate.stack == "dev" and estate.project == PROJECT and estate.probe_isolation


def test_the_stack_view_leaves_out_the_plumbing(dev_plan):
    everything = declared.estate(dev_plan)
    stack = everything.declared_by_stack()
    assert set(stack.subscriptions) == set(dev_plan["outputs"]["subscriptions"])
    assert "orders-ordered-dead-letter-drain" in everything.subscriptions
    assert "orders-ordered-dead-letter-drain" not in stack.subscriptions
    assert list(stack.subscriptions) == sorted(stack.subscriptions)
    assert stack.dead_letter_drains == everything.dead_letter_drains and len(stack.dead_letter_drains) == 2


def test_a_subscription_as_declared_and_deployed(dev_plan):
    subs = declared.estate(dev_plan).subscriptions
    ordered = subs["orders-ordered"]
    assert (ordered.topic, ordered.topic_path) == ("orders", f"projects/{PROJECT}/topics/orders")
    assert (ordered.delivery_type, ordered.ordering, ordered.exactly_once, ordered.ack_deadline_s) == ("pull", True, False, 30)
    assert ordered.dead_letter_topic_path == f"projects/{PROJECT}/topics/orders-ordered-dead-letter"
    assert ordered.dead_letter_drain == f"projects/{PROJECT}/subscriptions/orders-ordered-dead-letter-drain"
    assert ordered.max_delivery_attempts == 5 and ordered.dead_lettering
    assert (ordered.consumer_region, ordered.consumer_endpoint) == ("us-east1", "us-east1-pubsub.googleapis.com:443")
    assert ordered.filter == probe_contract.PROBE_EXCLUSION_FILTER  # probe_isolation
    eod = subs["orders-exactly-once"]
    assert (eod.retry_min_backoff_s, eod.retry_max_backoff_s) == (1, 10)
    assert subs["orders-ordered-exactly-once"].expiration_ttl == "never"
    push = subs["orders-push"]
    assert push.delivery_type == "push" and push.not_probed and ordered.not_probed is None
    assert push.push_endpoint == "https://orders.example.com/pubsub/push"
    assert push.push_oidc_service_account == "pusher@pubsubguard-dev.iam.gserviceaccount.com"
    orders = declared.estate(dev_plan).topics["orders"]
    assert (orders.retention_s, orders.storage_regions, orders.publisher_endpoint) == (
        86400, ("us-east1",), "us-east1-pubsub.googleapis.com:443"
    )


def _subscription(**inputs) -> declared.Subscription:
    return declared.read_subscription({"name": "s", "topic": "t", **inputs}, "p")


def test_settings_leave_service_defaults_out():
    plain = _subscription().settings()
    assert "ack_deadline_seconds" not in plain and "retention_seconds" not in plain and "expiration_ttl" not in plain
    assert (plain["topic"], plain["delivery"], plain["dead_letter_topic"]) == ("projects/p/topics/t", "pull", None)
    retry = _subscription(retryPolicy={"maximumBackoff": "600s"}).settings()
    assert retry["retry_max_backoff_s"] == 600 and "retry_min_backoff_s" not in retry
    dead = _subscription(deadLetterPolicy={"deadLetterTopic": "d"}, expirationPolicy={"ttl": "86400s"}).settings()
    assert (dead["dead_letter_topic"], dead["max_delivery_attempts"]) == ("projects/p/topics/d", facts.MAX_DELIVERY_ATTEMPTS_DEFAULT)
    assert dead["expiration_ttl"] == 86400
    push = _subscription(pushConfig={"pushEndpoint": "https://x"}).settings()
    assert (push["delivery"], push["push_endpoint"], push["push_audience"]) == ("push", "https://x", None)
    assert "bigquery_table" not in push and "cloud_storage_bucket" not in push
    export = _subscription(bigqueryConfig={"table": "p.d.t"}).settings()
    assert (export["delivery"], export["bigquery_table"]) == ("bigquery", "p.d.t") and "cloud_storage_bucket" not in export


def test_values_unknown_until_deploy_or_malformed_are_named():
    with pytest.raises(declared.PlanValueError, match=r"subscription.topic: unknown until deploy"):
        _subscription(topic=UNKNOWN)
    with pytest.raises(declared.PlanValueError, match=r"messageRetentionDuration: expected an API duration"):
        _subscription(messageRetentionDuration="a week")


def test_a_plan_without_stack_outputs_is_viewed_from_its_resources(dev_plan):
    """Any other program has no `topics`/`subscriptions` outputs (issue 25): its stack view is every
    subscription but the dead-letter drains, found from the resources: here, the same as the outputs say."""
    bare = {**dev_plan, "outputs": {"subscriptions": ["a list, as a team's program may export"]}}
    from_resources = declared.estate(bare).declared_by_stack()
    from_outputs = declared.estate(dev_plan).declared_by_stack()
    # dev declares `payments-dead-letter-drain` itself; read from the resources alone it is what it does:
    # the subscription of a dead-letter topic, probed through the drain twin of its dead-lettering subscription
    assert set(from_resources.subscriptions) == set(from_outputs.subscriptions) - {"payments-dead-letter-drain"}
    assert from_outputs.dead_letter_drains.items() <= from_resources.dead_letter_drains.items() and from_outputs.dead_letter_drains
    assert from_resources.dead_letter_drains[f"projects/{PROJECT}/subscriptions/payments-dead-letter-drain"] == (
        f"projects/{PROJECT}/topics/payments-dead-letter")
    for name, subscription in from_resources.subscriptions.items():
        assert subscription.dead_letter_drain == (from_outputs.subscriptions[name].dead_letter_drain or (
            f"projects/{PROJECT}/subscriptions/payments-dead-letter-drain" if subscription.dead_lettering else None)), name


def test_one_plan_loader(tmp_path):
    with pytest.raises(UserError, match="--plan and --stack: give one of them"):
        declared.plan_from(tmp_path / "plan.json", "dev")
    with pytest.raises(UserError, match="no such plan file"):
        declared.plan_from(tmp_path / "plan.json", None)


def test_the_checks_and_the_twins_read_the_model(dev_plan):
    stack = declared.estate(dev_plan).declared_by_stack()
    assert checked(stack.subscriptions["payments-exactly-once"]) == DeclaredSubscription(
        "payments-exactly-once", "payments", exactly_once=True, ack_deadline_s=60, max_delivery_attempts=5,
        dead_letter_topic="payments-dead-letter",
    )
    twins = {t.declared_name: t for t in plan_twins(stack, "0123456789abcdef")}
    assert set(twins) == {"orders-ordered", "orders-exactly-once", "orders-ordered-exactly-once",
                          "payments-exactly-once", "payments-dead-letter-drain",
                          "orders-ordered-dead-letter-drain", "orders-exactly-once-dead-letter-drain"}
    assert twins["orders-exactly-once"].retry_max_backoff_s == 10 and twins["orders-ordered"].ack_deadline_s == 30
