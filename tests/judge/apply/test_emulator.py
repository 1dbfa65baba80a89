"""The emulator lifecycle: locating it (and the errors when Java or the emulator is missing),
starting, probing and stopping the real emulator, and `pubsubguard emulator start|stop|status`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pubsubguard.core import emulator as emu
from pubsubguard.core.emulator import Emulator, EmulatorError, EmulatorMissing

HINTS = ("google-cloud-cli-pubsub-emulator", "openjdk-17-jre-headless", "gcloud components install pubsub-emulator")


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pubsubguard", *argv], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_locate_prints_the_launcher():
    done = subprocess.run([sys.executable, "-m", "pubsubguard.core.emulator", "--locate"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    launcher = Path(done.stdout.strip())
    assert launcher.name == emu.LAUNCHER and os.access(launcher, os.X_OK)


def test_locate_with_an_empty_path_prints_the_install_hint():
    env = {k: v for k, v in os.environ.items() if k not in (emu.OVERRIDE_ENV, "JAVA_HOME")}
    env["PATH"] = ""
    done = subprocess.run([sys.executable, "-m", "pubsubguard.core.emulator", "--locate"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "not found" in done.stderr
    for hint in HINTS:
        assert hint in done.stderr


def test_override_that_is_not_a_launcher_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(emu.OVERRIDE_ENV, str(tmp_path / "no-such-launcher"))
    with pytest.raises(EmulatorMissing) as err:
        Emulator.command()
    assert f"{emu.OVERRIDE_ENV}={tmp_path / 'no-such-launcher'}" in str(err.value)
    assert all(hint in str(err.value) for hint in HINTS)


def test_missing_java_is_reported(monkeypatch, tmp_path):
    launcher = Emulator.command()[0]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / emu.LAUNCHER).symlink_to(launcher)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv(emu.OVERRIDE_ENV, raising=False)
    with pytest.raises(EmulatorMissing) as err:
        Emulator.command()
    assert "Java was not found" in str(err.value)
    assert "openjdk-17-jre-headless" in str(err.value)


def test_a_launcher_that_exits_early_is_reported_with_its_log(monkeypatch, tmp_path):
    broken = tmp_path / "broken-emulator"
    broken.write_text("#!/bin/sh\necho 'cannot bind: simulated failure' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv(emu.OVERRIDE_ENV, str(broken))
    with pytest.raises(EmulatorError) as err:
        Emulator.start(state_dir=tmp_path / "state", timeout=30)
    assert "exited with code 3" in str(err.value)
    assert "simulated failure" in str(err.value)


def test_a_port_in_use_is_refused(emulator, tmp_path):
    port = int(emulator.host.rsplit(":", 1)[1])
    with pytest.raises(EmulatorError) as err:
        Emulator.start(port=port, state_dir=tmp_path)
    assert f"--port {port}" in str(err.value)


def test_the_session_emulator_answers_the_admin_api(emulator):
    from google.cloud import pubsub_v1

    assert emu.answers(emulator.host)
    assert os.environ[emu.HOST_ENV] == emulator.host
    publisher = pubsub_v1.PublisherClient()
    topic = publisher.create_topic(name="projects/pubsubguard-emulator-test/topics/answers")
    assert topic.name in {t.name for t in publisher.list_topics(project="projects/pubsubguard-emulator-test")}


def test_cli_start_status_reuse_stop(tmp_path):
    env = {emu.HOST_ENV: ""}
    status = _cli("emulator", "status", "--root", str(tmp_path), env=env)
    assert status.returncode == 1 and "not running" in status.stdout

    started = _cli("emulator", "start", "--root", str(tmp_path), env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith(f"export {emu.HOST_ENV}=127.0.0.1:")
        host = started.stdout.strip().split("=", 1)[1]
        state = json.loads((tmp_path / emu.STATE_FILE).read_text())
        assert state["host"] == host and state["project"] == "pubsubguard-dev"
        assert state["pid"] == state["pgid"]  # its own process group
        assert emu.answers(host)

        status = _cli("emulator", "status", "--root", str(tmp_path), env=env)
        assert status.returncode == 0 and f"running at {host}" in status.stdout

        again = _cli("emulator", "start", "--root", str(tmp_path), env=env)
        assert again.returncode == 0 and again.stdout.strip() == f"export {emu.HOST_ENV}={host}"
        assert "already running" in again.stderr
    finally:
        stopped = _cli("emulator", "stop", "--root", str(tmp_path), env=env)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    assert not emu.pid_alive(state["pid"])
    assert not emu.answers(host)
    assert not (tmp_path / emu.STATE_FILE).exists()

    status = _cli("emulator", "status", "--root", str(tmp_path), env=env)
    assert status.returncode == 1 and "not running" in status.stdout
    stopped_again = _cli("emulator", "stop", "--root", str(tmp_path), env=env)
    assert stopped_again.returncode == 0 and "not running" in stopped_again.stderr


def test_cli_status_sees_a_dead_recorded_emulator(tmp_path):
    path = tmp_path / emu.STATE_FILE
    path.parent.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    path.write_text(json.dumps({"pid": dead.pid, "pgid": dead.pid, "host": f"127.0.0.1:{emu.free_port()}", "project": "p"}))
    status = _cli("emulator", "status", "--root", str(tmp_path))
    assert status.returncode == 1 and "process gone" in status.stdout


def test_running_host_prefers_the_environment_then_the_state_file(monkeypatch, tmp_path, emulator):
    monkeypatch.setenv(emu.HOST_ENV, emulator.host)
    assert emu.running_host(tmp_path) == emulator.host

    monkeypatch.delenv(emu.HOST_ENV)
    with pytest.raises(EmulatorError, match="PUBSUB_EMULATOR_HOST is unset"):
        emu.running_host(tmp_path)
    emu.save_state(Emulator(host=emulator.host, project="p", pid=emulator.pid, pgid=emulator.pgid), tmp_path)
    assert emu.running_host(tmp_path) == emulator.host

    monkeypatch.setenv(emu.HOST_ENV, f"127.0.0.1:{emu.free_port()}")
    with pytest.raises(EmulatorError, match="no Pub/Sub emulator answers there"):
        emu.running_host(tmp_path)
