"""Packet-level faults (`netem` entries of a `--nemesis` schedule): tc netem on a link the run makes.

Where the run is root and iproute2 is there (`ip`, `tc`), the fault layer's upstream bytes cross a
network namespace the run creates, whose own `lo` carries them as real TCP packets; `tc qdisc ... netem`
on that `lo` delays, drops and reorders them for each entry's windows (or iptables drops them: below). Every address stays loopback:

    listener --unix--> [ns] relay A --TCP 127.0.0.1:PORT (the namespace's lo: netem)--> relay B [ns]
             --unix--> host relay C --TCP--> the target (the emulator, a loopback stand-in, a TLS host)

Relays A and B are one small process started with `ip netns exec` (`python -m
pubsubguard.validation.wire.netem relay ...`); C runs in the run's process. Unix sockets cross namespaces
through the file system; TLS toward Google is end to end through the chain (the relays copy bytes).
The listener's channel dials relay A's socket (`PacketLink.dial`); the target is unchanged.

Each window applied is a row of the fault layer's evidence (`Nemesis.record`: time, `TCP`, what netem
did, for how long), drawn as a band on the timeline and named under each guarantee of the run (a packet
fault touches every subscription and topic). The namespace, the relays and the socket directory are
removed when the run ends or is interrupted (`PacketLink.close`, from the probe's `finally`); a
namespace left by a run that was killed outright is removed by the next run (`sweep`).

What can be applied is tried once per run, in a namespace made for the purpose (`probe_support`):
`tc netem` (delay, loss, reorder) where the kernel has sch_netem; where it has not (some minimal VM
kernels), loss alone with iptables' `statistic` match on the namespace's lo (`IPTABLES`), and an entry
asking for delay or reorder is refused in one line naming its field. Not root, no `ip`/`tc`, no
namespaces, or neither netem nor iptables: the run says one line ("packet faults: unavailable (not root)
— proxy faults only") and a schedule that asks for netem is refused in one line (exit 2).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

from .schedule import ScheduleError

PREFIX = "pubsubguard-"  # the run's namespace: pubsubguard-<pid>-<n>
BASE_PORT = 17000  # relay B's ports, in the run's own namespace (nothing else listens there)
CHUNK = 1 << 16


NETEM = ("delay_ms", "loss", "reorder")  # what tc netem does
IPTABLES = ("loss",)  # what iptables' statistic match does where the kernel has no netem (sch_netem)


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=30)


def probe_support() -> tuple[str | None, tuple[str, ...]]:
    """(why packet faults cannot be applied here, or None; what they can do: NETEM, IPTABLES, or ()).
    Tried in a namespace made for the purpose and removed at once."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root", ()
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"no {' '.join(missing)}", ()
    name = f"{PREFIX}{os.getpid()}-probe"
    if _run("ip", "netns", "add", name, check=False).returncode != 0:
        return "no network namespaces", ()
    try:
        inside = ("ip", "netns", "exec", name)
        if _run(*inside, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", check=False).returncode == 0:
            return None, NETEM
        if shutil.which("iptables") and _run(*inside, "iptables", "-A", "OUTPUT", "-o", "lo", "-m", "statistic", "--mode",
                                             "random", "--probability", "0.5", "-j", "DROP", check=False).returncode == 0:
            return None, IPTABLES
        return "no netem in the kernel (sch_netem) and no iptables", ()
    finally:
        _run("ip", "netns", "del", name, check=False)


def availability_line(why: str | None, support: tuple[str, ...]) -> str:
    if why is not None:
        return f"packet faults: unavailable ({why}) — proxy faults only"
    if support == NETEM:
        return "packet faults: available (tc netem in a network namespace: delay, loss, reorder)"
    return ("packet faults: loss only (iptables statistic in a network namespace; the kernel has no netem: "
            "no delay or reorder) — with the proxy faults")


def refuse_unsupported(schedule, why: str | None, support: tuple[str, ...]) -> None:
    """A schedule asking for packet faults this machine cannot apply: one line naming the entry, exit 2."""
    for e in schedule.entries:
        if e.kind != "netem":
            continue
        if why is not None:
            raise ScheduleError(f"--nemesis {schedule.source}: faults[{e.index}].kind: netem needs root and iproute2 "
                                f"(ip, tc) to make a network namespace; here: {why}")
        for name in NETEM:
            if getattr(e, name) and name not in support:
                raise ScheduleError(f"--nemesis {schedule.source}: faults[{e.index}].{name}: this kernel has no netem "
                                    f"(sch_netem); packet faults here can only drop packets (loss, with iptables)")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", *args, check=check)


def namespaces() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()]


