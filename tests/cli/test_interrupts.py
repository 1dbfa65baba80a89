"""Ctrl-C, as a terminal sends it to the command's whole process group: one line and exit 130, whatever runs at the
time (the policy check, Spark starting, the probe and the scenarios), and nothing left behind: no process, no
resource the run created."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import ROOT
from support.one_line import one_line


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append((int(stat.parent.name), (stat.parent / "cmdline").read_bytes().decode(errors="replace")))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _descendants(pid: int) -> list[tuple[int, str]]:
    found, frontier = [], [pid]
    while frontier:
        children = _children(frontier.pop())
        found += children
        frontier += [child for child, _ in children]
    return found


def _alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1]
    except OSError:
        return False


def _interrupt_when(child: str, argv: list[str], env: dict | None = None,
                    until=None, cwd: Path = ROOT) -> tuple[subprocess.CompletedProcess, list]:
    """Run the CLI, send Ctrl-C (to its whole group, as a terminal does) once a descendant process whose
    command line holds `child` runs (and `until()`, if given, is true); (the finished run, processes
    left: in its group or descended from it, then killed)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pubsubguard", *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True, env={**os.environ, **(env or {})},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (any(child in cmd for _, cmd in _descendants(process.pid))
                                               and (until is None or until())):
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)
    descendants = [pid for pid, _ in _descendants(process.pid)]
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)  # a child left behind would hold stderr open
    finally:
        time.sleep(2)
        left = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout.split()
        left += [str(pid) for pid in descendants if _alive(pid) and str(pid) not in left]
        for pid in left:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(process.args, process.returncode, "", err), left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_during_the_policy_check_is_one_line_and_130(tmp_path):
    """The estate is large enough (300 topics, about 1,200 resources: several seconds of judging) that
    Ctrl-C lands while the pack is at work; on the dev stack the whole check takes about a second, so
    the interrupt could land as the interpreter exits (Python has then restored the default handler,
    and the process ends by the signal: -2, not ours to report)."""
    topics = [{"name": f"t{i:03d}", "subscriptions": [{"name": f"t{i:03d}-pull", "expiration": "never"},
                                                       {"name": f"t{i:03d}-ordered", "ordering": True}]}
              for i in range(300)]
    (tmp_path / "Pulumi.yaml").write_text(json.dumps({"name": "big", "runtime": "python", "main": str(ROOT / "infra")}))
    (tmp_path / "Pulumi.big.yaml").write_text(json.dumps({"config": {
        "gcp:project": "big-project", "pubsubguard:projectNumber": "100000000001",
        "pubsubguard:estate": {"topics": topics}}}))
    done, left = _interrupt_when("pulumi.policy", ["check", "-s", "big"], cwd=tmp_path)
    assert not left, "processes left in the command's group"
    one_line(done, 130, "pubsubguard check: interrupted")


@pytest.mark.emulator
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_while_spark_starts_is_one_line_and_leaves_no_jvm(emulator, tmp_path):
    """Interrupted once Spark's JVM is launched: exit 130, one line, and the JVM (which ignores
    Ctrl-C and would print its own stack trace later) is ended with the command."""
    done, left = _interrupt_when("java", ["verify", "--report", str(tmp_path / "r")],
                                 env={"PUBSUB_EMULATOR_HOST": emulator.host})
    assert not left, "processes left in the command's group"
    err = done.stderr
    lines = [line for line in err.splitlines() if line.startswith("pubsubguard") or "Traceback" in line or "\tat " in line]
    assert lines == ["pubsubguard verify: interrupted"], err
    assert done.returncode == 130


@pytest.mark.emulator
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_while_the_probe_and_the_scenarios_run_deletes_what_both_created(emulator, tmp_path):
    """`verify --conform` runs the conformance scenarios beside the probe: interrupted while both have
    resources on the target, it deletes the twins and the scenarios' throwaway topics and subscriptions."""
    from google.cloud import pubsub_v1

    from pubsubguard.validation.conformance.harness import NAME_PREFIX

    env = {"PUBSUB_EMULATOR_HOST": emulator.host}
    applied = subprocess.run([sys.executable, "-m", "pubsubguard", "apply", "--emulator", "-s", "dev"], cwd=ROOT,
                             capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert applied.returncode == 0, applied.stderr
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()

    def leftovers() -> tuple[list, list]:
        topics = [t.name for t in publisher.list_topics(request={"project": "projects/pubsubguard-dev"})]
        subs = [s.name for s in subscriber.list_subscriptions(request={"project": "projects/pubsubguard-dev"})]
        return [n for n in topics + subs if NAME_PREFIX in n], [n for n in subs if "-probe-" in n]

    def both_running() -> bool:
        scenarios, twins = leftovers()
        return bool(scenarios) and bool(twins)

    done, left = _interrupt_when("java", ["verify", "--conform", "--keys", "2", "--messages-per-key", "5",
                                          "--faults", "expire=0.5", "--report", str(tmp_path / "r")],
                                 env=env, until=both_running)
    assert not left, "processes left in the command's group"
    lines = [line for line in done.stderr.splitlines() if line.startswith("pubsubguard") or "Traceback" in line]
    assert lines == ["pubsubguard verify: interrupted"], done.stderr
    assert done.returncode == 130
    assert leftovers() == ([], [])
