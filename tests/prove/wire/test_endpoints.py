"""Endpoints exercised (pubsubguard.validation.wire.endpoints) and the run's own access (pubsubguard.validation.probe.access).

The check on recorded traffic is tested on records; the listener on the real emulator; the whole
path with `pubsubguard.validation.job` on the dev stack (its topics and subscriptions declare us-east1): on the
emulator target (the probe's own listeners), with the misroute fault, and through the `gcp` target's
code path with every endpoint mapped to the emulator (only TLS and credentials are not exercised).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core.apply import apply_plan
from pubsubguard.core.errors import UserError
from pubsubguard.core.plan import make_plan
from pubsubguard.core.plan_file import retarget
from pubsubguard.validation.wire import endpoints
from pubsubguard.validation.wire.listeners import LISTENER_WORKERS, Listeners, iam_calls, listener_workers
from pubsubguard.validation.checks import pinning
from pubsubguard.validation import job
from pubsubguard.validation.evidence.records import DeclaredSubscription

EAST = facts.locational_endpoint("us-east1")
WEST = facts.locational_endpoint("us-west1")
GLOBAL = facts.GLOBAL_ENDPOINT


# ------------------------------------------------------------------------------------ the map
def test_endpoint_map_parses_regions_and_global():
    assert endpoints.parse_endpoint_map(["us-east1=127.0.0.1:8601", "global=localhost:8600"]) == {
        EAST: "127.0.0.1:8601", GLOBAL: "localhost:8600"}


@pytest.mark.parametrize("item", ["us-east1", "us-east1=127.0.0.1", "=127.0.0.1:1", "us-east1=:80", "us-east1=h:x"])
def test_endpoint_map_rejects_malformed_items(item):
    with pytest.raises(UserError, match="expected REGION=HOST:PORT"):
        endpoints.parse_endpoint_map([item])


def test_endpoint_map_rejects_a_region_given_twice():
    with pytest.raises(UserError, match="given twice"):
        endpoints.parse_endpoint_map(["us-east1=127.0.0.1:1", "us-east1=127.0.0.1:2"])


def test_loopback_addresses():
    assert endpoints.is_loopback("127.0.0.1:1") and endpoints.is_loopback("localhost:1")
    assert endpoints.is_loopback("[::1]:1")
    assert not endpoints.is_loopback(EAST) and not endpoints.is_loopback("10.0.0.1:443")


# ------------------------------------------------------------------------------------ the check
ORDERED = DeclaredSubscription(name="orders-ordered", topic="orders", ordering=True)
EOD = DeclaredSubscription(name="orders-eod", topic="orders", exactly_once=True)
PLAIN = DeclaredSubscription(name="orders-plain", topic="orders")
TOPIC = "projects/p/topics/orders"
TWIN = "projects/p/subscriptions/orders-eod-probe-12345678"


def record(*traffic, observed=(EAST, GLOBAL)):
    return {
        "observed": True, "observed_endpoints": list(observed),
        "declared": {"topics": {"orders": {"path": TOPIC, "endpoint": EAST}},
                     "subscriptions": {"orders-eod": {"endpoint": EAST, "twins": [TWIN]},
                                       "orders-ordered": {"endpoint": EAST, "twins": []},
                                       "orders-plain": {"endpoint": EAST, "twins": []}}},
        "traffic": [{"endpoint": e, "method": m, "resource": r, "requests": n, "messages": k, "service": "s"}
                    for e, m, r, n, k in traffic],
    }


def test_pinning_holds_when_all_traffic_uses_the_declared_endpoints():
    rec = record((EAST, "Publish", TOPIC, 3, 10), (EAST, "StreamingPull", TWIN, 1, 0), (GLOBAL, "GetTopic", TOPIC, 1, 0))
    assert pinning.pinning_findings(rec, [ORDERED, EOD, PLAIN], {"orders": 10}) == []
    assert pinning.pinning_tested(rec, ORDERED) and pinning.pinning_tested(rec, EOD)
    assert not pinning.pinning_tested(rec, PLAIN)


def test_a_publish_through_another_endpoint_is_a_mismatch_on_every_ordered_subscription():
    rec = record((EAST, "Publish", TOPIC, 2, 6), (GLOBAL, "Publish", TOPIC, 1, 4), (EAST, "StreamingPull", TWIN, 1, 0))
    found = pinning.pinning_findings(rec, [ORDERED, EOD, PLAIN], {"orders": 10})
    assert [(f["subscription"], f["form"], f["severity"]) for f in found] == [("orders-ordered", "publisher", "error")]
    assert found[0]["endpoint"] == {"declared": EAST, "used": GLOBAL, "resource": TOPIC, "requests": 1, "messages": 4}
    assert found[0]["guarantee"] == "endpoint_pinning"


def test_publishes_seen_on_no_listener_and_a_consumer_elsewhere_are_mismatches():
    rec = record((EAST, "Publish", TOPIC, 1, 4), (WEST, "StreamingPull", TWIN, 1, 0), observed=(EAST, WEST, GLOBAL))
    found = pinning.pinning_findings(rec, [ORDERED, EOD], {"orders": 10})
    forms = {(f["subscription"], f["form"]) for f in found}
    assert forms == {("orders-ordered", "unobserved_publish"), ("orders-eod", "consumer"),
                     ("orders-eod", "unobserved_consumer")}
    unseen = next(f for f in found if f["form"] == "unobserved_publish")
    assert unseen["endpoint"]["messages"] == 6


def test_nothing_is_judged_without_observed_traffic():
    rec = {**record(), "observed": False}
    assert pinning.pinning_findings(rec, [ORDERED], {"orders": 10}) == []
    assert not pinning.pinning_tested(rec, ORDERED)
    assert pinning.pinning_findings(None, [ORDERED], {}) == []


# ------------------------------------------------------------------------------ the listener
@pytest.mark.emulator
def test_only_a_stream_the_target_failed_counts_as_its_failure_not_a_cancel_or_the_fault_layers_kill():
    """The stall's second sign (`drain.EvidenceTally.stalls`): StreamingPulls that ended UNKNOWN, each timed."""
    listeners = Listeners({EAST: "127.0.0.1:9"})
    listener = listeners.listeners[EAST]
    method, sub = "/google.pubsub.v1.Subscriber/StreamingPull", "projects/p/subscriptions/s"
    try:
        for status in ("UNKNOWN", "CANCELLED", "UNAVAILABLE", "OK", "UNKNOWN"):
            listener.record("sub-0", method, sub, "peer", status=status)
        listener.record("sub-0", "/google.pubsub.v1.Subscriber/Pull", sub, "peer", status="UNKNOWN")
        failures = listeners.target_failures()
    finally:
        listener.channel.close()
    assert list(failures) == [sub] and len(failures[sub]) == 2 and failures[sub] == sorted(failures[sub])
    assert set(listeners.stream_ends()) == {sub}  # every end other than OK still counts as a reset


