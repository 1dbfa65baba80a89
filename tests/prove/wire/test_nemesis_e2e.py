"""The fault layer on the wire, on the real emulator with real Spark and the real client library.

- planted anomalies (a known truth): `conform --self-test`'s run finds exactly them, each with the rows of
  the planted message, and nothing else;
- network faults (the target not altered): each applied is a row of the evidence and named under the
  guarantees, and the verdict is what the documented facts give.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid

import pyarrow.compute as pc
import pytest

from pubsubguard.core.apply import apply_plan
from pubsubguard.validation import job, selftest

pytestmark = pytest.mark.emulator


def test_self_test_finds_exactly_the_planted_anomalies(spark, emulator, tmp_path):
    lines: list[str] = []
    code = selftest.self_test(tmp_path, spark=spark, log=lines.append)
    match = re.fullmatch(r"self-test: planted (\d+)/(\d+) found, (\d+) unplanted errors?, (\d+) unplanted advisor(?:y|ies)",
                         lines[-1])
    assert match, lines
    found, planted, extra, advisories = map(int, match.groups())
    assert (code, found, extra) == (0, planted, 0) and planted >= 8, lines
    assert sum(line.startswith("self-test: UNPLANTED advisory ") for line in lines) == advisories, lines
    verdict = selftest.judge(tmp_path / "run")
    kinds = {item["planted"] for item in verdict["found"]}
    assert kinds == {"drop_delivery", "duplicate_after_ack", "ack_lie", "swap", "strip_dead_letter_attributes"}
    assert verdict["redeliveries"]["found"]  # a duplicate where exactly-once is not declared: counted
    # every planted finding carries the rows of its planted message
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    findings = selftest.findings_of(report)
    for item in verdict["found"]:
        hits = [f for f in findings if f["subscription"] == item["subscription"] and f["kind"] == item["kind"]
                and f["key"] == item["key"]]
        rows = [r for f in hits for r in f["evidence"]]
        assert any(r.get("key") == item["key"] and r.get("seq") == item["seq"] for r in rows), item
    # each applied planted fault is a row of the evidence: time, RPC, message ids
    applied = json.loads((tmp_path / "run" / "evidence" / "run.json").read_text())["parameters"]["nemesis"]["applied"]
    assert all(r["time_us"] and r["rpc"] and (r["message_ids"] or r["kind"] == "partition") for r in applied)


# seed "0": each rate entry's draws are its own sequence (per entry and call), and the first Acknowledge call of
# entries 2 and 5 is drawn (`faults.unit("0", 2, "lose_response", "call", 1)` = 0.04, `unit("0", 5, "delay",
# "call", 1)` = 0.06): with a run's own seed, a run with few Acknowledge calls could draw none. The delayed
# acks are those of `{t}-dl`, on which no other entry acts: an entry on `{t}-ordered` can find no Acknowledge
# call at all, since the emulator delivers nothing more of the keys outstanding when an ordered stream is
# reset (conformance scenario ordered-stream-reset-keeps-delivering) and the kill at +1.5 s may come before
# the first delivery (seen in CI on a loaded machine: 30 of 30 never delivered, no ack to delay). While the
# dead-letter subscription's stream is open the emulator serves the others only every 10 s (every
# subscription's median latency here is 9.97-9.98 s), and a kill holds an exactly-once subscription's
# outstanding messages until their 10 s ack deadline: in CI on 2026-12-05 `{t}-eod`, killed every 4 s, made
# no Acknowledge call at all, so there was no reply to lose. Its kills are 12 s apart, so each stream it opens
# lives through one of the emulator's 10 s rounds
NETWORK = {"seed": "0", "faults": [
    {"kind": "kill_stream", "subscription": "{t}-eod", "after_s": 4, "every_s": 12},
    {"kind": "kill_stream", "subscription": "{t}-ordered", "after_s": 1.5, "every_s": 4},
    {"kind": "lose_response", "rpc": "acknowledge", "subscription": "{t}-eod", "rate": 0.5},
    {"kind": "lose_response", "rpc": "modify_ack_deadline", "subscription": "{t}-plain", "rate": 1},
    {"kind": "delay", "rpc": "publish", "topic": "{t}", "ms": 20, "rate": 1},
    {"kind": "delay", "rpc": "acknowledge", "subscription": "{t}-dl", "ms": 100, "rate": 0.5},
    {"kind": "partition", "subscription": "{t}-plain", "task": "sub-1", "after_s": 0.5, "for_s": 12},
]}


def _verify_under(schedule_of: dict, spark, tmp_path, prefix: str) -> tuple[str, int, dict]:
    """The self-test's estate on a fresh topic, applied on the emulator and verified under the schedule
    (`{t}`: the topic): (topic, exit code, report.json)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    plan, plan_file = selftest.estate_plan(tmp_path, topic, "test")
    apply_plan(plan)
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text(json.dumps(schedule_of).replace("{t}", topic))
    report = tmp_path / "report"
    code = job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "10",
                     "--drain-timeout", "40", "--report", str(report), "--no-progress", "--nemesis", str(schedule)],
                    spark=spark)
    return topic, code, json.loads((report / "report.json").read_text())


