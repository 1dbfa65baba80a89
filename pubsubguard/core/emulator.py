"""The real Pub/Sub emulator: locate it, start it on a free loopback port, probe it, stop it.

The emulator is the Java launcher `cloud-pubsub-emulator` that `gcloud beta emulators pubsub start`
runs (component `pubsub-emulator`, Debian package `google-cloud-cli-pubsub-emulator`). We run the
launcher directly, in its own process group, so that `stop()` ends the JVM too and no gcloud Python
process sits in between. Locating it, in order:

1. `PUBSUBGUARD_EMULATOR` (environment): path of the launcher; when set it is the only candidate.
2. `cloud-pubsub-emulator` on PATH.
3. `gcloud` on PATH: `<sdk root>/platform/pubsub-emulator/bin/cloud-pubsub-emulator`.

Java must be on PATH (or under JAVA_HOME), as the launcher needs it.

`python -m pubsubguard.core.emulator --locate` prints the command and exits 0, or prints the install hint
to stderr and exits 2 (`scripts/setup.sh` calls it).

Beside the emulator runs a sidecar (`python -m pubsubguard.core.emulator --sidecar`, in the emulator's
process group, so `stop()` ends both): it writes the emulator's output to a bounded log (two files
of at most `LOG_MAX_BYTES / 2`: `emulator-PORT.log` and `.log.1`) and serves the push receiver, a
small HTTP server on loopback that records every push and answers 204. Push subscriptions applied
to the emulator point at it (`emulator_push_config`), never at the stack's real endpoints: a demo
sends nothing anywhere but loopback.

Client code selects the emulator only through `PUBSUB_EMULATOR_HOST`; `running_host()` says which
emulator a command should use: that variable first, then the state file the CLI writes
(`.pubsubguard/emulator.json` under the project directory: one emulator per project).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from pubsubguard.core.errors import UserError
from pubsubguard.core.push_receiver import LOOPBACK, Push, PushReceiver, local_push_endpoint

OVERRIDE_ENV = "PUBSUBGUARD_EMULATOR"
HOST_ENV = "PUBSUB_EMULATOR_HOST"
LAUNCHER = "cloud-pubsub-emulator"
STATE_FILE = Path(".pubsubguard") / "emulator.json"
PUSH_RECEIVER_ENV = "PUBSUBGUARD_PUSH_RECEIVER"  # host:port of the push receiver apply points push subscriptions at
LOG_MAX_BYTES = 16 * 1024 * 1024  # the emulator's log, both files together
INSTALL_HINT = (
    "install the Pub/Sub emulator and Java 17: on Debian/Ubuntu "
    "`apt-get install google-cloud-cli-pubsub-emulator openjdk-17-jre-headless`; elsewhere "
    "`gcloud components install pubsub-emulator` and a Java 17 runtime"
)


class EmulatorMissing(UserError):
    """Java or the emulator is not installed; the message carries the install hint."""

    def __init__(self, what: str):
        super().__init__(f"{what}; {INSTALL_HINT}")


class EmulatorError(UserError):
    """The emulator did not start, or no running emulator could be found."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _locate_launcher() -> Path:
    override = os.environ.get(OVERRIDE_ENV)
    if override is not None:
        path = Path(override).expanduser()
        if not _executable(path):
            raise EmulatorMissing(f"{OVERRIDE_ENV}={override}: not an executable file (expected the {LAUNCHER} launcher)")
        return path
    found = shutil.which(LAUNCHER)
    if found:
        return Path(found)
    gcloud = shutil.which("gcloud")
    if not gcloud:
        raise EmulatorMissing(f"the Pub/Sub emulator was not found ({LAUNCHER} and gcloud are not on PATH)")
    sdk_root = Path(gcloud).resolve().parent.parent
    path = sdk_root / "platform" / "pubsub-emulator" / "bin" / LAUNCHER
    if not _executable(path):
        raise EmulatorMissing(f"gcloud is at {gcloud} but its pubsub-emulator component is not ({path} missing)")
    return path


def find_java() -> str | None:
    """The java Spark and the emulator's launcher would run: JAVA_HOME/bin/java, else java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and _executable(Path(java_home) / "bin" / "java"):
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def _locate_java() -> str:
    found = find_java()
    if not found:
        raise EmulatorMissing("Java was not found (no java on PATH, JAVA_HOME unset or without bin/java)")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def answers(host: str, timeout: float = 1.0, expect: bytes = b"Ok") -> bool:
    """True when an emulator answers at host ("127.0.0.1:PORT"): its HTTP root says "Ok" (or `expect`)."""
    try:
        with urllib.request.urlopen(f"http://{host}/", timeout=timeout) as response:
            return response.status == 200 and response.read().strip() == expect
    except (OSError, urllib.error.URLError, ValueError):
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie whose parent has not reaped it yet is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _log_tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _group(pgid: int) -> dict:
    """Popen arguments that put the child in process group `pgid` (0: a new group of its own)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}