def test_listener_forwards_and_records_calls_and_the_emulators_iam_answers(emulator):
    from google.api_core import exceptions

    project = f"projects/pubsubguard-l{uuid.uuid4().hex[:10]}"
    listeners = Listeners({EAST: emulator.host, GLOBAL: emulator.host}).start()
    try:
        publisher = endpoints.publisher_client(EAST, listeners.mapping, "test:publisher")
        admin = endpoints.subscriber_client(GLOBAL, listeners.mapping, "test:admin")
        topic = publisher.create_topic(name=f"{project}/topics/listened").name
        publisher.publish(topic, b"x").result(timeout=30)
        with pytest.raises(exceptions.NotFound):  # an error status comes back through the listener unchanged
            admin.get_subscription(subscription=f"{project}/subscriptions/absent", timeout=30)
        with pytest.raises(exceptions.MethodNotImplemented):
            admin.test_iam_permissions(request={"resource": topic, "permissions": ["pubsub.topics.publish"]}, timeout=30)
        rows = {(r["endpoint"], r["client"], r["method"]): r for r in listeners.rows()}
    finally:
        listeners.stop()
    publish = rows[(EAST, "test:publisher", "Publish")]
    assert publish["resource"] == topic and publish["messages"] == 1 and publish["status"] == {"OK": 1}
    assert publish["connections"] == 1 and publish["request_bytes"] > 0 and publish["response_bytes"] > 0
    assert rows[(GLOBAL, "test:admin", "GetSubscription")]["status"] == {"NOT_FOUND": 1}
    iam = [r for r in iam_calls(list(rows.values())) if r["calls"]]
    assert [(r["method"], r["status"]) for r in iam] == [("TestIamPermissions", {"UNIMPLEMENTED": 1})]
    assert not any(e == EAST and m == "TestIamPermissions" for e, _, m in rows)