def test_network_faults_are_applied_recorded_and_named(spark, emulator, tmp_path):
    topic, code, result = _verify_under(NETWORK, spark, tmp_path, "nf")
    applied = result["parameters"]["nemesis"]["applied"]
    by_kind = {}
    for row in applied:
        by_kind.setdefault((row["kind"], row["rpc"]), []).append(row)
    assert not any(r["planted"] for r in applied)
    for kind, rpc in [("kill_stream", "StreamingPull"), ("lose_response", "Acknowledge"),
                      ("lose_response", "ModifyAckDeadline"), ("delay", "Publish"), ("delay", "Acknowledge")]:
        assert by_kind.get((kind, rpc)), (kind, rpc, sorted(by_kind))
    assert any(r["kind"] == "partition" for r in applied)
    for (kind, rpc), rows in by_kind.items():
        if kind in ("lose_response", "delay"):
            assert all(r["message_ids"] for r in rows), (kind, rpc)
    subs = result["subscriptions"]
    eod = subs[f"{topic}-eod"]
    assert "stream kills" in eod["network_faults"]["under"] and "lost ack responses" in eod["network_faults"]["under"]
    assert "partitions" in subs[f"{topic}-plain"]["network_faults"]["under"]
    # only the probe's twins and topics are touched (not the filter canary's calls)
    assert all(r["client"] != "driver:admin" for r in applied)
    # the facts: a lost ack reply is an ack the client saw fail, so a redelivery after it is no exactly-once
    # violation; a stream reset or a partition does not break exactly-once, and a reset does not break
    # order (the rewind allowed)
    assert eod["guarantees"]["exactly_once"] in ("holds", "inconclusive"), eod["findings"]
    for name, sub in subs.items():
        assert not [k for k in sub["findings"] if k in ("duplicate_after_ack", "duplicate_while_outstanding",
                                                        "stale_ack_accepted", "out_of_order")], (name, sub["findings"])
    assert code in (0, 1)


# drawn per call: the probe publishes 3 keys x 10 messages in ~3 Publish calls; with this seed the first call's
# reply is lost and the next calls' (the retry among them) are not (`faults.unit("1", 0, "lose_response", "call", n)`
# for n = 1..4: 0.41, 0.73, 0.98, 0.75)
LOST_PUBLISH_REPLIES = {"seed": "1", "faults": [{"kind": "lose_response", "rpc": "publish", "topic": "{t}", "rate": 0.5}]}


