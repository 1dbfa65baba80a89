"""The command line as a user meets it, driven as a subprocess: the project is the current directory
(`-C` for another), options are validated before any work, every failure is one line with the right
exit code and never a traceback, `--help` shows defaults, exit codes and an example."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.one_line import one_line
from pubsubguard import cli as cli_module

from support import ROOT
COMMANDS = cli_module.COMMANDS


def cli(*argv: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "pubsubguard", *argv], capture_output=True, text=True, timeout=timeout,
        cwd=cwd or ROOT, env={**os.environ, "NO_GCE_CHECK": "true", **(env or {})},
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project (Pulumi.yaml, the dev stack, the program) somewhere else."""
    copy = tmp_path / "myproj"
    copy.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "infra", copy / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / ".venv").symlink_to(sys.prefix)  # the virtualenv Pulumi.yaml names, as `pulumi install` makes it
    return copy


# --- the project directory ------------------------------------------------------------------------
def test_the_project_is_the_current_directory(project):
    stack = project / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("name: orders\n", "name: receipts\n", 1))
    here = cli("plan", cwd=project)
    assert here.returncode == 0, here.stderr
    topics = {r["inputs"]["name"] for r in json.loads(here.stdout)["resources"] if r["type"] == "gcp:pubsub/topic:Topic"}
    assert "receipts" in topics and "orders" not in topics
    def resources(text: str) -> list:  # where the program made each resource aside (a path under the project)
        return [{k: v for k, v in r.items() if k != "source"} for r in json.loads(text)["resources"]]

    for option in ("-C", "--cwd", "--root"):
        there = cli("plan", option, str(project), "-s", "dev", cwd=ROOT / "docs")
        assert resources(there.stdout) == resources(here.stdout), option


def test_a_directory_without_a_project_is_named(tmp_path):
    one_line(cli("plan", cwd=tmp_path), 2, f"{tmp_path / 'Pulumi.yaml'}: not found")
    one_line(cli("check", "-C", str(tmp_path / "nope")), 2, "-C/--cwd", "nope: not a directory")


@pytest.mark.emulator
def test_two_projects_run_two_emulators_and_stop_only_their_own(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    env = {"PUBSUB_EMULATOR_HOST": ""}
    hosts = {}
    try:
        for directory in (first, second):
            started = cli("emulator", "start", cwd=directory, env=env)
            assert started.returncode == 0, started.stderr
            hosts[directory] = started.stdout.strip().split("=", 1)[1]
            assert (directory / ".pubsubguard" / "emulator.json").is_file()
        assert hosts[first] != hosts[second]
        stopped = cli("emulator", "stop", "-C", str(first), env=env)
        assert stopped.returncode == 0 and hosts[first] in stopped.stderr
        assert cli("emulator", "status", cwd=first, env=env).returncode == 1
        status = cli("emulator", "status", cwd=second, env=env)
        assert status.returncode == 0 and hosts[second] in status.stdout, status.stdout
    finally:
        for directory in (first, second):
            cli("emulator", "stop", cwd=directory, env=env)


# --- the stack file ---------------------------------------------------------------------------------
def test_yaml_errors_name_the_stack_file_line_and_column(project):
    (project / "Pulumi.broken.yaml").write_text("config:\n  gcp:project: x\n  pubsubguard:estate: {topics: [\n")
    for argv in (("plan", "-s", "broken"), ("check", "-s", "broken"), ("verify", "-s", "broken")):
        line = one_line(cli(*argv, cwd=project, env={"PUBSUB_EMULATOR_HOST": ""}), 2, "Pulumi.broken.yaml:4:1: not valid YAML")
        assert "<unicode string>" not in line


def test_a_secret_in_the_stack_file_says_what_the_offline_plan_does(project):
    stack = project / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace('pubsubguard:projectNumber: "100000000001"',
                                               "pubsubguard:projectNumber: {secure: AAABAJ2k1Zq3}"))
    one_line(cli("plan", cwd=project), 2, "Pulumi.dev.yaml: pubsubguard:projectNumber: a secret (`secure:`)",
             "cannot decrypt", "plain text")


def test_an_empty_estate_is_a_warning_not_an_error(project):
    (project / "Pulumi.empty.yaml").write_text(
        'config:\n  gcp:project: x\n  pubsubguard:projectNumber: "1"\n  pubsubguard:estate:\n    topics: []\n')
    done = cli("plan", "-s", "empty", cwd=project)
    assert done.returncode == 0
    assert done.stderr.strip() == "Pulumi.empty.yaml: pubsubguard:estate.topics: the estate declares no topics; nothing is created"
    assert json.loads(done.stdout)["resources"]


