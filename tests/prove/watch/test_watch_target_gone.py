"""A watch whose target goes away: the project's emulator stopped (`pubsubguard emulator stop`) while a real watch
runs, or while it decides what it published after `--duration`, then SIGTERM. The watch ends within a bound, exit 2
with one line on stderr naming the emulator, no traceback, nothing of it left running, and its --out as a clean stop
leaves it: watch.json not running, findings.jsonl whole as findings.commit says, the final report, no stop flags.

Seen before the fix: the twins' deletes alone were retried 60 s each against the stopped emulator and the signal
only set a flag; a watch of the dev stack ended 6.5 minutes after its SIGTERM, saying every guarantee held."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.command_line import project  # noqa: F401 - a fixture, used by name

STACK = """config:
  gcp:project: pubsubguard-gone
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: beacon
        publisher_region: us-east1
        subscriptions:
          - name: g-plain
            consumer_region: us-east1
            ack_deadline_seconds: 10
"""
# SIGTERM to exit: the target found gone (reachable.GONE_AFTER_S, 10 s, counted from the first unanswered check),
# the probe's tasks given 3 s then cancelled, the twins' deletes tried for 3 s, the report written; with room for a
# loaded machine. Before the fix: minutes.
EXIT_BOUND_S = 45.0
ENV = {**{k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}, "NO_GCE_CHECK": "true"}


def pubsubguard(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", *argv], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=120)


@pytest.fixture
def emulated(project):  # noqa: F811 - the fixture imported above
    """The copy of the project with the stack `gone` and its own emulator (`pubsubguard emulator start`), whose
    address is returned with it."""
    (project / "Pulumi.gone.yaml").write_text(STACK)
    started = pubsubguard("emulator", "start", cwd=project)
    assert started.returncode == 0, started.stderr
    yield project, started.stdout.strip().rpartition("=")[2]
    pubsubguard("emulator", "stop", cwd=project)


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now (from /proc)."""
    parent = {}
    for entry in Path("/proc").iterdir():
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in found}
        found |= frontier
    return found


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.25)


@pytest.mark.parametrize("phase", ["running", "deciding"])
def test_a_watch_whose_emulator_stopped_ends_on_sigterm_in_one_line(emulated, tmp_path, phase):
    """`running`: the emulator stopped after a few windows, SIGTERM at once (the watch's first stop: it would wait
    for the horizons); `deciding`: stopped once --duration ended the publishing, SIGTERM then the second stop."""
    project, host = emulated
    out, stdout, stderr = tmp_path / "w", tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    argv = [sys.executable, "-m", "pubsubguard", "watch", "-s", "gone", "--out", str(out), "--window", "2",
            "--horizon", "12", "--rate", "2", "--keys", "2", "--metrics-port", "0", "--conform-every", "0"]
    with open(stdout, "w") as said, open(stderr, "w") as errors:
        watch = subprocess.Popen([*argv, *(["--duration", "8"] if phase == "deciding" else [])], cwd=project,
                                 stdout=said, stderr=errors, env=ENV)
    try:
        if phase == "running":
            wait_for(lambda: (out / "windows.jsonl").exists()
                     and len((out / "windows.jsonl").read_text().splitlines()) >= 2, 180, "two windows judged")
        else:
            wait_for(lambda: "watch: stopping (--duration)" in stdout.read_text(), 180, "the stop after --duration")
        left = descendants(watch.pid)  # Spark's JVM and its Python workers among them
        stopped = pubsubguard("emulator", "stop", cwd=project)
        assert stopped.returncode == 0, stopped.stderr
        signalled = time.monotonic()
        watch.send_signal(signal.SIGTERM)
        try:
            watch.wait(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the watch did not end within {EXIT_BOUND_S:g} s of SIGTERM after its emulator stopped")
        took = time.monotonic() - signalled
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    said, errors = stdout.read_text(), stderr.read_text()
    assert "Traceback" not in said + errors, errors[-3000:]
    assert watch.returncode == 2, (took, said[-2000:], errors[-2000:])
    lines = errors.strip().splitlines()
    assert [line for line in lines if line.startswith("pubsubguard")] == lines[-1:], errors
    assert lines[-1].startswith(f"pubsubguard watch: the emulator at {host} stopped answering (since "), lines[-1]
    assert f"is in {out / 'findings.jsonl'} and {out / 'report.html'}" in lines[-1], lines[-1]
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in left), 15, "the watch's processes gone")

    manifest = json.loads((out / "watch.json").read_text())
    assert manifest["running"] is False and manifest["starts"] == 1, manifest
    findings = (out / "findings.jsonl").read_bytes() if (out / "findings.jsonl").exists() else b""
    commit = json.loads((out / "findings.commit").read_text()) if (out / "findings.commit").exists() else {"length": 0}
    assert commit["length"] == len(findings), commit  # every window's lines whole, none half-written
    assert len({json.loads(line)["id"] for line in findings.splitlines()}) == len(findings.splitlines())
    windows = [json.loads(line) for line in (out / "windows.jsonl").read_text().splitlines()]
    report = json.loads((out / "report.json").read_text())
    assert report["final"] is True and windows, report.keys()
    assert f"watch: {len(windows)} windows judged" in said, said[-2000:]
    assert not [p.name for p in (out / "evidence").iterdir() if p.name.startswith("_")]  # no stop or readiness flag