@pytest.mark.emulator
def test_a_listener_sized_for_the_runs_streams_still_answers_a_publish_beside_them(emulator):
    """Each StreamingPull through the listener holds one of its server's threads while it is open. At 100
    topics one subscriber task's 300 streams took all 64 and the publisher's calls queued for good (issue 44).
    A listener sized for the run's streams answers a Publish beside them all; one sized for none would not."""
    from google.cloud import pubsub_v1

    streams = LISTENER_WORKERS + 6
    project = f"projects/pubsubguard-s{uuid.uuid4().hex[:10]}"
    listeners = Listeners({EAST: emulator.host}, streams=streams).start()
    futures = []
    try:
        publisher = endpoints.publisher_client(EAST, listeners.mapping, "test:publisher")
        subscriber = endpoints.subscriber_client(EAST, listeners.mapping, "test:subscriber")
        topic = publisher.create_topic(name=f"{project}/topics/streamed").name
        flow = pubsub_v1.types.FlowControl(max_messages=1)
        for index in range(streams):
            path = f"{project}/subscriptions/streamed-{index}"
            subscriber.create_subscription(request={"name": path, "topic": topic})
            futures.append(subscriber.subscribe(path, callback=lambda message: message.ack(), flow_control=flow))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            opened = {r["resource"] for r in listeners.rows() if r["method"] == "StreamingPull" and r["requests"]}
            if len(opened) >= streams:
                break
            time.sleep(0.2)
        assert len(opened) >= streams  # every stream is open through the listener
        assert listener_workers(streams) > streams
        publisher.publish(topic, b"beside the streams").result(timeout=20)
    finally:
        for future in futures:
            future.cancel()
        listeners.stop()


def test_calmer_grpc_waits_still_return_at_once_when_notified_and_keep_their_deadline():
    """`calm_grpc_waits` makes a thread blocked on a gRPC call look at its deadline every second instead of ten
    times a second (600 open streams kept 2 cores busy with wake-ups). gRPC's own wait, after it: a notified
    wait returns at once, not at the end of its step, and a timeout is kept."""
    import threading

    from grpc import _common

    before = _common.MAXIMUM_WAIT_TIMEOUT
    try:
        _common.MAXIMUM_WAIT_TIMEOUT = 0.1  # gRPC's own: a probe run earlier in this process calmed it already
        endpoints.calm_grpc_waits()
        assert _common.MAXIMUM_WAIT_TIMEOUT == endpoints.GRPC_WAIT_STEP_S > 0.1
        condition, done = threading.Condition(), []

        def finish() -> None:
            time.sleep(0.05)
            with condition:
                done.append(time.monotonic())
                condition.notify_all()

        threading.Thread(target=finish).start()
        with condition:
            _common.wait(condition.wait, lambda: bool(done))
            woke = time.monotonic()
        assert woke - done[0] < 0.5 * endpoints.GRPC_WAIT_STEP_S
        with condition:
            started = time.monotonic()
            timed_out = _common.wait(condition.wait, lambda: False, timeout=0.3)
        assert timed_out and 0.25 < time.monotonic() - started < 0.3 + 0.5 * endpoints.GRPC_WAIT_STEP_S
    finally:
        _common.MAXIMUM_WAIT_TIMEOUT = before


# -------------------------------------------------------------------- the job on the dev stack
def dev_estate(tmp_path):
    """The dev stack's plan moved to a project of its own and applied to the emulator: (plan file, project)."""
    project = f"pubsubguard-e{uuid.uuid4().hex[:10]}"
    plan = make_plan("dev")
    moved = retarget(plan, project)
    apply_plan(moved)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(moved))
    return plan_file, project


def run_job(spark, plan_file, report, *extra):
    code = job.main(["--plan", str(plan_file), "--keys", "2", "--messages-per-key", "4", "--drain-timeout", "30",
                     "--report", str(report), "--no-progress", *extra], spark=spark)
    return code, json.loads((report / "report.json").read_text())


PINNED = ("orders-ordered", "orders-exactly-once", "orders-ordered-exactly-once")