def test_an_unknown_field_suggests_the_known_one(project):
    stack = project / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("message_retention: 1d", "message_retension: 1d", 1))
    done = cli("plan", cwd=project)
    assert done.returncode == 2
    assert "pubsubguard:estate.topics[0].message_retension: unknown field; did you mean 'message_retention'?" in done.stderr


# --- help, version ------------------------------------------------------------------------------------
def test_version_comes_from_the_package_metadata():
    from importlib import metadata

    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"pubsubguard {metadata.version('pubsubguard')}"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_defaults_exit_codes_and_an_example(command):
    done = cli(command, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "exit codes:" in text and "130 interrupted" in text and "2 " in text
    assert f"pubsubguard {command}" in text.split("example:")[1]
    if command not in ("emulator", "conform", "bundle", "pack"):  # no stack: a project's emulator, throwaway scenarios, the job's bundle, the pack
        assert "-s STACK, --stack STACK" in text and "(default: dev)" in text
    assert "-C DIR, --cwd DIR, --root DIR" in text and "(default: the current directory)" in text


def test_each_command_description_is_one_sentence_with_one_stop():
    from pubsubguard.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():
        assert sub.description[-1] in ".?" and sub.description[-2] not in ".?!", f"{name}: {sub.description!r}"
    text = " ".join(cli("conform", "--help").stdout.split())
    assert "does the target keep? options:" in text and "keep?." not in text


def test_every_option_has_help():
    from pubsubguard.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}: no help"


def test_help_names_what_out_and_policy_config_are():
    assert "write the plan JSON to this FILE" in " ".join(cli("plan", "--help").stdout.split())
    check = " ".join(cli("check", "--help").stdout.split())
    assert "write the report to this FILE" in check and "a FILE of JSON" in check
    assert "output DIRECTORY" in " ".join(cli("run", "--help").stdout.split())
    assert "report DIRECTORY" in " ".join(cli("verify", "--help").stdout.split())


# --- options validated at parse time --------------------------------------------------------------
@pytest.mark.parametrize("argv, says", [
    (("verify", "--skew-us", "-1"), "argument --skew-us: expected a whole number of at least 0, got -1"),
    (("verify", "--keys", "0"), "argument --keys: expected a whole number of at least 1, got 0"),
    (("verify", "--drain-timeout", "-5"), "argument --drain-timeout: expected a number of seconds greater than 0"),
    (("verify", "--faults", "garbage"), "argument --faults: 'garbage' is not name=value"),
    (("verify", "--master", "bogus[x]"), "argument --master: 'bogus[x]' is not a Spark master URL"),
    (("verify", "--master", "local[0]"), "argument --master: 'local[0]' is not a Spark master URL"),
    (("run", "--keys", "0"), "argument --keys: expected a whole number of at least 1, got 0"),
    (("run", "--faults", "nack=2"), "argument --faults: nack=2: expected a fraction from 0 to 1"),
    (("run", "--messages-per-key", "x"), "argument --messages-per-key: expected a whole number"),
    (("run", "--rate", "0"), "argument --rate: expected messages per second (a number greater than 0), got 0"),
    (("verify", "--rate", "fast"), "argument --rate: expected messages per second (a number greater than 0), got 'fast'"),
    (("run", "--drain-timeout", "0"), "argument --drain-timeout: expected a number of seconds greater than 0"),
    (("run", "--master", "spark://"), "argument --master: 'spark://' is not a Spark master URL"),
    (("emulator", "start", "--port", "70000"), "argument --port: expected a TCP port from 1 to 65535"),
    (("verify", "--push-port", "70000"), "argument --push-port: expected a TCP port from 1 to 65535, got '70000'"),
    (("verify", "--push-port", "0"), "argument --push-port: expected a TCP port from 1 to 65535"),
    (("verify", "--conform-apart", "localhost"), "argument --conform-apart: 'localhost': expected HOST:PORT"),
    (("check", "--policy-config", "no-such.json"), "argument --policy-config: no-such.json: no such file"),
    (("apply", "--emulator", "--plan", "no-such.json"), "argument --plan: no-such.json: no such file"),
])
def test_bad_options_are_one_line_before_any_work(argv, says, tmp_path):
    started = time.monotonic()
    one_line(cli(*argv, cwd=tmp_path), 2, f"pubsubguard {argv[0]}: {says}", f"`pubsubguard {argv[0]} --help`")
    assert time.monotonic() - started < 20  # nothing planned, started or applied
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,3]", "local[*,2]",
                                    "spark://host-1.example:7077", "spark://a:7077,b:7077", "yarn",
                                    "k8s://https://api:443", "mesos://zk://zk:2181/mesos"])
