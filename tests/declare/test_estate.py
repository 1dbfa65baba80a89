"""The estate model: the example loads; every invalid input names its field path and what was expected."""

from __future__ import annotations

import copy

import pytest
import yaml

from pubsubguard.infra.estate import EstateSpec, EstateError, PushDelivery, load_spec

from support import ROOT
DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]["pubsubguard:estate"]
PREFIX = "pubsubguard:estate"


def test_dev_example_loads_with_the_shapes_the_issue_asks_for():
    estate = load_spec(DEV, "Pulumi.dev.yaml")
    assert isinstance(estate, EstateSpec)
    subs = {sub.name: (topic.name, sub) for topic, sub in estate.subscriptions()}
    assert subs["orders-ordered"][1].ordering and not subs["orders-ordered"][1].exactly_once
    assert subs["orders-exactly-once"][1].exactly_once and not subs["orders-exactly-once"][1].ordering
    both = subs["orders-ordered-exactly-once"][1]
    assert both.ordering and both.exactly_once
    assert isinstance(subs["orders-push"][1].delivery, PushDelivery)
    assert sum(1 for _, s in subs.values() if s.dead_letter) >= 2
    assert len({topic for topic, _ in subs.values()}) >= 2
    assert subs["orders-exactly-once"][1].retry_policy.maximum_backoff == 10
    assert subs["orders-ordered-exactly-once"][1].expiration == "never"


def _with(path: tuple, value, *, delete: bool = False) -> dict:
    data = copy.deepcopy(DEV)
    node = data
    for part in path[:-1]:
        node = node[part]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


SUB0 = ("topics", 0, "subscriptions", 0)

INVALID = [
    # (change, field path, message fragment)
    (_with(SUB0 + ("ack_deadline_seconds",), 5), "topics[0].subscriptions[0].ack_deadline_seconds",
     "must be from 10 to 600 seconds, got 5"),
    (_with(SUB0 + ("ack_deadline_seconds",), 601), "topics[0].subscriptions[0].ack_deadline_seconds",
     "must be from 10 to 600 seconds, got 601"),
    (_with(SUB0 + ("ack_deadline_seconds",), "soon"), "topics[0].subscriptions[0].ack_deadline_seconds",
     "Input should be a valid integer"),
    (_with(SUB0 + ("dead_letter",), {"max_delivery_attempts": 4}),
     "topics[0].subscriptions[0].dead_letter.max_delivery_attempts", "must be from 5 to 100, got 4"),
    (_with(SUB0 + ("dead_letter",), {"max_delivery_attempts": 101}),
     "topics[0].subscriptions[0].dead_letter.max_delivery_attempts", "must be from 5 to 100, got 101"),
    (_with(SUB0 + ("retention",), "5m"), "topics[0].subscriptions[0].retention",
     "retention must be from 600s to 2678400s, got 300s"),
    (_with(SUB0 + ("retention",), "32d"), "topics[0].subscriptions[0].retention",
     "retention must be from 600s to 2678400s, got 2764800s"),
    (_with(SUB0 + ("retention",), "a week"), "topics[0].subscriptions[0].retention",
     "expected a duration like '600s', '10m', '12h', '7d' or whole seconds, got 'a week'"),
    (_with(SUB0 + ("expiration",), "12h"), "topics[0].subscriptions[0].expiration",
     "must be 'never' or at least 86400s (1 day), got 43200s"),
    (_with(SUB0 + ("retry_policy",), {"minimum_backoff": "11m"}), "topics[0].subscriptions[0].retry_policy.minimum_backoff",
     "backoff must be from 0s to 600s, got 660s"),
    (_with(SUB0 + ("filter",), "attributes.x = \"" + "y" * 300 + "\""), "topics[0].subscriptions[0].filter",
     "must be at most 256 bytes"),
    (_with(SUB0 + ("name",), "ab"), "topics[0].subscriptions[0].name", "is not a valid name"),
    (_with(SUB0 + ("name",), "1orders"), "topics[0].subscriptions[0].name", "is not a valid name"),
    (_with(SUB0 + ("name",), "googly-eyes"), "topics[0].subscriptions[0].name", "must not start with 'goog'"),
    (_with(("topics", 0, "name"), "orders/x"), "topics[0].name", "is not a valid name"),
    (_with(SUB0 + ("colour",), "blue"), "topics[0].subscriptions[0].colour", "unknown field (expected one of: name, delivery,"),
    (_with(SUB0 + ("retension",), "7d"), "topics[0].subscriptions[0].retension", "unknown field; did you mean 'retention'?"),
    (_with(("topics", 0, "message_retension"), "1d"), "topics[0].message_retension",
     "unknown field; did you mean 'message_retention'?"),
    (_with(("topics", 0, "subscriptions", 3, "delivery", "endpont"), "https://x.example.com"),
     "topics[0].subscriptions[3].delivery.endpont", "unknown field; did you mean 'endpoint'?"),
    (_with(SUB0 + ("dead_letter", "max_delivery_atempts"), 5), "topics[0].subscriptions[0].dead_letter.max_delivery_atempts",
     "did you mean 'max_delivery_attempts'?"),
    (_with(("probe_isolaton",), True), "probe_isolaton", "did you mean 'probe_isolation'?"),
    (_with(("topics", 0, "labels"), {"Team": "checkout"}), "topics[0].labels", "label key 'Team' is not valid"),
    (_with(SUB0 + ("labels",), {"team": "Check Out"}), "topics[0].subscriptions[0].labels",
     "label 'team' has the value 'Check Out', which is not valid"),
    (_with(SUB0 + ("labels",), {"Goog-x": "a"}), "topics[0].subscriptions[0].labels", "is not valid"),
    (_with(SUB0 + ("labels",), {f"k{i}": "v" for i in range(65)}), "topics[0].subscriptions[0].labels", "65 labels, more than 64"),
    (_with(("topics", 0, "labels", "team"), {"secure": "AAABAKnq"}), "topics[0].labels.team",
     "a secret (`secure:`), which the offline plan cannot decrypt"),
    (_with(("topics", 0, "subscriptions", 3, "delivery", "type"), "carrier-pigeon"),
     "topics[0].subscriptions[3].delivery", "delivery type must be one of 'pull', 'push', 'bigquery', 'cloud_storage'"),
    (_with(("topics", 0, "subscriptions", 3, "delivery", "endpoint"), None, delete=True),
     "topics[0].subscriptions[3].delivery.endpoint", "required field is missing"),
    (_with(SUB0 + ("consumer_region",), "Mars"), "topics[0].subscriptions[0].consumer_region",
     "expected a Google Cloud region like 'us-east1' (docs/pubsub-facts.md lists them), got 'Mars'"),
    (_with(SUB0 + ("consumer_region",), "us-east99"), "topics[0].subscriptions[0].consumer_region",
     "got 'us-east99'"),
    (_with(("topics", 0, "persistence_regions"), []), "topics[0].persistence_regions",
     "expected a non-empty list of regions"),
    (_with(("topics", 1, "name"), "orders"), "topics[1].name", "duplicate topic name 'orders'"),
    (_with(("topics", 1, "subscriptions", 0, "name"), "orders-ordered"), "topics[1].subscriptions[0].name",
     "duplicate subscription name 'orders-ordered'"),
    (_with(("topics", 1, "subscriptions", 0, "dead_letter", "topic"), "nowhere"),
     "topics[1].subscriptions[0].dead_letter.topic", "names topic 'nowhere', which the estate does not declare"),
    (_with(("topics",), None, delete=True), "topics", "required field is missing"),
    (_with(("topics", 0, "subscriptions", 1, "name"), "orders-ordered-dead-letter-drain"),
     "topics[0].subscriptions[0].dead_letter", "auto-created subscription 'orders-ordered-dead-letter-drain' collides"),
]