@pytest.mark.emulator
def test_endpoint_pinning_holds_on_the_dev_stack_and_the_misroute_fault_violates_it(spark, emulator, tmp_path):
    plan_file, _ = dev_estate(tmp_path)
    code, report = run_job(spark, plan_file, tmp_path / "held", "--target", "emulator")
    endpoints_used = report["parameters"]["endpoints"]
    assert sorted(endpoints_used["observed_endpoints"]) == sorted([EAST, GLOBAL])
    for name in PINNED:
        sub = report["subscriptions"][name]
        assert sub["guarantees"]["endpoint_pinning"] == "holds", sub["findings"].get("endpoint_mismatch")
    # Every Publish of the ordered topic and every pull of the twins went through the us-east1 listener.
    traffic = endpoints_used["traffic"]
    publishes = [r for r in traffic if r["method"] == "Publish" and r["client"] != "driver:admin"]  # not the canary
    assert publishes and {r["endpoint"] for r in publishes} == {EAST}
    assert sum(r["messages"] for r in publishes if r["resource"].endswith("/topics/orders")) >= 8
    pulls = [r for r in traffic if r["method"] == "StreamingPull"]
    assert pulls and {r["endpoint"] for r in pulls} == {EAST}
    assert {r["client"].split(":")[1] for r in traffic} >= {"publisher", "subscriber", "admin"}

    code, report = run_job(spark, plan_file, tmp_path / "misrouted", "--target", "emulator", "--faults", "misroute=1")
    assert code == 1 and report["verdict"] == "violated"
    for name in ("orders-ordered", "orders-ordered-exactly-once"):
        sub = report["subscriptions"][name]
        assert sub["guarantees"]["endpoint_pinning"] == "violated"
        (found,) = [f for f in sub["findings"]["endpoint_mismatch"] if f["form"] == "publisher"]
        assert found["endpoint"]["declared"] == EAST and found["endpoint"]["used"] == GLOBAL
        assert "the global endpoint" in found["detail"]
    # The consumers were not misrouted: exactly-once alone (no ordering) still holds its pinning.
    assert report["subscriptions"]["orders-exactly-once"]["guarantees"]["endpoint_pinning"] == "holds"


@pytest.mark.emulator
def test_gcp_target_code_path_with_endpoints_mapped_to_the_emulator(spark, emulator, tmp_path, monkeypatch):
    """`--target gcp`, every endpoint mapped to the emulator: the gcp path end to end (no TLS, no
    credentials); the IAM calls are made, and the report says the emulator did not answer them."""
    plan_file, project = dev_estate(tmp_path)
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    code, report = run_job(spark, plan_file, tmp_path / "gcp", "--target", "gcp",
                           "--endpoint", f"us-east1={emulator.host}", "--endpoint", f"global={emulator.host}")
    assert report["target"] == "gcp"
    parameters = report["parameters"]
    assert parameters["identity"].startswith("anonymous (every endpoint is mapped")
    assert parameters["endpoints"]["mapping"] == {EAST: emulator.host, GLOBAL: emulator.host}
    for name in PINNED:
        assert report["subscriptions"][name]["guarantees"]["endpoint_pinning"] == "holds"
    # testIamPermissions on every topic and subscription used, before probing; the service agent's
    # grant on each dead-lettering twin, then its revocation: all made, none answered by the emulator.
    iam = parameters["iam"]
    tested = {a["resource"] for a in iam if a["call"] == "testIamPermissions"}
    assert f"projects/{project}/topics/orders" in tested
    assert f"projects/{project}/subscriptions/orders-ordered" in tested
    assert {a["result"] for a in iam if a["call"] == "testIamPermissions"} == {"not answered"}
    grants = [a for a in iam if a["call"] == "setIamPolicy"]
    dead_lettering_twins = {t for t, declared in parameters["twins"].items()
                            if declared in ("orders-ordered", "orders-exactly-once", "payments-exactly-once")}
    assert {a["resource"] for a in grants} >= {t for t in dead_lettering_twins}
    assert {a["result"] for a in grants} == {"not answered"}
    seen = {(r["method"], r["resource"]): r["status"] for r in parameters["endpoints"]["traffic"]
            if r["service"].endswith("IAMPolicy") and r["calls"]}
    assert ("TestIamPermissions", f"projects/{project}/topics/orders") in seen
    assert len(dead_lettering_twins) == 3
    assert [seen.get(("GetIamPolicy", twin)) for twin in sorted(dead_lettering_twins)] == [{"UNIMPLEMENTED": 1}] * 3
    assert any("did not answer testIamPermissions" in o for o in report["observations"])
    assert any("did not answer setIamPolicy/getIamPolicy" in o for o in report["observations"])