def test_spark_master_urls_are_accepted(master):
    from pubsubguard.validation.config import spark_master

    assert spark_master(master) == master


# --- output paths checked before any work ---------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (("plan", "--out", "{file}/plan.json"), "--out"),
    (("check", "--out", "{file}/r.sarif"), "--out"),
    (("verify", "--report", "{file}/report"), "--report"),
    (("run", "--out", "{file}/out"), "--out"),
])
def test_outputs_under_a_regular_file(argv, option, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("x")
    argv = [a.format(file=file) for a in argv]
    one_line(cli(*argv), 2, f"argument {option}:", f"{file} is a file, so nothing can be created under it")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("argv, option", [
    (("check", "--out", "/proc/x.sarif"), "--out"),
    (("plan", "--out", "/proc/plan.json"), "--out"),
    (("verify", "--report", "/proc/report"), "--report"),
])
def test_outputs_in_an_unwritable_place(argv, option):
    one_line(cli(*argv), 2, f"argument {option}:", "cannot write in /proc")


def test_out_that_is_a_directory(tmp_path):
    one_line(cli("plan", "--out", str(tmp_path)), 2, "argument --out:", "is a directory (expected a file name)")


# --- environment errors, found before Spark starts -------------------------------------------------
def test_verify_gcp_without_credentials(tmp_path):
    env = {"HOME": str(tmp_path), "GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
           "PUBSUB_EMULATOR_HOST": ""}
    started = time.monotonic()
    one_line(cli("verify", "--target", "gcp", "--report", str(tmp_path / "r"), env=env), 2,
             "--target gcp: no Google Cloud credentials", "gcloud auth application-default login",
             "GOOGLE_APPLICATION_CREDENTIALS")
    assert time.monotonic() - started < 20 and not (tmp_path / "r").exists()


def test_verify_and_run_without_java(tmp_path):
    env = {"PATH": str(tmp_path), "JAVA_HOME": ""}
    for argv in (("verify", "--report", str(tmp_path / "r")), ("run", "--out", str(tmp_path / "o"))):
        one_line(cli(*argv, env=env), 2, "Java was not found", "openjdk-17-jre-headless", "JAVA_HOME")
    assert not (tmp_path / "r").exists() and not (tmp_path / "o").exists()


def test_unexpected_errors_are_one_line_with_the_debug_switch(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "pubsubguard-plan/1"}))
    one_line(cli("check", "--plan", str(plan)), 2, "pubsubguard check: unexpected error: KeyError",
             "PUBSUBGUARD_DEBUG=1")
    debug = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--plan", str(plan)], capture_output=True,
                           text=True, env={**os.environ, "PUBSUBGUARD_DEBUG": "1"}, cwd=ROOT, timeout=120)
    assert debug.returncode == 1 and "Traceback" in debug.stderr  # the bug, with its traceback, on request


def test_plan_to_stdout_ends_cleanly():
    """The Pulumi SDK's stray event loops are closed at exit (they printed an asyncio trace now and then)."""
    for _ in range(4):
        done = cli("plan")
        assert done.returncode == 0 and done.stderr == "", done.stderr


# --- the emulator sends nothing anywhere but loopback ---------------------------------------------
def test_push_endpoints_map_to_the_local_receiver(monkeypatch):
    from urllib.parse import urlsplit

    from pubsubguard.core import emulator as emu

    monkeypatch.delenv(emu.PUSH_RECEIVER_ENV, raising=False)
    declared = {"pushEndpoint": "https://orders.example.com/push?token=1", "attributes": {"x-goog-version": "v1"},
                "oidcToken": {"serviceAccountEmail": "pusher@p.iam.gserviceaccount.com"}}
    applied = emu.emulator_push_config(declared, "orders-push")
    url = urlsplit(applied["pushEndpoint"])
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path == "/push/orders-push"
    assert "orders.example.com" not in url.netloc
    assert {k: v for k, v in applied.items() if k != "pushEndpoint"} == {k: v for k, v in declared.items() if k != "pushEndpoint"}
    monkeypatch.setenv(emu.PUSH_RECEIVER_ENV, "127.0.0.1:9999")
    assert emu.emulator_push_config(declared, "s")["pushEndpoint"].startswith("http://127.0.0.1:9999/push/s?endpoint=https%3A%2F%2F")