@pytest.mark.parametrize("data,path,fragment", INVALID, ids=[case[1] + ":" + case[2][:30] for case in INVALID])
def test_invalid_input_names_the_stack_file_the_field_and_the_expectation(data, path, fragment):
    with pytest.raises(EstateError) as caught:
        load_spec(data, "Pulumi.test.yaml")
    message = str(caught.value)
    assert message.startswith("Pulumi.test.yaml: invalid estate")
    assert f"{PREFIX}.{path}: " in message, message
    line = next(line for line in message.splitlines() if f"{PREFIX}.{path}: " in line)
    assert fragment in line, message
    assert "Traceback" not in message


def test_semantic_combinations_are_kept_as_written_for_the_policy_pack():
    # push + exactly-once is the pack's to reject; the model must not "fix" it
    data = _with(("topics", 0, "subscriptions", 3, "exactly_once"), True)
    estate = load_spec(data, "Pulumi.test.yaml")
    push = next(sub for _, sub in estate.subscriptions() if sub.name == "orders-push")
    assert push.exactly_once and isinstance(push.delivery, PushDelivery)


def test_a_string_instead_of_a_mapping_is_reported_at_the_estate_key():
    with pytest.raises(EstateError, match=r"pubsubguard:estate: expected a mapping with 'topics'"):
        load_spec("topics", "Pulumi.test.yaml")


def test_delivery_types_are_one_set_of_names_across_estate_model_readback_and_rules():
    """The delivery types are spelled once (pubsub_facts.DELIVERY_TYPES): the estate's delivery models, the declared
    model's `delivery_type` of each input block, and the pack's delivery blocks read them."""
    from pubsubguard.core import declared
    from pubsubguard.policies import pubsub_facts as facts
    from pubsubguard.infra import estate

    assert tuple(estate._DELIVERIES) == facts.DELIVERY_TYPES
    assert {model.model_fields["type"].annotation.__args__[0] for model in estate._DELIVERIES.values()} \
        == set(facts.DELIVERY_TYPES)
    assert declared.delivery_type({}) == facts.PULL
    for delivery, block in facts.DELIVERY_INPUTS.items():
        assert declared.delivery_type({block: {"x": 1}}) == delivery
    assert set(facts.DELIVERY_INPUTS) | {facts.PULL} == set(facts.DELIVERY_TYPES)


def test_a_delivery_type_added_to_the_facts_without_its_estate_model_fails_at_import():
    import subprocess
    import sys

    planted = ("from pubsubguard.policies import pubsub_facts as facts\n"
               "facts.DELIVERY_TYPES = (*facts.DELIVERY_TYPES, 'carrier_pigeon')\n"
               "import pubsubguard.infra.estate\n")
    done = subprocess.run([sys.executable, "-c", planted], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "infra/estate.py: delivery models" in done.stderr and "differ from facts.DELIVERY_TYPES" in done.stderr
