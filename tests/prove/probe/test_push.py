"""Push subscriptions probed (pubsubguard.validation.probe.push): on the emulator, push twins push to the probe's own
loopback receiver, which answers per the fault plan; the rows are checked like pulled ones."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pubsubguard.core.apply import apply_plan
from support.estates import ONE_TOPIC_STACK, make_estate, twins_left, verify

pytestmark = pytest.mark.emulator

PUSH_YAML = ONE_TOPIC_STACK + """\
          - name: {t}-push
            ack_deadline_seconds: 10
            delivery: {{type: push, endpoint: "https://example.com/push"}}
          - name: {t}-push-ordered
            ordering: true
            ack_deadline_seconds: 10
            delivery: {{type: push, endpoint: "https://example.com/push"}}
          - name: {t}-push-dl
            ack_deadline_seconds: 10
            dead_letter: {{max_delivery_attempts: 5}}
            delivery: {{type: push, endpoint: "https://example.com/push"}}
          - name: {t}-push-eod
            exactly_once: true
            ack_deadline_seconds: 10
            delivery: {{type: push, endpoint: "https://example.com/push"}}
          - name: {t}-pull
            ack_deadline_seconds: 10
"""
# {t}-push-eod: push with exactly-once, which Pub/Sub refuses (the policy pack rejects it) and the
# emulator accepts (docs/emulator.md): its late answers show what exactly-once would have to refuse.


def push_rows(report_dir, name):
    table = pq.read_table(report_dir / "evidence" / "deliveries")
    return [r for r in table.to_pylist() if r["subscription"] == name]


def test_push_is_probed_and_holds_without_faults(spark, emulator, tmp_path):
    plan_file, plan, topic = make_estate(tmp_path, PUSH_YAML)
    apply_plan(plan)
    code, report = verify(spark, plan_file, tmp_path / "report")
    subs = report["subscriptions"]
    for suffix in ("push", "push-ordered", "push-dl", "push-eod"):
        sub = subs[f"{topic}-{suffix}"]
        assert sub["tested"] is True and sub["declared"]["delivery_type"] == "push"
        assert sub["figures"]["published"] == 18 and sub["figures"]["acked"] >= 18, sub["findings"]
        assert sub["guarantees"]["completeness"] == "holds", sub["findings"]
    assert subs[f"{topic}-push-ordered"]["guarantees"]["ordering"] == "holds"
    assert subs[f"{topic}-push-eod"]["guarantees"]["exactly_once"] == "holds"
    # The same rows as a pull subscriber's, written by the push receiver's task.
    rows = push_rows(tmp_path / "report", f"{topic}-push")
    assert {r["subscriber_task"] for r in rows} == {"push"} and {r["action"] for r in rows} == {"ack"}
    assert all(r["key"] and r["seq"] is not None and r["publish_time_us"] for r in rows)
    twins = report["parameters"]["twins"]
    assert {f"{topic}-push", f"{topic}-push-ordered", f"{topic}-push-dl"} <= set(twins.values())
    assert code == 0, report["observations"]
    assert twins_left(topic) == []


def test_push_faults_dead_letter_as_declared_and_late_answers_violate_exactly_once(spark, emulator, tmp_path):
    plan_file, plan, topic = make_estate(tmp_path, PUSH_YAML)
    apply_plan(plan)
    code, report = verify(spark, plan_file, tmp_path / "report", faults="nack=0.1,poison=0.1,expire=0.3")
    subs = report["subscriptions"]
    dl = subs[f"{topic}-push-dl"]
    rows = push_rows(tmp_path / "report", f"{topic}-push-dl")
    # 500 for a nack and for every poison delivery, then forwarded after the declared 5 attempts.
    assert {"nack", "ack"} <= {r["action"] for r in rows}
    assert any(r["kind"] == "dead_letter" for r in rows)
    assert dl["guarantees"]["dead_letter"] == "holds", dl["findings"]
    # Observed: the emulator's push body carries no deliveryAttempt (Pub/Sub's does with a dead-letter
    # policy); the checks count the attempts from the deliveries: each forwarded message had 5 or more.
    assert all(r["delivery_attempt"] is None for r in rows if r["kind"] == "delivery")
    forwarded = {(r["key"], r["seq"]) for r in rows if r["kind"] == "dead_letter"}
    deliveries = [(r["key"], r["seq"]) for r in rows if r["kind"] == "delivery"]
    assert all(deliveries.count(message) >= 5 for message in forwarded)
    # Held pushes: no answer until their deadline had passed, then 204 (late_ack, as a pull subscriber's
    # stale ack). Observed: the emulator waits for the answer and takes it as the ack.
    every = [r for suffix in ("push", "push-ordered", "push-dl", "push-eod") for r in push_rows(tmp_path / "report", f"{topic}-{suffix}")]
    late = [r for r in every if r["action"] == "late_ack"]
    assert late and all(r["ack_time_us"] - r["receive_time_us"] >= 10_000_000 for r in late)
    assert {r["ack_result"] for r in late} == {"success"}
    # The emulator took the late answers on the exactly-once push twin as acks: stale_ack_accepted.
    eod = subs[f"{topic}-push-eod"]
    assert any(r["subscription"] == f"{topic}-push-eod" for r in late)
    assert eod["guarantees"]["exactly_once"] == "violated"
    assert {f["form"] for f in eod["findings"]["stale_ack_accepted"]} == {"late_ack"}
    assert code == report["exit_code"] == 1 and report["verdict"] == "violated"
    for suffix in ("push", "push-ordered", "push-dl"):
        assert subs[f"{topic}-{suffix}"]["guarantees"]["completeness"] == "holds", subs[f"{topic}-{suffix}"]["findings"]


def test_on_google_cloud_push_is_not_tested_without_a_receiver_url():
    from pubsubguard.core.declared import estate
    from pubsubguard.core.plan import make_plan
    from pubsubguard.validation.probe.twins import NO_PUSH_RECEIVER, not_probed, plan_twins

    dev = estate(make_plan("dev")).declared_by_stack()
    push = dev.subscriptions["orders-push"]
    assert not_probed(push, None) == NO_PUSH_RECEIVER and "--push-receiver URL" in NO_PUSH_RECEIVER
    assert not_probed(push, "https://probe.example.net/hook") is None
    assert not_probed(dev.subscriptions["orders-ordered"], None) is None
    (twin,) = [t for t in plan_twins(dev, "0123456789abcdef", "https://probe.example.net/hook") if t.declared_name == "orders-push"]
    assert twin.request("0123456789abcdef")["push_config"] == {
        "push_endpoint": "https://probe.example.net/hook/push/orders-push-probe-01234567"}
    assert not [t for t in plan_twins(dev, "0123456789abcdef") if t.declared_name == "orders-push"]


def test_a_plan_whose_push_endpoint_and_account_are_unknown_until_deploy_is_rehearsed(spark, emulator, tmp_path, capsys):
    """The commonest push set-up: a Cloud Run service's URL and a service account created beside it, both
    unknown until deploy. `apply --emulator` stands in for them (push goes to a loopback receiver anyway),
    verify probes the push subscription through the probe's receiver, and both say so."""
    import json

    from pubsubguard import cli
    from pubsubguard.core.project import UNKNOWN

    plan_file, plan, topic = make_estate(tmp_path, ONE_TOPIC_STACK + """\
          - name: {t}-push
            ack_deadline_seconds: 10
            delivery: {{type: push, endpoint: "https://example.com/push"}}
""")
    (push,) = [r for r in plan["resources"] if r.get("custom") and r["inputs"].get("pushConfig")]
    push["inputs"]["pushConfig"] = {"pushEndpoint": UNKNOWN, "oidcToken": {"serviceAccountEmail": UNKNOWN}}
    plan_file.write_text(json.dumps(plan))
    root = tmp_path / "project"
    assert cli.main(["apply", "--emulator", "--plan", str(plan_file), "--cwd", str(root)]) == 0
    out = capsys.readouterr().out
    stood = f"{push['name']}.inputs.pushConfig.pushEndpoint, {push['name']}.inputs.pushConfig.oidcToken.serviceAccountEmail"
    assert f"apply: values unknown until deploy stood in on the emulator: {stood}" in out
    report = tmp_path / "report"
    code = cli.main(["verify", "--plan", str(plan_file), "--cwd", str(root), "--target", "emulator", "--keys", "2",
                     "--messages-per-key", "4", "--drain-timeout", "30", "--report", str(report), "--no-progress"])
    result = json.loads((report / "report.json").read_text())
    assert code == result["exit_code"] == 0, result["verdict_reason"]
    sub = result["subscriptions"][f"{topic}-push"]
    assert sub["tested"] and sub["guarantees"]["completeness"] == "holds" and sub["figures"]["acked"] >= 8
    assert any(o.startswith(f"values unknown until deploy stood in on the emulator: {stood}") for o in result["observations"])
    assert "values unknown until deploy stood in" in capsys.readouterr().out  # the summary says it too
    assert result["parameters"]["declared_source"]["stood_in"] == stood.split(", ")

    # without the stand-in, nothing could be applied: the mutation shows the test depends on it
    from pubsubguard.core import rehearsal

    saved = rehearsal.STAND_INS.copy()
    rehearsal.STAND_INS.clear()
    try:
        assert cli.main(["apply", "--emulator", "--plan", str(plan_file), "--cwd", str(root)]) == 2
        assert "values unknown until deploy cannot be applied" in capsys.readouterr().err
    finally:
        rehearsal.STAND_INS.update(saved)