def test_lost_publish_replies_are_publish_side_duplicates_never_redeliveries(spark, emulator, tmp_path):
    """A Publish forwarded and its reply dropped: the client publishes again, the target holds the message
    twice under two ids. Every subscription of the topic reports each such second id as a `publish_duplicate`
    (advisory) with the rows of both ids, counts them (`publish_duplicates`), and reads none of them as a
    redelivery: no exactly-once or ordering finding, no redelivery counted (the run injects no client fault)."""
    topic, code, result = _verify_under(LOST_PUBLISH_REPLIES, spark, tmp_path, "lp")
    applied = [r for r in result["parameters"]["nemesis"]["applied"] if r["kind"] == "lose_response"]
    assert applied and all(r["rpc"] == "Publish" and r["message_ids"] and r["topic"] == topic for r in applied)
    lost_ids = {i for r in applied for i in r["message_ids"]}
    subs = result["subscriptions"]
    under = subs[f"{topic}-eod"]["network_faults"]["under"]
    assert under == (f"{len(applied)} lost publish response" + ("s" if len(applied) > 1 else "")), under
    for name in (f"{topic}-plain", f"{topic}-eod", f"{topic}-ordered"):
        sub = subs[name]
        duplicates = sub["findings"].get("publish_duplicate", [])
        assert duplicates, (name, sorted(sub["findings"]))
        for f in duplicates:
            assert f["severity"] == "advisory" and f["guarantee"] == "completeness"
            ids = {r["message_id"] for r in f["evidence"] if r["source"] == "delivery"}
            assert len(ids) >= 2 and f["message_id"] in ids and ids & lost_ids, (name, f)
            assert all(r["key"] == f["key"] and r["seq"] == f["seq"] for r in f["evidence"]), f
        assert sub["figures"]["publish_duplicates"] == len(duplicates), (name, sub["figures"])
        assert sub["figures"]["redeliveries"] == 0, (name, sub["figures"])
        assert not [k for k in sub["findings"] if k in ("duplicate_after_ack", "duplicate_while_outstanding",
                                                        "stale_ack_accepted", "out_of_order")], (name, sub["findings"])
    assert subs[f"{topic}-eod"]["guarantees"]["exactly_once"] in ("holds", "inconclusive")
    assert subs[f"{topic}-ordered"]["guarantees"]["ordering"] in ("holds", "inconclusive")
    assert code in (0, 1)
    _every_accepted_id_must_be_delivered(spark, tmp_path / "report" / "evidence", topic, lost_ids)


def _every_accepted_id_must_be_delivered(spark, evidence_dir, topic: str, lost_ids: set[str]) -> None:
    """Completeness per message id. The ids of the dropped Publish replies are in the publish log (rows of the
    layer: the client never saw them) and were each delivered; the same evidence with the deliveries of one such
    id removed (the target accepted it and never delivered it, while its retried twin was delivered) is judged
    `lost` on every subscription, on the row of that id, and no exactly-once finding comes with it."""
    import pyarrow.parquet as pq

    from pubsubguard.validation.checks.run import run_checks
    from pubsubguard.validation.evidence.records import RunInfo
    from pubsubguard.validation.wire.nemesis import LAYER_TASK

    publishes = pq.read_table(evidence_dir / "publishes")
    deliveries = pq.read_table(evidence_dir / "deliveries")
    layer = [r for r in publishes.to_pylist() if r["publisher_task"] == LAYER_TASK]
    assert {r["message_id"] for r in layer} == lost_ids and all(r["status"] == "ok" and r["topic"] == topic for r in layer)
    probe_ids = {r["message_id"] for r in publishes.to_pylist() if r["publisher_task"] != LAYER_TASK}
    assert not probe_ids & lost_ids  # the client published them again under new ids
    gone = sorted(lost_ids)[0]
    subs = [s for s in RunInfo.read(evidence_dir).subscriptions if s.topic == topic]
    kept = deliveries.filter(pc.invert(pc.equal(deliveries["message_id"], gone)))
    assert kept.num_rows < deliveries.num_rows
    for table, expect_lost in ((deliveries, False), (kept, True)):
        checked = run_checks(spark.createDataFrame(publishes.to_pandas()), spark.createDataFrame(table.to_pandas()), subs)
        findings = checked.findings
        lost = [f for f in findings if f["kind"] == "lost"]
        if not expect_lost:
            assert lost == [], lost
            continue
        assert sorted(f["subscription"] for f in lost) == sorted(s.name for s in subs), lost
        assert all(f["message_id"] == gone and f["severity"] == "error" for f in lost), lost
        assert not [f for f in findings if f["kind"] in ("duplicate_after_ack", "duplicate_while_outstanding",
                                                         "stale_ack_accepted")], findings
        # on an ordered key the removed delivery leaves a gap before the retried twins: an ordering finding there
        # is the mutation's (the evidence edited), never elsewhere
        ordered = {sub.name for sub in subs if sub.ordering}
        assert {f["subscription"] for f in findings if f["kind"] == "out_of_order"} <= ordered, findings


