"""The pack's once-per-request conversions (pack.decode_once) through the policy SDK's real servicer
and its protobuf requests: a request's resources are converted once for all stack policies, and
nothing is carried from one request to the next. Run in the pack's venv."""

from __future__ import annotations

from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as pb
from pulumi_policy import EnforcementLevel
from pulumi_policy import policy as sdk

import pubsub_facts as facts
from pack_harness import UNKNOWN, urn
from pubsub_rules import model, pack
from pubsub_rules.catalog import RULES

PROVIDER = pb.AnalyzerProviderResource(type="pulumi:providers:gcp", name="default",
                                       urn="urn:pulumi:test::project::pulumi:providers:gcp::default")
PROVIDER.properties.update({"project": "example-project"})


def servicer():
    pack.decode_once()
    return sdk._PolicyAnalyzerServicer("pubsubguard", "0.0.1", pack.policies(), EnforcementLevel.ADVISORY)


def resource(type_: str, name: str, props: dict, deps: dict | None = None) -> pb.AnalyzerResource:
    struct = struct_pb2.Struct()
    struct.update(props)
    item = pb.AnalyzerResource(type=type_, name=name, urn=urn(type_, name), properties=struct,
                               options=pb.AnalyzerResourceOptions(), provider=PROVIDER)
    for key, names in (deps or {}).items():
        item.propertyDependencies[key].urns.extend(urn(facts.TOPIC, n) for n in names)
    return item


def preview(dead_letter_into: str) -> pb.AnalyzeStackRequest:
    """Two topics and a subscription whose topic and dead-letter topic are unknown ids (pulumi-gcp's
    `topic=example.id`): which topics they are comes only from the property dependencies."""
    worker = {"name": "worker", "topic": UNKNOWN, "deadLetterPolicy": {"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5}}
    return pb.AnalyzeStackRequest(resources=[
        resource(facts.TOPIC, "orders", {"name": "orders"}),
        resource(facts.TOPIC, "orders-dead-letter", {"name": "orders-dead-letter"}),
        resource(facts.SUBSCRIPTION, "worker", worker, {"topic": ["orders"], "deadLetterPolicy": [dead_letter_into]}),
    ])


def not_source(response) -> list[str]:
    return [d.urn for d in response.diagnostics if d.policyName == "dead-letter-topic-not-source"]


def test_requests_with_the_same_properties_are_judged_each_by_its_own_dependencies():
    analyzer = servicer()
    same, other = preview("orders"), preview("orders-dead-letter")
    # the same property bytes in both requests: only the dependencies tell them apart
    assert [r.properties for r in same.resources] == [r.properties for r in other.resources]
    assert not_source(analyzer.AnalyzeStack(same, None)) == [urn(facts.SUBSCRIPTION, "worker")]
    assert not_source(analyzer.AnalyzeStack(other, None)) == []
    assert not_source(analyzer.AnalyzeStack(same, None)) == [urn(facts.SUBSCRIPTION, "worker")]


def test_a_request_is_converted_once_for_all_stack_policies(monkeypatch):
    analyzer = servicer()
    converted = []
    original = model.from_policy_resource

    def counting(resource):
        converted.append(resource.urn)
        return original(resource)

    monkeypatch.setattr("pubsub_rules.rule.from_policy_resource", counting)
    request = preview("orders")
    analyzer.AnalyzeStack(request, None)
    assert sum(rule.stack for rule in RULES) > 1
    assert sorted(converted) == sorted(r.urn for r in request.resources)  # once each, not once per policy
    analyzer.AnalyzeStack(request, None)  # a new request: converted again
    assert len(converted) == 2 * len(request.resources)
