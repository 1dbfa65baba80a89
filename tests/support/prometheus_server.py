"""A real Prometheus server for tests: Debian's binary (`prometheus`, installed by scripts/setup.sh), on loopback
only, with its configuration and storage in a temporary directory, scraping the targets it is given every second
and evaluating the rule files it is given every second.

    with prometheus_server(["127.0.0.1:9464"], [rules]) as server:
        server.wait_for(lambda: server.firing("PubSubGuaranteeBroken"), timeout=30)
        server.query('pubsubguard_watch_info')

Debian's package may install a service; nothing here uses it: the binary runs as a child of the test, and the
context manager stops it (and frees its port) however the block ends. `listening(pid)` says which addresses a
process listens on (tests assert the server listens on loopback only).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import yaml

from pubsubguard.core.emulator import free_port

LOOPBACK = "127.0.0.1"
INTERVAL = "1s"  # scrape and evaluation interval


def binary(name: str = "prometheus") -> str:
    """The path of Debian's `prometheus` (or `promtool`); an AssertionError saying how to get it when absent (a
    missing binary fails the test: scripts/setup.sh installs it)."""
    found = shutil.which(name)
    assert found, f"{name} is not installed: bash scripts/setup.sh installs Debian's prometheus (apt-get install prometheus)"
    return found


@dataclass
class PrometheusServer:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen
    directory: Path

    def api(self, path: str, **params) -> dict | list:
        """GET /api/v1/PATH?params: the `data` of a successful answer."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query: the vector's samples, each {"metric": {labels}, "value": [time, "value"]}."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return data["result"]

    def alerts(self) -> list[dict]:
        """Every active alert (pending and firing): {"labels", "annotations", "state", "activeAt", "value"}."""
        return self.api("alerts")["alerts"]

    def firing(self, alertname: str, **labels: str) -> list[dict]:
        """The firing alerts of that name whose labels include `labels`."""
        return [alert for alert in self.alerts() if alert["state"] == "firing"
                and alert["labels"].get("alertname") == alertname
                and all(alert["labels"].get(k) == v for k, v in labels.items())]

    def targets(self) -> list[dict]:
        return self.api("targets")["activeTargets"]

    def wait_for(self, condition: Callable[[], object], timeout: float, step: float = 0.2):
        """Poll `condition` until it returns something true (returned), or fail after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(f"not within {timeout:.0f} s: {getattr(condition, '__name__', condition)}; "
                                     f"Prometheus' log ends: {self.log_tail()}")
            time.sleep(step)

    def log_tail(self, lines: int = 8) -> str:
        log = self.directory / "prometheus.log"
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


def write_config(directory: Path, targets: list[str], rule_files: list[Path]) -> Path:
    config = {
        "global": {"scrape_interval": INTERVAL, "scrape_timeout": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(Path(path).resolve()) for path in rule_files],
        "scrape_configs": [{"job_name": "pubsubguard", "metrics_path": "/metrics",
                            "static_configs": [{"targets": list(targets)}]}],
    }
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextlib.contextmanager
def prometheus_server(targets: list[str], rule_files: list[Path] = (), *, start_timeout: float = 60) -> Iterator[
        PrometheusServer]:
    """A Prometheus server on 127.0.0.1:<free port> scraping `targets` ("HOST:PORT", path /metrics) and evaluating
    `rule_files`, every second; stopped (SIGTERM, then SIGKILL after 10 s) when the block ends."""
    prometheus = binary()
    with tempfile.TemporaryDirectory(prefix="pubsubguard-prometheus-") as tmp:
        directory = Path(tmp)
        config = write_config(directory, targets, list(rule_files))
        for attempt in range(3):  # a free port can be taken between the look-up and the bind: try another
            port = free_port()
            log = (directory / "prometheus.log").open("w")
            process = subprocess.Popen(
                [prometheus, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address={LOOPBACK}:{port}", "--log.level=info"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
            log.close()
            server = PrometheusServer(f"http://{LOOPBACK}:{port}", process, directory)
            try:
                if _ready(server, start_timeout):
                    break
                if attempt == 2 or "address already in use" not in server.log_tail(20):
                    raise AssertionError(f"Prometheus did not start (exit {process.poll()}): {server.log_tail()}")
            except BaseException:
                _stop(process)
                raise
        try:
            yield server
        finally:
            _stop(process)


def _ready(server: PrometheusServer, timeout: float) -> bool:
    """True once /-/ready answers 200; False when the process exited first; an AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"Prometheus was not ready within {timeout:.0f} s: {server.log_tail()}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs a process listens on with TCP: its sockets (/proc/PID/fd) in LISTEN state in
    /proc/net/tcp and tcp6."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN; 9: the inode
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)  # 32-bit words, each in the host's (little-endian) order
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add((str(ipaddress.ip_address(words)), int(port, 16)))
    return found