# Under pytest -n N (--dist loadgroup) the two packet-fault runs share one worker: the interrupted one asserts
# that no netem relay process and no new pubsubguard-netem-* socket directory exists anywhere on the machine,
# which another worker's packet-fault run would make while it runs.
@pytest.mark.xdist_group("netem")
def test_packet_faults_on_the_upstream_link_hold_the_verdict(spark, emulator, tmp_path):
    """netem entries (validation/wire/netem.py): the layer's upstream bytes cross a network namespace the run makes;
    packets on its lo are dropped (and delayed, where the kernel has netem) for a window. Each window applied is
    a row and is named under the guarantees; TCP retransmits, so nothing is lost or duplicated; the namespace,
    its relays and sockets are gone afterwards."""
    from pubsubguard.validation.wire import netem

    why, support = netem.probe_support()
    if why is not None:
        pytest.skip(netem.availability_line(why, support))
    window = {"kind": "netem", "loss": 0.15, "after_s": 0.5, "for_s": 6}
    if "delay_ms" in support:
        window["delay_ms"] = 40
    topic, code, result = _verify_under({"faults": [window]}, spark, tmp_path, "pk")
    nemesis = result["parameters"]["nemesis"]
    assert nemesis["packet_faults"] == netem.availability_line(None, support)
    rows = [r for r in nemesis["applied"] if r["kind"] == "netem"]
    assert len(rows) == 1 and rows[0]["rpc"] == "TCP" and not rows[0]["detail"].startswith("NOT applied"), rows
    assert "15% of packets" in rows[0]["detail"] or "loss 15%" in rows[0]["detail"], rows[0]
    for name, sub in result["subscriptions"].items():
        assert sub["network_faults"]["under"] == "1 packet-fault window (netem)", (name, sub["network_faults"])
        assert not [k for k in sub["findings"] if k in ("lost", "duplicate_after_ack", "duplicate_while_outstanding",
                                                        "stale_ack_accepted", "out_of_order")], (name, sub["findings"])
    for name in (f"{topic}-plain", f"{topic}-eod", f"{topic}-ordered"):
        assert result["subscriptions"][name]["figures"]["distinct_delivered"] == 30, name
    assert code in (0, 1)
    namespace = rows[0]["detail"].rsplit("namespace ", 1)[1].rstrip(")")
    # the layer's upstream bytes (publishes, pulls, acks) really crossed the namespace
    assert nemesis["packet_link"]["namespace"] == namespace and nemesis["packet_link"]["bytes_relayed"] > 10_000
    assert namespace not in netem.namespaces()
    assert not [n for n in netem.namespaces() if n.startswith(f"{netem.PREFIX}{os.getpid()}-")]


def test_packet_faults_refused_where_unavailable_in_one_line():
    from pubsubguard.validation.wire import netem
    from pubsubguard.validation.wire.schedule import ScheduleError, parse_schedule

    schedule = parse_schedule({"faults": [{"kind": "kill_stream", "subscription": "s", "after_s": 1},
                                          {"kind": "netem", "delay_ms": 20, "after_s": 1, "for_s": 2}]}, "s.yaml")
    with pytest.raises(ScheduleError) as err:
        netem.refuse_unsupported(schedule, "not root", ())
    assert str(err.value) == ("--nemesis s.yaml: faults[1].kind: netem needs root and iproute2 (ip, tc) to make a "
                              "network namespace; here: not root")
    with pytest.raises(ScheduleError, match=r"faults\[1\]\.delay_ms: this kernel has no netem"):
        netem.refuse_unsupported(schedule, None, netem.IPTABLES)
    netem.refuse_unsupported(schedule, None, netem.NETEM)
    assert netem.availability_line("no tc", ()) == "packet faults: unavailable (no tc) — proxy faults only"


