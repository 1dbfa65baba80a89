"""Hostile programs and what `pubsubguard check` must keep from them (issue 23): a TCP listener on loopback a program
must not reach, the pack folders it must not change, a canary secret in the check's environment it must not see, the
check run from the checkout or as the installed wheel, and the assertions every hostile case makes
(`judged_as_expected`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from support import ROOT
from support.installed import CHECKOUT_PINS, environment, installed_tool, own_virtualenv, user_env

CANARY = "pubsubguard-canary-" + uuid.uuid4().hex  # the "CI token" in the check's environment


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