def test_a_reused_push_twin_pushes_to_the_new_receiver(emulator):
    """A watch restarted after a crash reuses its twins (`Twins.create(reuse=True)`); its push receiver is a new one
    (on the emulator, on a port of its own), so a reused push twin is pointed at it, or it would push to the dead
    receiver for good (seen: every push message of a restarted watch lost past its horizon)."""
    from google.cloud import pubsub_v1

    from pubsubguard.validation.probe.twins import TwinSpec, Twins

    project = "pubsubguard-dev"
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic = publisher.create_topic(name=f"projects/{project}/topics/t-repoint").name
    path = f"projects/{project}/subscriptions/t-repoint-probe-r1"

    def twins(endpoint: str, reuse: bool) -> Twins:
        made = Twins("r1", [TwinSpec(path, topic, "t-repoint-sub", push_endpoint=endpoint)], subscriber)
        made.create(reuse=reuse)
        return made

    first = twins("http://127.0.0.1:1/push/a", reuse=False)
    assert first.reused == [] and subscriber.get_subscription(subscription=path).push_config.push_endpoint.endswith(":1/push/a")
    again = twins("http://127.0.0.1:2/push/a", reuse=True)
    assert again.reused == [path]
    assert subscriber.get_subscription(subscription=path).push_config.push_endpoint == "http://127.0.0.1:2/push/a"