@pytest.mark.xdist_group("netem")  # see test_packet_faults_on_the_upstream_link_hold_the_verdict
def test_packet_fault_link_is_removed_when_the_run_is_interrupted(spark, emulator, tmp_path):
    """SIGTERM while a netem window is on: the run ends (130) and leaves no namespace, relay or socket behind."""
    import glob
    import signal
    import tempfile
    import threading
    import time

    from pubsubguard.validation.wire import netem

    why, support = netem.probe_support()
    if why is not None:
        pytest.skip(netem.availability_line(why, support))
    mine = f"{netem.PREFIX}{os.getpid()}-"
    sockets_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "pubsubguard-netem-*")))
    seen = []

    def interrupt_when_shaping() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            names = [n for n in netem.namespaces() if n.startswith(mine) and not n.endswith("-probe")]
            if names:
                seen.extend(names)
                time.sleep(4)  # the window (after 1 s) is on
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.2)

    saved = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    killer = threading.Thread(target=interrupt_when_shaping, daemon=True)
    killer.start()
    try:
        topic = f"pi-{uuid.uuid4().hex[:8]}"
        plan, plan_file = selftest.estate_plan(tmp_path, topic, "test")
        apply_plan(plan)
        schedule = tmp_path / "schedule.json"
        schedule.write_text(json.dumps({"faults": [{"kind": "netem", "loss": 0.1, "after_s": 1, "for_s": 60}]}))
        code = job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "200",
                         "--drain-timeout", "60", "--report", str(tmp_path / "report"), "--no-progress",
                         "--nemesis", str(schedule)], spark=spark)
        killer.join(5)
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert seen and code == 130
    assert not [n for n in netem.namespaces() if n.startswith(mine)]
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "pubsubguard-netem-*"))) <= sockets_before
    relays = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"pubsubguard.validation.wire.netem" in f.read():
                    relays.append(pid)
        except OSError:
            continue
    assert relays == []


def test_the_layer_holds_a_bounded_buffer_for_a_stream_whose_client_reads_nothing(emulator):
    """A client that stops reading its stream (the client library does when its flow control pauses it) leaves
    the layer's send waiting; the target pushes on regardless (here: no outstanding-message limit asked, and a
    10 s deadline, so everything is pushed again and again). The layer then stops reading the target once
    STREAM_BUFFER responses wait for the client, as a plain forward does. Unbounded, it held all the target
    pushed: the 20-minute soak's driver grew to 6 GiB while draining."""
    import threading

    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1 import types

    from pubsubguard.validation.wire import nemesis
    from pubsubguard.validation.wire.listeners import Listeners
    from pubsubguard.validation.wire.schedule import parse_schedule

    project = f"projects/pubsubguard-b{uuid.uuid4().hex[:10]}"
    topic, path = f"{project}/topics/paused", f"{project}/subscriptions/paused"
    # a kill an hour away: the subscription is the layer's (its streams go through it), nothing happens to it
    schedule = parse_schedule({"faults": [{"kind": "kill_stream", "subscription": "paused", "after_s": 3600,
                                           "every_s": 3600}]}, "test")
    layer = nemesis.Nemesis(schedule, twins={path: "paused"}, topics={topic: "paused-topic"}, seed="0")
    layer.start()
    listeners = Listeners({"pubsub.googleapis.com:443": emulator.host}, layer, streams=4).start()
    channel = grpc.insecure_channel(listeners.mapping["pubsub.googleapis.com:443"])
    call, ended = None, threading.Event()
    try:
        admin = pubsub_v1.SubscriberClient(client_options={"api_endpoint": listeners.mapping["pubsub.googleapis.com:443"]})
        publisher = pubsub_v1.PublisherClient(client_options={"api_endpoint": listeners.mapping["pubsub.googleapis.com:443"]})
        publisher.create_topic(name=topic)
        admin.create_subscription(request={"name": path, "topic": topic, "ack_deadline_seconds": 10})
        # a StreamingPull that asks for everything and then reads nothing (its request stream stays open)
        first = types.StreamingPullRequest(subscription=path, stream_ack_deadline_seconds=10, client_id="paused")

        def requests():
            yield first
            ended.wait()

        call = channel.stream_stream("/google.pubsub.v1.Subscriber/StreamingPull",
                                     request_serializer=types.StreamingPullRequest.serialize,
                                     response_deserializer=types.StreamingPullResponse.deserialize)(requests(), timeout=300)
        payload = b"x" * 4096
        for batch in range(40):
            for result in [publisher.publish(topic, payload, batch=str(batch)) for _ in range(100)]:
                result.result(timeout=60)
        deadline, most = time.monotonic() + 25, 0
        while time.monotonic() < deadline:
            with layer.lock:
                streams = list(layer.streams)
            most = max([most] + [s.out.qsize() for s in streams])
            time.sleep(0.2)
        state = f"{call.code()} {call.details()}" if call.done() else "open"
        assert streams, f"the stream did not go through the layer ({state})"
        assert most <= nemesis.STREAM_BUFFER, most
    finally:
        ended.set()
        if call is not None:
            call.cancel()
        channel.close()
        listeners.stop()
        layer.stop()
