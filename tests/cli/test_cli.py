"""The command line as a user meets it, driven as a subprocess: the project is the current directory
(`-C` for another), options are validated before any work, every failure is one line with the right
exit code and never a traceback, `--help` shows defaults, exit codes and an example."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.one_line import one_line
from pubsubguard import cli as cli_module

from support import ROOT
from support.command_line import cli, project  # noqa: F401 - a fixture, used by name

COMMANDS = cli_module.COMMANDS


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
