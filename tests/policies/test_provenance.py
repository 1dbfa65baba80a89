"""Rules that use where an unknown value comes from (its property dependencies), and the exact
"cannot judge" lines the pack sends for what stays undecidable (issue 26). Run in the pack's venv."""

from __future__ import annotations

import pubsub_facts as facts
from pack_harness import PROJECT, UNKNOWN, cannot_judge, check, sub, sub_grant, topic, topic_grant, urn

ACCOUNT = "gcp:serviceaccount/account:Account"
RUN = "gcp:cloudrun/service:Service"


def account(name: str) -> dict:
    return {"type": ACCOUNT, "name": name, "props": {"accountId": name}}


def preview_worker(dead_letter_deps=("orders-dead-letter",), **props) -> dict:
    """A subscription as pulumi-gcp's docs write it: `topic=example.id`, `dead_letter_topic=dlq.id`."""
    worker = sub("worker", deps={"topic": ["orders"], "deadLetterPolicy": list(dead_letter_deps)},
                 deadLetterPolicy={"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5}, **props)
    worker["props"]["topic"] = UNKNOWN
    return worker


def test_two_different_topic_resources_are_two_topics_even_with_unknown_ids():
    estate = [topic("orders"), topic("orders-dead-letter"), preview_worker()]
    assert check("dead-letter-topic-not-source", estate) == []
    assert cannot_judge("dead-letter-topic-not-source", estate) == []  # decided: different resources


def test_the_same_topic_resource_on_both_sides_is_rejected():
    estate = [topic("orders"), preview_worker(dead_letter_deps=("orders",))]
    assert len(check("dead-letter-topic-not-source", estate)) == 1


def test_dead_letter_rules_do_not_list_subscriptions_without_dead_lettering():
    plain = sub("plain", deps={"topic": ["orders"]})
    plain["props"]["topic"] = UNKNOWN
    estate = [topic("orders"), plain]
    for rule in ("dead-letter-topic-not-source", "dead-letter-topic-has-subscription", "dead-letter-service-agent-iam"):
        assert check(rule, estate) == [] and cannot_judge(rule, estate) == [], rule


def test_a_grant_to_a_created_service_account_is_not_the_service_agent():
    member_from_account = UNKNOWN  # app.email.apply(lambda e: f"serviceAccount:{e}")
    estate = [topic("orders"), topic("orders-dead-letter"), preview_worker(), account("app"),
              sub("drain", "orders-dead-letter"),
              topic_grant("pub", "orders-dead-letter", member=member_from_account, deps={"member": ["app"]}),
              sub_grant("sub", "worker")]
    estate[-2]["property_dependencies"]["member"] = ["app"]
    (message,) = check("dead-letter-service-agent-iam", estate)
    assert "roles/pubsub.publisher on the dead-letter topic" in message
    assert cannot_judge("dead-letter-service-agent-iam", estate) == []


def test_a_grant_to_an_unknown_member_of_unknown_origin_is_not_judged():
    estate = [topic("orders"), topic("orders-dead-letter"), preview_worker(), sub("drain", "orders-dead-letter"),
              topic_grant("pub", "orders-dead-letter", member=UNKNOWN), sub_grant("sub", "worker")]
    assert check("dead-letter-service-agent-iam", estate) == []
    (line,) = cannot_judge("dead-letter-service-agent-iam", estate)
    # The blocking input is named as a property of the grant that blocks (PROPERTY@URN), never a sentence.
    assert line == f"{urn(facts.SUBSCRIPTION, 'worker')}: member@{urn(facts.TOPIC_IAM_MEMBER, 'pub')}"


AGENT_OF_UNKNOWN_PROJECT = f"serviceAccount:service-{UNKNOWN}@gcp-sa-pubsub.iam.gserviceaccount.com"


def test_a_member_with_the_service_agents_form_is_the_agent_though_its_number_is_unknown():
    # f"serviceAccount:service-{gcp.organizations.get_project().number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    # and a pubsub.googleapis.com ServiceIdentity's member: the form is known, the number is not.
    estate = [topic("orders"), topic("orders-dead-letter"), preview_worker(), sub("drain", "orders-dead-letter"),
              topic_grant("pub", "orders-dead-letter", member=AGENT_OF_UNKNOWN_PROJECT),
              sub_grant("sub", "worker", member=AGENT_OF_UNKNOWN_PROJECT)]
    assert check("dead-letter-service-agent-iam", estate) == []
    assert cannot_judge("dead-letter-service-agent-iam", estate) == []
    assert cannot_judge("no-public-pubsub-iam", estate) == [] and check("no-public-pubsub-iam", estate) == []
    # Known parts of another form are not the agent: the publisher grant is missing.
    estate[4] = topic_grant("pub", "orders-dead-letter", member=f"serviceAccount:{UNKNOWN}@acme.iam.gserviceaccount.com")
    (message,) = check("dead-letter-service-agent-iam", estate)
    assert "roles/pubsub.publisher on the dead-letter topic" in message
    # With the project's number configured, an agent of an unknown number may be another project's.
    numbers = {"projectNumbers": {PROJECT: "123"}}
    estate[4] = topic_grant("pub", "orders-dead-letter", member=AGENT_OF_UNKNOWN_PROJECT)
    assert check("dead-letter-service-agent-iam", estate, numbers) == []
    assert len(cannot_judge("dead-letter-service-agent-iam", estate, numbers)) == 1


def test_a_missing_subscriber_grant_decides_though_the_dead_letter_topic_is_unknown():
    # The dead-letter topic comes from a StackReference (no dependency resolves it); no subscriber grant.
    worker = sub("worker", deadLetterPolicy={"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5})
    (message,) = check("dead-letter-service-agent-iam", [topic("orders"), worker])
    assert "roles/pubsub.subscriber on the subscription itself" in message and "publisher" not in message
    granted = [topic("orders"), worker, sub_grant("sub", "worker")]
    assert check("dead-letter-service-agent-iam", granted) == []
    assert cannot_judge("dead-letter-service-agent-iam", granted) == [
        f"{urn(facts.SUBSCRIPTION, 'worker')}: deadLetterPolicy.deadLetterTopic"]


def test_a_push_endpoint_is_judged_by_its_known_beginning():
    service = {"type": RUN, "name": "svc", "props": {"location": "us-east1"}}
    # svc.statuses[0].url + "/push": the URL output's documented form is https://<unknown>.
    from_url = sub("push", pushConfig={"pushEndpoint": f"https://{UNKNOWN}/push"}, deps={"pushConfig": ["svc"]})
    assert check("push-endpoint-https", [service, from_url]) == []
    assert cannot_judge("push-endpoint-https", [service, from_url]) == []
    # Output.concat("http://", svc.name, ".internal.acme.net/hook"): plain HTTP, whatever the name.
    from_name = sub("push", pushConfig={"pushEndpoint": f"http://{UNKNOWN}.internal.acme.net/hook"},
                    deps={"pushConfig": ["svc"]})
    (message,) = check("push-endpoint-https", [service, from_name])
    assert "'http://<unknown>.internal.acme.net/hook'" in message
    # Wholly unknown (what `pulumi preview` sends for any interpolation of an unknown): not judged, even
    # when it depends only on a Cloud Run service (its name is not a URL).
    wholly = sub("push", pushConfig={"pushEndpoint": UNKNOWN}, deps={"pushConfig": ["svc"]})
    assert check("push-endpoint-https", [service, wholly]) == []
    assert cannot_judge("push-endpoint-https", [service, wholly]) == [f"{urn(facts.SUBSCRIPTION, 'push')}: pushConfig.pushEndpoint"]
    unknown_scheme = sub("push", pushConfig={"pushEndpoint": f"{UNKNOWN}://x.example.com"})
    assert check("push-endpoint-https", [unknown_scheme]) == [] and len(cannot_judge("push-endpoint-https", [unknown_scheme])) == 1
    plain_http = sub("push", pushConfig={"pushEndpoint": "http://x.example.com"})
    assert len(check("push-endpoint-https", [plain_http])) == 1
    pull = sub("pull")
    assert check("push-endpoint-https", [pull]) == [] and cannot_judge("push-endpoint-https", [pull]) == []


def test_a_rule_that_fired_is_not_also_listed_as_not_judged():
    # Unknown retention, but an exactly-once push subscription: that rule fires; it is not "not judged".
    eo_push = sub("eo", enableExactlyOnceDelivery=True, pushConfig={"pushEndpoint": "https://x.example.com"},
                  messageRetentionDuration=UNKNOWN)
    assert len(check("no-exactly-once-on-push", [eo_push])) == 1
    assert cannot_judge("no-exactly-once-on-push", [eo_push]) == []
    assert cannot_judge("retention-in-range", [eo_push]) == ["messageRetentionDuration"]