def sweep() -> list[str]:
    """Remove the namespaces of runs that are gone (their pid no longer exists): what a killed run left."""
    removed = []
    for name in namespaces():
        parts = name[len(PREFIX):].split("-") if name.startswith(PREFIX) else []
        if len(parts) == 2 and parts[0].isdigit() and not os.path.exists(f"/proc/{parts[0]}"):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    return removed


def netem_args(entry) -> list[str]:
    """`tc qdisc ... netem` parameters of an entry: delay, loss, reorder."""
    args = []
    if entry.delay_ms is not None:
        args += ["delay", f"{entry.delay_ms:g}ms"]
    if entry.loss:
        args += ["loss", f"{entry.loss * 100:g}%"]
    if entry.reorder:
        args += ["reorder", f"{entry.reorder * 100:g}%"]
    return args


# ------------------------------------------------------------------------------------------ relays
def _pipe(src: socket.socket, dst: socket.socket, count=None) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
            if count is not None:
                count(len(data))
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _serve(listener: socket.socket, connect, stop: threading.Event, count=None) -> None:
    """Accept on `listener`; each connection is spliced to `connect()` both ways (a thread per direction)."""
    while not stop.is_set():
        try:
            inbound, _ = listener.accept()
        except OSError:
            return
        try:
            outbound = connect()
        except OSError:
            inbound.close()
            continue
        for s in (inbound, outbound):
            if s.family != socket.AF_UNIX:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in ((inbound, outbound), (outbound, inbound)):
            threading.Thread(target=_pipe, args=(a, b, count), daemon=True).start()


def _unix_listener(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o666)
    s.listen(128)
    return s


def _connect_unix(path: str):
    def connect() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect


def _connect_tcp(host: str, port: int):
    return lambda: socket.create_connection((host, port), timeout=30)