# --- The push receiver's host and the emulator's sidecar ------------------------------------------
_fallback_receiver: PushReceiver | None = None


def push_receiver_host() -> str:
    """The receiver push subscriptions on the emulator point at: PUBSUBGUARD_PUSH_RECEIVER (the
    emulator's sidecar, set by `pubsubguard apply` and `run`), else one started in this process."""
    global _fallback_receiver
    host = os.environ.get(PUSH_RECEIVER_ENV)
    if host:
        return host
    if _fallback_receiver is None:
        _fallback_receiver = PushReceiver().start()
    return _fallback_receiver.host


def emulator_push_config(push_config: dict, subscription: str) -> dict:
    """A plan's `pushConfig` (camelCase inputs) as applied to the emulator: the endpoint replaced by
    the local receiver's URL, everything else (OIDC token, attributes) kept."""
    declared = str(push_config.get("pushEndpoint") or "")
    return {**push_config, "pushEndpoint": local_push_endpoint(declared, subscription, push_receiver_host())}


class BoundedLog:
    """Lines appended to `path`; past half the budget the file becomes `path.1` (replacing the
    previous one) and a new one starts, so both together stay under `max_bytes`."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES):
        self.path = Path(path)
        self.limit = max(1024, max_bytes // 2)
        self._lock = threading.Lock()
        self._file = self.path.open("ab")

    def write(self, line: bytes) -> None:
        with self._lock:
            if self._file.tell() + len(line) > self.limit:
                self._file.close()
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                self._file = self.path.open("ab")
            self._file.write(line[: self.limit])
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def sidecar(log: Path, receiver_port: int, max_bytes: int = LOG_MAX_BYTES) -> int:
    """The emulator's companion process: its output (stdin) into a bounded log, the push receiver
    on `receiver_port`. Ends when the emulator's output ends (the emulator is gone)."""
    bounded = BoundedLog(log, max_bytes)

    def logged(push: Push) -> None:
        bounded.write(f"pubsubguard push receiver: push for {push.subscription} ({push.body_bytes} bytes; "
                      f"declared endpoint {push.declared_endpoint})\n".encode())

    receiver = PushReceiver(receiver_port, keep=1, on_push=logged).start()
    bounded.write(f"pubsubguard push receiver: listening on {receiver.host}\n".encode())
    for line in sys.stdin.buffer:
        bounded.write(line)
    receiver.stop()
    bounded.close()
    return 0