class Target:
    """A subscriber client whose GetSubscription raises each of `answers` in turn (None: answered)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def get_subscription(self, subscription: str, timeout: float, retry):
        assert retry is None and timeout > 0  # one call, never the library's retries
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


def test_the_target_is_gone_only_after_its_time_unanswered_and_any_answer_resets_it():
    from google.api_core import exceptions

    from pubsubguard.validation.watch.reachable import TargetCheck, TargetGone

    refused = exceptions.ServiceUnavailable("failed to connect to all addresses\nmore")
    check = TargetCheck(Target(refused, exceptions.NotFound("no twin"), refused, refused), "sub",
                        "the emulator at 127.0.0.1:1", kept="out/findings.jsonl", gone_after_s=0.2)
    check.check()
    assert check.failing
    check.check()  # NotFound is the target answering
    assert not check.failing
    check.check()
    time.sleep(0.25)
    with pytest.raises(TargetGone) as gone:
        check.check()  # unanswered twice in a row, 0.25 s apart
    said = str(gone.value)
    assert said.startswith("the emulator at 127.0.0.1:1 stopped answering (since "), said
    assert said.endswith(": ServiceUnavailable: 503 failed to connect to all addresses); what the watch decided is in "
                         "out/findings.jsonl, the next watch on this --out decides the rest"), said


def test_a_failed_probe_or_query_is_one_line_under_the_commands_prefix():
    """The runner's errors are said once under `pubsubguard watch:` (the CLI adds it): no second "watch:" inside,
    the first line of the cause only."""
    from types import SimpleNamespace

    from pubsubguard.core.errors import UserError
    from pubsubguard.validation.watch import runner

    quiet = SimpleNamespace(exception=lambda: None)
    failed = SimpleNamespace(errors=[RuntimeError("the subscriber task died\nTraceback (most recent call last): ...")])
    with pytest.raises(UserError) as said:
        runner._check(quiet, failed)
    assert str(said.value) == "the probe failed: RuntimeError: the subscriber task died"
    broken = SimpleNamespace(exception=lambda: ValueError("state store corrupt\n\tat org.apache..."))
    with pytest.raises(UserError) as said:
        runner._check(broken, SimpleNamespace(errors=[]))
    assert str(said.value) == "the streaming checks stopped: state store corrupt"


def test_a_wait_cut_short_says_what_cut_it(tmp_path, capsys):
    """After --duration, the wait for the horizons ends early on a signal (the first one, since --duration began the
    stop) or at its ceiling; the line says which, not "a second signal" when there was one."""
    from types import SimpleNamespace

    from pubsubguard.validation.watch import runner

    stop = runner.Stop(None)
    stop.hurry.set()
    query = SimpleNamespace(exception=lambda: None, lastProgress={})
    runner._decide_published(query, SimpleNamespace(), tmp_path, 1.0, 1.0, stop, 0, SimpleNamespace(check=lambda: None))
    assert "stopped before every published message was decided (a signal during the wait)" in capsys.readouterr().out


def test_duration_counts_from_the_probes_start():
    """--duration is the probe's time: the clock starts at `begin()` (after the twins, the query and the scenarios'
    first run), not when the stop's signal handlers are installed."""
    from pubsubguard.validation.watch import runner

    stop = runner.Stop(0.2)
    time.sleep(0.3)  # the setup before the probe
    assert not stop.asked()
    stop.begin()
    assert not stop.asked()
    time.sleep(0.3)
    assert stop.asked() and stop.why == "--duration"