def test_the_receiver_records_each_push_and_answers_204():
    import urllib.request

    from pubsubguard.core.emulator import PushReceiver, local_push_endpoint

    receiver = PushReceiver().start()
    try:
        url = local_push_endpoint("https://orders.example.com/push", "orders-push", receiver.host)
        with urllib.request.urlopen(urllib.request.Request(url, data=b'{"message": {}}', method="POST"), timeout=5) as answer:
            assert answer.status == 204
        push = receiver.pushes[-1]
        assert (push.subscription, push.declared_endpoint, push.body_bytes) == ("orders-push", "https://orders.example.com/push", 15)
    finally:
        receiver.stop()


def test_the_log_is_bounded(tmp_path):
    from pubsubguard.core.emulator import BoundedLog

    log = BoundedLog(tmp_path / "emulator.log", max_bytes=4096)
    for i in range(2000):
        log.write(f"line {i}: UnknownHostException orders.example.com\n".encode())
    log.close()
    sizes = [p.stat().st_size for p in tmp_path.iterdir()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emulator.log", "emulator.log.1"]
    assert sum(sizes) <= 4096 and "line 1999:" in (tmp_path / "emulator.log").read_text()


@pytest.mark.emulator
def test_the_emulator_pushes_to_its_sidecar_receiver_only(tmp_path):
    """A push subscription applied with `emulator_push_config` is delivered to the sidecar's receiver
    on loopback (logged in the bounded log); `stop()` ends the emulator and the sidecar."""
    from google.cloud import pubsub_v1

    from pubsubguard.core import emulator as emu

    started = emu.Emulator.start(project="pubsubguard-push", state_dir=tmp_path)
    saved = {k: os.environ.get(k) for k in (emu.HOST_ENV, emu.PUSH_RECEIVER_ENV)}
    try:
        os.environ[emu.HOST_ENV], os.environ[emu.PUSH_RECEIVER_ENV] = started.host, started.push_receiver
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        topic = "projects/pubsubguard-push/topics/orders"
        publisher.create_topic(name=topic)
        config = emu.emulator_push_config({"pushEndpoint": "https://orders.example.com/push"}, "orders-push")
        subscriber.create_subscription(request={"name": "projects/pubsubguard-push/subscriptions/orders-push",
                                                "topic": topic, "push_config": {"push_endpoint": config["pushEndpoint"]}})
        publisher.publish(topic, b"hello").result(timeout=30)
        deadline = time.monotonic() + 30
        while "push for orders-push" not in started.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        text = started.log.read_text()
        assert "push for orders-push (" in text and "declared endpoint https://orders.example.com/push" in text
        assert "UnknownHostException" not in text
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        started.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(started.pgid, 0)
    assert not emu.answers(started.push_receiver, expect=b"pubsubguard push receiver")


# --- apply's output -----------------------------------------------------------------------------------
@pytest.mark.emulator
def test_a_value_the_engine_cannot_serialize_is_one_line(emulator, project):
    """ack_deadline_seconds=float("nan") in the program: the engine's refusal in one line and exit 2,
    and nothing after it (the SDK's pending futures are retrieved, not reported at exit)."""
    (project / "Pulumi.yaml").write_text("name: nan\nruntime: python\n")  # a program of its own (the copy's
    (project / "__main__.py").write_text(  # infra/ would import the installed `infra` package, as under Pulumi)
        "import pulumi_gcp as gcp\n"
        "t = gcp.pubsub.Topic('orders', name='orders')\n"
        "gcp.pubsub.Subscription('s', name='orders-sub', topic=t.name, ack_deadline_seconds=float('nan'))\n")
    done = cli("apply", "--emulator", cwd=project, env={"PUBSUB_EMULATOR_HOST": emulator.host})
    one_line(done, 2, "pubsubguard apply: the program failed", "NaN")
    assert "Future exception" not in done.stdout + done.stderr


@pytest.mark.emulator
def test_apply_shows_each_resource_once_and_only_differences_by_default(emulator, tmp_path):
    import uuid

    from pubsubguard.core import readback
    from pubsubguard.core.plan import make_plan
    from pubsubguard.core.plan_file import retarget

    project = f"pubsubguard-c{uuid.uuid4().hex[:12]}"
    plan = retarget(make_plan("dev", ROOT), project)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    env = {"PUBSUB_EMULATOR_HOST": emulator.host, "COLUMNS": "400"}

    first = cli("apply", "--emulator", "--plan", str(plan_file), env=env)
    assert first.returncode == 0, first.stderr
    rows = [line for line in first.stdout.splitlines() if line.startswith("│ ") and line.split("│")[1].strip()]
    outcome_rows = [line.split("│")[1].strip() for line in rows if "│ subscription " in line or "│ topic " in line]
    assert len(outcome_rows) == len(set(outcome_rows)) == len(readback.declared(plan))  # each resource once
    assert "created, partly not applied" in first.stdout
    settings = {line.split("│")[2].strip() for line in rows if line.count("│") == 6}
    assert settings == {"retention_seconds"}  # only what differs (the drains' retention the emulator caps)

    everything = cli("apply", "--emulator", "--plan", str(plan_file), "--show", "all", env=env)
    assert everything.returncode == 0
    assert {"ack_deadline_seconds", "ordering", "exactly_once"} <= {
        line.split("│")[2].strip() for line in everything.stdout.splitlines() if line.count("│") == 6}
    assert len(everything.stdout.splitlines()) > 2 * len(first.stdout.splitlines())

    again = cli("apply", "--emulator", "--plan", str(plan_file), env=env)
    assert f"apply: unchanged {len(readback.declared(plan))}," in again.stdout
    assert "nothing changed" in again.stdout
    assert not any("│ topic " in line and "unchanged" in line for line in again.stdout.splitlines())


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


def test_a_broken_installation_is_one_line():
    """A module the commands import is missing (an install older than the code): one line, exit 2."""
    code = ("import sys; sys.modules['pubsubguard.core.apply'] = None; from pubsubguard.cli import main; "
            "sys.exit(main(['plan', '--help']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in done.stderr
    one_line(done, 2, "pubsubguard: cannot load the commands: ModuleNotFoundError", "bash scripts/setup.sh")


def test_run_refuses_a_schedule_naming_an_unknown_subscription_before_anything_starts(project, tmp_path):
    """The schedule's names are checked against the estate the stack's config declares before anything starts
    (no plan, no Java, no output directory): one line in run's own name, exit 2; `verify` the same."""
    schedule = tmp_path / "schedule.yaml"
    schedule.write_text("faults:\n  - {kind: kill_stream, subscription: orders-ordered-dead-letter-drain, after_s: 1}\n"
                        "  - {kind: kill_stream, subscription: no-such-subscription, after_s: 1}\n")
    for command, out in (("run", "--out"), ("verify", "--report")):
        done = cli(command, "-s", "dev", "--nemesis", str(schedule), out, str(tmp_path / command), cwd=project,
                   timeout=300)
        assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)  # no step, no plan
        assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr  # one line: no Java's either
        assert done.stderr.startswith(f"pubsubguard {command}: --nemesis {schedule}: faults[1].subscription "
                                      "'no-such-subscription': not a subscription this run probes"), done.stderr
        assert not (tmp_path / command).exists()


def test_run_and_verify_refuse_a_stack_that_is_not_there_before_anything_starts(project, tmp_path):
    for command, out in (("run", "--out"), ("verify", "--report")):
        done = cli(command, "-s", "nope", out, str(tmp_path / command), cwd=project)
        assert (done.returncode, done.stdout) == (2, ""), done.stdout
        assert done.stderr == f"pubsubguard {command}: Pulumi.nope.yaml: no such stack 'nope' (stacks here: dev)\n"
        assert not (tmp_path / command).exists()


def test_run_refuses_in_one_step_when_the_emulator_started_beside_plan_and_check_exits(project, tmp_path):
    """The emulators start beside plan and check (`pubsubguard run`): one that exits before answering ends the run
    after check, at the emulator step, exit 2 with its log's tail; nothing is applied and nothing is left running."""
    launcher = tmp_path / "cloud-pubsub-emulator"
    pids = tmp_path / "pids"
    launcher.write_text(f"#!/bin/sh\necho $$ >> {pids}\necho 'no emulator today'\nsleep 1\nexit 3\n")
    launcher.chmod(0o755)
    env = {"PUBSUBGUARD_EMULATOR": str(launcher)}
    environment = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "run", "-s", "dev", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=project,
                          env={**environment, "NO_GCE_CHECK": "true", **env})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    steps = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert [step.split(":")[0] for step in steps] == ["== plan", "== check", "== emulator"], done.stdout
    assert "exited with code 3 before answering" in done.stderr and "no emulator today" in done.stderr, done.stderr
    started = pids.read_text().split()
    assert len(started) == 2  # the target and the second one, both tried
    for pid in started:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
