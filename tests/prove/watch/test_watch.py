"""`pubsubguard watch` as a user runs it: bad input refused in one line before anything starts; a watch on the
real emulator whose planted `drop_delivery` becomes a `lost` finding (past_horizon) in findings.jsonl and a
firing alert on a real Prometheus scraping it, with nothing on the clean subscription; and a real `kill -9` of
the watch in the middle of a window, resumed from its checkpoint without a finding written twice, a seq
published twice or a false finding."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from support.prometheus_server import prometheus_server

from support import ROOT
ALERTS = ROOT / "validation" / "watch" / "alerts.yml"
STACK = """config:
  gcp:project: pubsubguard-watch
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: canary
        publisher_region: us-east1
        subscriptions:
          - name: w-plain
            consumer_region: us-east1
            ack_deadline_seconds: 10
          - name: w-eod
            exactly_once: true
            consumer_region: us-east1
            ack_deadline_seconds: 10
"""


def cli(*argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    done = subprocess.run([sys.executable, "-m", "pubsubguard", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**env, "NO_GCE_CHECK": "true"})
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def project(tmp_path) -> Path:
    copy = tmp_path / "proj"
    copy.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", copy / "Pulumi.yaml")
    (copy / "Pulumi.watch.yaml").write_text(STACK)
    shutil.copytree(ROOT / "infra", copy / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / ".venv").symlink_to(sys.prefix)
    return copy


@pytest.fixture
def project_emulator(project):
    """The project's own emulator (`pubsubguard emulator start`): it outlives a killed watch."""
    started = cli("emulator", "start", cwd=project)
    assert started.returncode == 0, started.stderr
    yield project
    cli("emulator", "stop", cwd=project)


# -- bad input: one line, exit 2, before anything starts ------------------------------------------------------
def one_line_refusal(done, starts: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"pubsubguard watch: {starts}"), done.stderr
    assert "emulator" not in done.stdout and "plan:" not in done.stdout, done.stdout