@dataclass
class Emulator:
    host: str
    project: str
    process: subprocess.Popen | None = None
    pid: int | None = None
    pgid: int | None = None
    log: Path | None = None
    push_receiver: str | None = None  # host:port of the sidecar's push receiver
    sidecar: subprocess.Popen | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @staticmethod
    def command() -> list[str]:
        """The argv prefix that runs the emulator (host and port are appended); raises EmulatorMissing."""
        launcher = _locate_launcher()
        _locate_java()
        return [str(launcher)]

    @classmethod
    def start(
        cls,
        project: str = "pubsubguard-dev",
        port: int | None = None,
        state_dir: Path | None = None,
        timeout: float = 90,
    ) -> "Emulator":
        argv = cls.command()
        if port is None:
            port = free_port()
        host = f"{LOOPBACK}:{port}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.connect_ex((LOOPBACK, port)) == 0:
                raise EmulatorError(f"--port {port}: something already listens on {host}; choose another port")
        state_dir = Path(state_dir) if state_dir is not None else Path(tempfile.mkdtemp(prefix="pubsubguard-emulator-"))
        state_dir.mkdir(parents=True, exist_ok=True)
        log = state_dir / f"emulator-{port}.log"
        receiver_port = free_port()
        # Its own process group (Ctrl-C in the terminal does not reach it; stop() ends the JVM with it).
        process = subprocess.Popen(
            [*argv, f"--host={LOOPBACK}", f"--port={port}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            **_group(0),
        )
        # The sidecar joins the emulator's group, reads its output into the bounded log and serves pushes.
        with log.with_suffix(".sidecar.err").open("wb") as errors:
            sidecar_process = subprocess.Popen(
                [sys.executable, "-m", "pubsubguard.core.emulator", "--sidecar", str(log), "--receiver-port", str(receiver_port)],
                stdin=process.stdout, stdout=subprocess.DEVNULL, stderr=errors, **_group(process.pid),
            )
        process.stdout.close()  # the sidecar holds the pipe now
        emulator = cls(host=host, project=project, process=process, pid=process.pid, pgid=process.pid, log=log,
                       push_receiver=f"{LOOPBACK}:{receiver_port}", sidecar=sidecar_process)
        deadline = time.monotonic() + timeout
        while not (answers(host) and answers(emulator.push_receiver, expect=b"pubsubguard push receiver")):
            for what, child in (("the emulator", process), ("its log and push receiver sidecar", sidecar_process)):
                if child.poll() is not None:
                    try:  # the sidecar logs the emulator's last words, then ends with its output
                        sidecar_process.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                    emulator.stop()
                    raise EmulatorError(
                        f"{what} exited with code {child.returncode} before answering on {host}; "
                        f"log {log}:\n{_log_tail(log)}{_log_tail(log.with_suffix('.sidecar.err'))}"
                    )
            if time.monotonic() > deadline:
                emulator.stop()
                raise EmulatorError(f"the emulator did not answer on {host} within {timeout:g}s; log {log}:\n{_log_tail(log)}")
            time.sleep(0.2)
        return emulator

    def running(self) -> bool:
        alive = self.process.poll() is None if self.process is not None else (self.pid is not None and pid_alive(self.pid))
        return alive and answers(self.host)

    def stop(self, timeout: float = 15) -> None:
        """End the emulator's whole process group (idempotent)."""
        if self._stopped or self.pgid is None:
            self._stopped = True
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            if self._wait_gone(wait):
                break
        self._stopped = True

    def _wait_gone(self, wait: float) -> bool:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.process is not None:
                try:
                    self.process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    continue
            elif self.pid is not None and pid_alive(self.pid):
                time.sleep(0.2)
                continue
            if self.sidecar is not None:
                self.sidecar.poll()  # reaped when ended, or the group would hold its zombie
            try:  # the leader is gone; the group may still hold children
                os.killpg(self.pgid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.2)
        return False

    # State for the CLI: the emulator outlives `pubsubguard emulator start`.
    def state(self) -> dict:
        return {"pid": self.pid, "pgid": self.pgid, "host": self.host, "project": self.project,
                "log": str(self.log) if self.log else None, "push_receiver": self.push_receiver}

    @classmethod
    def from_state(cls, data: dict) -> "Emulator":
        return cls(host=data["host"], project=data["project"], pid=data.get("pid"), pgid=data.get("pgid"),
                   log=Path(data["log"]) if data.get("log") else None, push_receiver=data.get("push_receiver"))


def state_path(root: Path | None = None) -> Path:
    """The project's emulator state file (root: the project directory, default the current one)."""
    return (root or Path.cwd()) / STATE_FILE


def load_state(root: Path | None = None) -> Emulator | None:
    path = state_path(root)
    try:
        data = json.loads(path.read_text())
        return Emulator.from_state(data)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as err:
        raise EmulatorError(f"{path}: not a valid emulator state file ({err}); delete it and run `pubsubguard emulator start`") from None


def save_state(emulator: Emulator, root: Path | None = None) -> Path:
    path = state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(emulator.state(), indent=2, sort_keys=True) + "\n")
    return path


def running_host(root: Path | None = None) -> str:
    """The emulator a command should talk to: PUBSUB_EMULATOR_HOST, else the CLI's state file."""
    host = os.environ.get(HOST_ENV)
    if host:
        if not answers(host):
            raise EmulatorError(f"{HOST_ENV}={host}: no Pub/Sub emulator answers there; start one with `pubsubguard emulator start`")
        return host
    emulator = load_state(root)
    if emulator is None:
        raise EmulatorError(
            f"no emulator: {HOST_ENV} is unset and {state_path(root)} does not exist; "
            "start one with `pubsubguard emulator start`"
        )
    if not emulator.running():
        raise EmulatorError(
            f"the emulator recorded in {state_path(root)} ({emulator.host}, pid {emulator.pid}) is not running; "
            "start one with `pubsubguard emulator start`"
        )
    return emulator.host


def recorded_push_receiver(root: Path | None, host: str) -> str | None:
    """The push receiver of the project's recorded emulator when that is the emulator at `host`."""
    recorded = load_state(root)
    if recorded is None or recorded.host != host or not recorded.push_receiver:
        return None
    return recorded.push_receiver if answers(recorded.push_receiver, expect=b"pubsubguard push receiver") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pubsubguard.core.emulator", description="Locate the Pub/Sub emulator.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--locate", action="store_true", help="print the emulator command, or the install hint")
    mode.add_argument("--sidecar", type=Path, metavar="LOG",
                      help="(started by Emulator.start) log stdin to LOG, bounded, and serve the push receiver")
    parser.add_argument("--receiver-port", type=int, default=0, help="the push receiver's loopback port")
    args = parser.parse_args(argv)
    if args.sidecar:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # ends with the emulator (its output closes) or SIGTERM
        return sidecar(args.sidecar, args.receiver_port)
    try:
        print(" ".join(Emulator.command()))
    except EmulatorMissing as err:
        print(f"pubsubguard emulator: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