def relay_main(routes: list[str]) -> int:
    """Inside the namespace: per route `IN_SOCK,PORT,OUT_SOCK`, relay A (unix IN_SOCK -> TCP 127.0.0.1:PORT)
    and relay B (TCP 127.0.0.1:PORT -> unix OUT_SOCK). Says `ready`; ends when its stdin closes (the run ended)."""
    stop = threading.Event()
    for route in routes:
        inbound, port, outbound = route.split(",")
        tcp = socket.create_server(("127.0.0.1", int(port)), backlog=128)
        for listener, connect in ((tcp, _connect_unix(outbound)),
                                  (_unix_listener(inbound), _connect_tcp("127.0.0.1", int(port)))):
            threading.Thread(target=_serve, args=(listener, connect, stop), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # EOF: the run is over (or gone)
    return 0


# -------------------------------------------------------------------------------------------- link
class PacketLink:
    """The run's namespace and relays in front of each upstream; `dial[upstream]` is what the listener dials."""

    counter = 0

    def __init__(self, upstreams: list[str], support: tuple[str, ...] = NETEM):
        from .upstream import host_port

        PacketLink.counter += 1
        self.name = f"{PREFIX}{os.getpid()}-{PacketLink.counter}"
        self.upstreams = sorted(set(upstreams))
        self.host_port = host_port
        self.directory: str | None = None
        self.process: subprocess.Popen | None = None
        self.stop_event = threading.Event()
        self.sockets: list[socket.socket] = []
        self.dial: dict[str, str] = {}
        self.shaping: tuple | None = None  # (entry index, window) applied now
        self.support = support  # NETEM (tc netem) or IPTABLES (loss only)
        self.relayed = 0  # bytes that crossed the namespace (both ways), counted by relay C
        self.lock = threading.Lock()

    def start(self) -> "PacketLink":
        sweep()
        try:
            self.directory = tempfile.mkdtemp(prefix="pubsubguard-netem-")
            os.chmod(self.directory, 0o755)
            _ip("netns", "add", self.name)
            _ip("-n", self.name, "link", "set", "lo", "up")
            routes = []
            for i, address in enumerate(self.upstreams):
                host, _, port = self.host_port(address).rpartition(":")
                inbound, outbound = (os.path.join(self.directory, f"{side}-{i}.sock") for side in ("in", "out"))
                listener = _unix_listener(outbound)  # relay C: the namespace's bytes to the target
                self.sockets.append(listener)
                threading.Thread(target=_serve, args=(listener, _connect_tcp(host.strip("[]"), int(port)), self.stop_event,
                                                      self._count), name="netem-relay", daemon=True).start()
                routes.append(f"{inbound},{BASE_PORT + i},{outbound}")
                self.dial[address] = f"unix:{inbound}"
            self.process = subprocess.Popen(
                ["ip", "netns", "exec", self.name, sys.executable, "-m", "pubsubguard.validation.wire.netem", "relay", *routes],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            ready = self.process.stdout.readline().strip()
            if ready != "ready":
                raise OSError(f"the namespace's relay did not start: {(self.process.stderr.read() or ready).strip()[-300:]}")
        except (OSError, subprocess.SubprocessError) as err:
            detail = err.stderr.strip() if isinstance(err, subprocess.CalledProcessError) else str(err)
            self.close()
            raise ScheduleError(f"netem: cannot make the packet-fault link ({' '.join(detail.split())[:200]})") from None
        return self

    def _count(self, n: int) -> None:
        with self.lock:
            self.relayed += n

    def as_dict(self) -> dict:
        """run.json `parameters.nemesis.packet_link`: the namespace and the bytes that crossed it."""
        with self.lock:
            return {"namespace": self.name, "backend": "tc netem" if self.support == NETEM else "iptables statistic",
                    "upstreams": self.upstreams, "bytes_relayed": self.relayed}

    def _shape(self, entry) -> str:
        """Apply the entry to the namespace's lo (replacing what was there): what was done, in words."""
        inside = ("ip", "netns", "exec", self.name)
        if self.support == NETEM:
            args = netem_args(entry)
            _run(*inside, "tc", "qdisc", "replace", "dev", "lo", "root", "netem", *args)
            return f"tc netem {' '.join(args)}"
        _run(*inside, "iptables", "-F", "OUTPUT")
        _run(*inside, "iptables", "-A", "OUTPUT", "-o", "lo", "-m", "statistic", "--mode", "random",
             "--probability", f"{entry.loss:g}", "-j", "DROP")
        return f"iptables statistic: {entry.loss * 100:g}% of packets dropped"

    def _clear(self) -> None:
        inside = ("ip", "netns", "exec", self.name)
        if self.support == NETEM:
            _run(*inside, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
        else:
            _run(*inside, "iptables", "-F", "OUTPUT", check=False)

    def tick(self, nemesis, t: float) -> None:
        """The nemesis clock: the first netem entry whose window is open at `t` shapes the link (a row per
        window applied); none open: the link is clear."""
        entry = next((e for e in nemesis.schedule.entries if e.kind == "netem" and e.active(t)), None)
        window = None if entry is None else (entry.index, 0 if entry.every_s is None else int((t - entry.after_s) // entry.every_s))
        with self.lock:
            if window == self.shaping:
                return
            self.shaping = window
        if entry is None:
            self._clear()
            return
        try:
            done = self._shape(entry)
            detail = f"{done} on the upstream link for {entry.for_s:g}s (namespace {self.name})"
        except subprocess.CalledProcessError as err:
            detail = f"NOT applied: {' '.join(err.cmd[4:])} failed ({' '.join((err.stderr or '').split())[:160]})"
        nemesis.record(entry, "TCP", detail=detail)

    def clear(self) -> None:
        """No window shapes the link any more (the drain's healed final read)."""
        with self.lock:
            shaping, self.shaping = self.shaping, ("healed",)
        if shaping is not None:
            self._clear()

    def close(self) -> None:
        """Remove everything the link made: the relays, the namespace (netem with it), the socket directory."""
        self.stop_event.set()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)
        if self.name in namespaces():
            _ip("netns", "del", self.name, check=False)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_link(nemesis, upstreams: dict[str, str]) -> PacketLink | None:
    """The packet-fault link in front of the run's upstreams when the schedule has netem entries (None: none);
    the nemesis clock applies its windows."""
    if nemesis is None or not any(e.kind == "netem" for e in nemesis.schedule.entries):
        return None
    link = PacketLink(list(upstreams.values()), nemesis.packet_support).start()
    nemesis.packets = link
    atexit.register(link.close)  # a run ended outside the probe's `finally` (the relays die with the run anyway)
    return link


def close_link(link: PacketLink | None) -> None:
    if link is not None:
        link.close()


if __name__ == "__main__" and sys.argv[1:2] == ["relay"]:
    sys.exit(relay_main(sys.argv[2:]))