def test_an_unknown_stack_is_refused_in_one_line(project, tmp_path):
    done = cli("watch", "-s", "nope", "--out", str(tmp_path / "w"), cwd=project, timeout=60)
    one_line_refusal(done, "Pulumi.nope.yaml: no such stack 'nope'")
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("rate", ["0", "-1", "nan"])
def test_a_rate_that_is_not_positive_is_refused(project, rate):
    done = cli("watch", "-s", "watch", f"--rate={rate}", cwd=project, timeout=60)
    assert done.returncode == 2 and "--rate" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_an_out_that_cannot_be_written_is_refused(project, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = cli("watch", "-s", "watch", "--out", str(blocker / "w"), cwd=project, timeout=60)
    assert done.returncode == 2 and "--out" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_an_out_of_another_stack_or_format_is_refused(project, tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    manifest = {"format": 1, "pubsubguard": "0.1.0", "stack": "prod", "project": "p", "run_id": "r"}
    (out / "watch.json").write_text(json.dumps(manifest))
    one_line_refusal(cli("watch", "-s", "watch", "--out", str(out), cwd=project, timeout=60),
                     f"--out {out}: holds the watch of stack 'prod'")
    (out / "watch.json").write_text(json.dumps({**manifest, "stack": "watch", "format": 99, "pubsubguard": "9.0"}))
    one_line_refusal(cli("watch", "-s", "watch", "--out", str(out), cwd=project, timeout=60),
                     f"--out {out}: its checkpoint was written by pubsubguard 9.0 in watch format 99")


def test_a_metrics_port_in_use_is_refused(project, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("watch", "-s", "watch", "--metrics-port", str(port), "--out", str(tmp_path / "w"), cwd=project,
                   timeout=60)
    one_line_refusal(done, f"--metrics-port {port}: already in use on 127.0.0.1")


def test_a_horizon_shorter_than_an_ack_deadline_names_the_subscription(project, tmp_path):
    done = cli("watch", "-s", "watch", "--horizon", "5", "--metrics-port", "0", "--out", str(tmp_path / "w"), cwd=project,
               timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip().splitlines()[-1] == (
        "pubsubguard watch: --horizon 5: shorter than subscription w-eod's ack deadline (10 s); a message it holds "
        "stays out that long without being lost"), done.stderr
    assert "emulator" not in done.stdout  # refused before the emulator starts


# -- a watch on the emulator ----------------------------------------------------------------------------------
def read_findings(out: Path) -> list[dict]:
    path = out / "findings.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def plant_late_delivery_row(out: Path) -> None:
    """A delivery row an hour older than anything else, written into the running watch's evidence as the subscriber
    tasks write theirs (a whole file under a name Spark skips, then renamed): behind the watermark when read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pubsubguard.validation.evidence import records

    deliveries = out / "evidence" / "deliveries"
    received = (time.time_ns() // 1000) - 3_600_000_000
    row = {field.name: None for field in records.DELIVERY_SCHEMA}
    row.update(run_id="late", subscription="w-plain", kind="delivery", message_id="late-1", key="key-000", seq=0,
               receive_time_us=received, publish_time_us=received - 1000, subscriber_task="planted",
               ack_deadline_s=10, action="ack", ack_result="success", ack_time_us=received)
    hidden = deliveries / "_part-planted-late.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=records.DELIVERY_SCHEMA), hidden)
    os.replace(hidden, deliveries / "part-planted-late-00000.parquet")


def test_a_planted_drop_is_lost_past_its_horizon_and_alerts_on_a_real_prometheus(project_emulator, tmp_path):
    """drop_delivery of w-plain's key-000 seq 2 (acked upstream, never delivered): after its horizon it is a lost
    finding of form past_horizon, planted, in findings.jsonl; PubSubMessagesPastHorizon fires for w-plain within
    the bound alerts.yml promises (horizon + a window + its `for` + a scrape and an evaluation); no alert fires
    on w-eod, which is clean; the stop decides what was published and exits 1. Without the conformance scenarios
    (the kill -9 test runs them): a window whose findings wait for their first run would add its time, seconds to
    minutes on a loaded machine, to the detection this test bounds."""
    project, out, port = project_emulator, tmp_path / "w", free_port()
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text("faults:\n  - {kind: drop_delivery, subscription: w-plain, key: key-000, seq: 2}\n")
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    watch = subprocess.Popen(
        [sys.executable, "-m", "pubsubguard", "watch", "-s", "watch", "--out", str(out), "--window", "2",
         "--horizon", "12", "--rate", "2", "--keys", "2", "--metrics-port", str(port), "--nemesis", str(schedule),
         "--duration", "150", "--conform-every", "0"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        with prometheus_server([f"127.0.0.1:{port}"], [ALERTS]) as prometheus:
            # the lost finding is decided after horizon + the watermark's delay; the alert a `for` of 1m after
            decided = prometheus.wait_for(lambda: [f for f in read_findings(out) if f["kind"] == "lost"], timeout=150)
            decided_at = time.monotonic()
            plant_late_delivery_row(out)  # the watermark is well past it: dropped, and said
            fired = prometheus.wait_for(lambda: prometheus.firing("PubSubMessagesPastHorizon", subscription="w-plain"),
                                        timeout=60 + 2 + 2 + 20)
            assert time.monotonic() - decided_at <= 60 + 2 + 2 + 20, "the alert came later than alerts.yml promises"
            assert fired and all(a["labels"]["subscription"] == "w-plain" for a in fired)
            clean = [a for a in prometheus.alerts() if a["labels"].get("subscription") == "w-eod"]
            assert clean == [], clean
        output, _ = watch.communicate(timeout=240)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 1, output[-3000:]
    assert "Traceback" not in output
    lost = decided[0]
    assert (lost["subscription"], lost["form"], lost["key"], lost["seq"], lost["planted"]) == \
        ("w-plain", "past_horizon", "key-000", 2, True), lost
    assert lost["horizon_s"] == 12 and lost["severity"] == "error" and lost["planted_by"] == "schedule entry 0"
    findings = read_findings(out)
    errors = [f for f in findings if f["severity"] == "error"]
    assert errors == [lost], errors  # one error, the planted one: nothing on w-eod, nothing invented
    assert len({f["id"] for f in findings}) == len(findings)
    windows = [json.loads(line) for line in (out / "windows.jsonl").read_text().splitlines()]
    assert any(w["subscriptions"]["w-eod"]["guarantees"].get("exactly_once") == "holds" for w in windows)
    assert "BROKE: w-plain.completeness" in output
    # the planted late row: said on its window's line and on the last, never judged (no finding of it above)
    assert "watch: window " in output and "1 evidence row came more than " in output, output[-3000:]
    assert "; 1 evidence row came behind the watermark, not judged" in output.splitlines()[-1], output[-1000:]
    report = json.loads((out / "report.json").read_text())
    assert report["final"] and report["error_findings"] == 1 and report["footprint"], report.keys()


def emulator_names(project: Path) -> list[str]:
    """Every topic and subscription the project's emulator holds in the stack's project."""
    from google.cloud import pubsub_v1

    from pubsubguard.core import emulator as emu

    # the session's emulator stays the one later tests of this process reach: restored, not removed (removed, a
    # later test's client went to Google's endpoint and retried for ten minutes)
    saved = os.environ.get(emu.HOST_ENV)
    os.environ[emu.HOST_ENV] = emu.load_state(project).host
    try:
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        where = "projects/pubsubguard-watch"  # the stack's gcp:project, where the scenarios make theirs
        return ([t.name for t in publisher.list_topics(project=where)]
                + [s.name for s in subscriber.list_subscriptions(project=where)])
    finally:
        if saved is None:
            os.environ.pop(emu.HOST_ENV, None)
        else:
            os.environ[emu.HOST_ENV] = saved


def test_a_watch_killed_mid_window_resumes_without_saying_anything_twice(project_emulator, tmp_path):
    """kill -9 of the watch in the middle of a window, then the same command again: no finding written twice,
    no seq published twice under a key, the twins reused with what they held, and no error finding (the crash
    is the watch's, not the target's)."""
    project, out = project_emulator, tmp_path / "w"
    argv = [sys.executable, "-m", "pubsubguard", "watch", "-s", "watch", "--out", str(out), "--window", "2",
            "--horizon", "12", "--rate", "2", "--keys", "2", "--metrics-port", "0"]
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    first = subprocess.Popen(argv, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            windows = (out / "windows.jsonl").read_text().splitlines() if (out / "windows.jsonl").exists() else []
            if len(windows) >= 12:  # messages decided, others in flight
                break
            time.sleep(0.5)
        else:
            pytest.fail("the first watch judged no 12 windows in 180 s")
        time.sleep(1.0)  # the middle of a 2 s window
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    time.sleep(3)  # Spark's JVM goes with its driver (its gateway reads the driver's end of a pipe)
    before = len((out / "windows.jsonl").read_text().splitlines())
    left_going = json.loads((out / "watch.json").read_text())["conformance_run"]  # killed in the middle of it?
    second = subprocess.run([*argv, "--duration", "60"], cwd=project, capture_output=True, text=True, env=env,
                            timeout=400)
    output = second.stdout + second.stderr
    assert "Traceback" not in output
    assert "did not stop (a crash)" in output and "reused" in output, output[-3000:]
    if left_going:  # what the killed watch's conformance run had made is gone
        assert f"throwaway resources of conformance run {left_going}, which a crashed watch left" in output
        assert not [n for n in emulator_names(project) if f"pubsubguard-conform-{left_going}-" in n]
    findings = read_findings(out)
    assert len({f["id"] for f in findings}) == len(findings), "a finding was written twice"
    errors = [f for f in findings if f["severity"] == "error"]
    assert second.returncode == (1 if errors else 0), output[-3000:]
    # Nothing published before the crash is called lost or unexpected. On the emulator the killed watch's streams
    # stay in its dispatch (stream-reset-keeps-delivering is violated there: docs/emulator.md): a message of the
    # resumed watch sent to one comes back an ack deadline later, or more, past this test's 12 s horizon. Such a
    # `lost` (and its `late_delivery`, when it came) is said, and explained by that scenario when it was violated.
    results = {s["id"]: s["result"] for s in json.loads((out / "conformance.json").read_text())["scenarios"]}
    for f in errors:
        assert (f["kind"], f["form"]) == ("lost", "past_horizon") and f["seq"] >= 1_000_000, f
        assert results["stream-reset-keeps-delivering"] == "violated", f  # a conformant target loses nothing here
        assert f["explained_by"] == ["stream-reset-keeps-delivering"], f
    for f in findings:
        if f["kind"] == "late_delivery":
            assert f["explained_by"] == ["stream-reset-keeps-delivering"], f
    if errors:
        assert f"explained by stream-reset-keeps-delivering (violated on this target)" in output, output[-2000:]
    publishes = ds.dataset(str(out / "evidence" / "publishes"), format="parquet").to_table().to_pylist()
    seqs = [(p["topic"], p["key"], p["seq"]) for p in publishes]
    assert len(seqs) == len(set(seqs)), "a seq was published twice under a key"
    assert any(s >= 1_000_000 for _, _, s in seqs) and any(s < 1_000_000 for _, _, s in seqs)
    manifest = json.loads((out / "watch.json").read_text())
    assert manifest["starts"] == 2 and manifest["running"] is False
    after = len((out / "windows.jsonl").read_text().splitlines())
    assert after > before


def test_a_metrics_port_held_only_by_a_stopped_watchs_connections_is_free():
    """A watch restarted right after a crash finds its --metrics-port's last connections in TIME_WAIT (its server
    closed them first): that port is free, as the metrics server binds it; a port something listens on is not."""
    from pubsubguard.commands.watch import _port_free
    from pubsubguard.core.errors import UserError

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    with pytest.raises(UserError, match=f"--metrics-port {port}: already in use"):
        _port_free(port)
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server's side closes first: its end of the connection waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    _port_free(port)
