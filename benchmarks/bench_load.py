"""The verification job under load: the README's main job at scale points, beside a bare client loop.

    .venv/bin/python benchmarks/bench_load.py                      # the default, 10x and 50x
    .venv/bin/python benchmarks/bench_load.py --points 100x        # 120,000 message-subscription pairs
    .venv/bin/python benchmarks/bench_load.py --points 1x 10x --busy 2   # both cores kept busy beside it
    .venv/bin/python benchmarks/bench_load.py --points estate100        # 100 topics x 3 subscriptions
    .venv/bin/python benchmarks/bench_load.py --points soak             # 20 minutes at 25 msg/s under a nemesis
    .venv/bin/python benchmarks/bench_load.py --points 1x --repeat 5    # the main job five times in a row
    .venv/bin/python benchmarks/bench_load.py --points 50x-cluster      # 50x on a standalone cluster of 2 workers

Each point runs `pubsubguard run -s dev --keys K --messages-per-key M` (the main job: emulator, plan, check,
apply, verify with the default faults and the conformance scenarios) in a process of its own, samples the
resident memory of its process tree every half second (the driver: the command's Python and Spark's JVM;
the executors: Spark's Python workers), and reads its report.json. Beside it, a bare client loop
(`bench_probe.bare_loop`: ordering-key publishes and one streaming pull, nothing recorded) moves the same
number of messages on a throwaway emulator topic. Printed per point: wall time, the drain's end (settled,
stuck, ceiling) with its rates, publish and settle rates against the bare loop's, lost, unexplained findings
and causes, unsettled causes, the client library's warnings, and the peak memory of driver and executors.

Measure on an idle machine, one benchmark at a time: the load average is printed before each point.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

POINTS = {"1x": (8, 25), "10x": (16, 125), "50x": (40, 250), "100x": (80, 250),
          # an estate of 100 topics x 3 subscriptions (bench_check.estate: pull, exactly-once, ordered) from its
          # own project directory, 4 keys x 10 messages per topic: 12,000 message-subscription pairs
          "estate100": (4, 10),
          # the same at 30 topics (90 twins): where the estate's size starts to tell, short of the 100
          "estate30": (4, 10),
          # 50x with `run --master` on a standalone cluster of CLUSTER_WORKERS workers on loopback
          "50x-cluster": (40, 250),
          # the soak: 30,000 messages (40 keys x 250 on each of the dev stack's 3 probed topics) published at
          # SOAK_RATE msg/s (20 minutes) under SOAK_SCHEDULE; at 50 msg/s (60,000) the publisher fell behind
          # the rate after 5 minutes (docs/performance.md, the soak)
          "soak": (40, 250)}
SOAK_RATE = 25
CLUSTER_WORKERS, CLUSTER_CORES = 2, 2  # 4 task slots: the publisher and the subscriber tasks at once
# stream kills on an unordered and an ordered subscription, and lost ack responses, all along the soak (a reset
# of an ordered stream is a fault the emulator does not recover from: conformance ordered-stream-reset-keeps-
# delivering, so its keys silent after a kill are explained, not lost)
SOAK_SCHEDULE = {"seed": "soak", "faults": [
    {"kind": "kill_stream", "subscription": "orders-exactly-once", "after_s": 30, "every_s": 90},
    {"kind": "kill_stream", "subscription": "payments-exactly-once", "after_s": 75, "every_s": 120},
    {"kind": "lose_response", "rpc": "acknowledge", "subscription": "orders-exactly-once", "rate": 0.02},
]}


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def _rss_mib(pid: int) -> tuple[float, str]:
    """(resident MiB, command line) of one process; (0, "") once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            rss = next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        return rss / 1024, command
    except OSError:
        return 0.0, ""


class MemorySampler:
    """Peak resident memory of a process tree, split into the driver (everything but Spark's Python workers)
    and the executors (`pyspark.daemon` / `pyspark.worker`), sampled every `interval_s`."""

    def __init__(self, pid: int, interval_s: float = 0.5, executor_roots: tuple[int, ...] = ()):
        """`executor_roots`: a standalone cluster's worker daemons, whose descendants (executor JVMs and their
        Python workers, not the daemon itself) count as the executors."""
        self.pid, self.interval_s, self.executor_roots = pid, interval_s, executor_roots
        self.peak = {"driver": 0.0, "executors": 0.0}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.wait(self.interval_s):
            now = {"driver": 0.0, "executors": 0.0}
            for p in _tree(self.pid):
                rss, command = _rss_mib(p)
                now["executors" if "pyspark.daemon" in command or "pyspark.worker" in command else "driver"] += rss
            for root in self.executor_roots:
                now["executors"] += sum(_rss_mib(p)[0] for p in _tree(root) if p != root)
            for part, value in now.items():
                self.peak[part] = max(self.peak[part], value)


def unexplained(result: dict) -> dict[str, int]:
    """From report.json: error findings neither explained by a violated conformance scenario nor planted, and
    causes of an inconclusive or violated guarantee that nothing explains or causes (the run's own faults)."""
    findings = [f for sub in result["subscriptions"].values() for items in (sub["findings"] or {}).values()
                for f in items if f["severity"] == "error"]
    causes = [c for item in (result.get("explanations") or {}).get("guarantees", []) for c in item["causes"]]
    return {
        "findings": sum(1 for f in findings if not f.get("explained_by") and not f.get("planted_by")),
        "causes": sum(c["count"] for c in causes if not c["explained_by"] and not c.get("caused_by")),
        "unsettled_causes": sum(c["count"] for c in causes if c["kind"] == "unsettled"),
        "lost": sum(1 for f in findings if f["kind"] == "lost"),
    }


def point_args(name: str, out: Path) -> list[str]:
    """The stack and options a point runs with beyond --keys and --messages-per-key."""
    if name.startswith("estate"):
        from bench_check import project

        where = out / f"{name}-project"
        where.mkdir(parents=True, exist_ok=True)
        project(where, int(name.removeprefix("estate")))  # stack `bench`
        return ["-s", "bench", "-C", str(where)]
    if name == "soak":
        schedule = out / "soak-schedule.json"
        schedule.write_text(json.dumps(SOAK_SCHEDULE, indent=1))
        return ["-s", "dev", "--rate", str(SOAK_RATE), "--nemesis", str(schedule)]
    return ["-s", "dev"]


def burners(count: int) -> list[subprocess.Popen]:
    """`count` processes that keep a core each busy (another tenant of the machine), until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


@contextlib.contextmanager
def standalone_cluster(work: Path):
    """A Spark master and CLUSTER_WORKERS workers (CLUSTER_CORES cores, 2 GiB each) on loopback, from PySpark's own
    distribution: (master URL, the workers' pids). Stopped (the whole process group) on the way out."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work / "logs"),
           "PYSPARK_PYTHON": str(ROOT / ".venv/bin/python")}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    work.mkdir(parents=True, exist_ok=True)
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(port), "--webui-port", "0"], env=env, stdout=(work / "master.log").open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        for index in range(CLUSTER_WORKERS):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores",
                 str(CLUSTER_CORES), "--memory", "2g", "--webui-port", "0", "--work-dir", str(work / f"worker-{index}")],
                env=env, stdout=(work / f"worker-{index}.log").open("w"), stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.monotonic() + 120
        while sum("Successfully registered with master" in (work / f"worker-{i}.log").read_text(errors="replace")
                  for i in range(CLUSTER_WORKERS)) < CLUSTER_WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"bench_load: the standalone cluster did not come up (logs in {work})")
            time.sleep(1)
        yield url, tuple(p.pid for p in procs[1:])
    finally:
        for proc in reversed(procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


def run_point(name: str, keys: int, per_key: int, out: Path, extra: list[str], label: str | None = None) -> dict:
    """One run of point `name`, written under `out/<label>` (default: the point's name)."""
    label = label or name
    if name.endswith("-cluster"):
        with standalone_cluster(out / f"{label}-cluster") as (url, workers):
            return _run_point(name, keys, per_key, out, [*extra, "--master", url], label, workers)
    return _run_point(name, keys, per_key, out, extra, label)


def _run_point(name: str, keys: int, per_key: int, out: Path, extra: list[str], label: str,
               workers: tuple[int, ...] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}  # the job starts its own
    if workers:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver, as the cluster, on loopback only
    log = out / f"{label}.log"
    started = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen([str(ROOT / ".venv/bin/pubsubguard"), "run", *point_args(name, out), "--keys",
                                    str(keys), "--messages-per-key", str(per_key), "--out", str(out / label), *extra],
                                   cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env)
        sampler = MemorySampler(process.pid, executor_roots=workers)
        sampler.thread.start()
        code = process.wait()
        sampler.done.set()
    wall = time.monotonic() - started
    report = out / label / "report" / "report.json"
    if not report.exists():
        return {"point": name, "exit": code, "wall_s": round(wall, 1), "error": f"no report: see {log}"}
    result = json.loads(report.read_text())
    drain = result["parameters"]["drain"]
    clock = drain.get("clock") or {}
    client_log = sum(1 for f in (out / label / "report" / "evidence").glob("client-log-*.txt")
                     for _ in f.open(errors="replace"))
    return {"point": name, "exit": code, "wall_s": round(wall, 1), "pairs": keys * per_key * len(result["subscriptions"]),
            "drain": drain["ended"], "drained_s": clock.get("drained_s"), "ceiling_s": clock.get("ceiling_s"),
            "final_read": (drain.get("final_read") or {}).get("ended"), "rates": clock.get("rates") or {},
            "client_log_lines": client_log, "peak_mib": {k: round(v) for k, v in sampler.peak.items()},
            "footprint": drain.get("footprint") or [], "not_holds": not_holds(result), **unexplained(result)}


def not_holds(result: dict) -> dict[str, int]:
    """Per guarantee status other than holds / not_tested: how many subscriptions have it (the estate's summary)."""
    counts: dict[str, int] = {}
    for sub in result["subscriptions"].values():
        for status in (sub.get("guarantees") or {}).values():
            if status not in ("holds", "not_tested"):
                counts[status] = counts.get(status, 0) + 1
    return counts


def bare(messages: int) -> tuple[float, float]:
    """(publish rate, end-to-end rate) of the bare client loop for `messages` on a throwaway emulator."""
    from bench_probe import bare_loop

    from pubsubguard.core.emulator import Emulator

    emulator = Emulator.start(project="bench-load", state_dir=Path(tempfile.mkdtemp(prefix="bench-load-")))
    os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
    try:
        keys = 40
        publish_rate, e2e_rate, _ = bare_loop("bench-load", keys, max(1, messages // keys))
        return publish_rate, e2e_rate
    finally:
        emulator.stop()
        os.environ.pop("PUBSUB_EMULATOR_HOST", None)


def run_and_print(name: str, index: int, args, out: Path, extra: list[str]) -> dict:
    """Run number `index` of point `name`, written to `out/<name>` (`out/<name>-<index+1>` with --repeat), printed."""
    keys, per_key = POINTS[name]
    label = name if args.repeat == 1 else f"{name}-{index + 1}"
    print(f"\n== {label}: --keys {keys} --messages-per-key {per_key} · load average {os.getloadavg()[0]:.2f} "
          f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    busy = burners(args.busy)
    try:
        row = run_point(name, keys, per_key, out, extra, label)
    finally:
        for burner in busy:
            burner.kill()
    if busy:
        print(f"({args.busy} cores kept busy by other processes during the point)")
    if "error" in row:
        print(f"{label}: exit {row['exit']} after {row['wall_s']} s, {row['error']}")
        return row
    rates = row["rates"]
    print(f"wall {row['wall_s']} s · exit {row['exit']} · {row['pairs']:,} message-subscription pairs · drain "
          f"{row['drain']} after {row['drained_s']} s (ceiling {row['ceiling_s']} s; final read {row['final_read']})")
    print(f"publish {rates.get('publish_per_s')} msg/s over {rates.get('publish_s')} s · settled "
          f"{rates.get('settled_per_s')} pairs/s while publishing, {rates.get('drain_settled_per_s')} during the drain")
    print(f"lost {row['lost']} · unexplained findings {row['findings']} · unexplained causes {row['causes']} · "
          f"unsettled (all causes) {row['unsettled_causes']} · client library log lines {row['client_log_lines']}")
    print(f"peak resident memory: driver {row['peak_mib']['driver']} MiB, executors {row['peak_mib']['executors']} MiB")
    if row["footprint"]:
        print("driver footprint each minute (s: MiB / threads / open files): " + ", ".join(
            f"{f['t_s']:.0f}: {f['rss_mib']:.0f}/{f['threads']}/{f['open_files']}" for f in row["footprint"]))
    print("guarantees not holding: " + (", ".join(f"{n} {s}" for s, n in sorted(row["not_holds"].items())) or "none"))
    if not args.no_bare:
        messages = rates.get("messages") or 0
        publish, e2e = bare(messages)
        print(f"bare client loop, {messages:,} messages: publish {publish:.0f} msg/s, end to end {e2e:.0f} msg/s · "
              f"probe/bare publish {(rates.get('publish_per_s') or 0) / publish:.2f}")
    return row


def repeat_summary(name: str, runs: list[dict]) -> str:
    """One line over the runs of a point: wall times (min, median, max) and the worst of what is counted."""
    done = [r for r in runs if "error" not in r]
    walls = sorted(r["wall_s"] for r in done)
    if not walls:
        return f"{name}: no run reached a report"
    worst = {k: max(r[k] for r in done) for k in ("lost", "findings", "causes")}
    return (f"{name} over {len(runs)} runs ({len(runs) - len(done)} without a report): wall min {walls[0]} s, median "
            f"{walls[len(walls) // 2]} s, max {walls[-1]} s; at most {worst['lost']} lost, {worst['findings']} "
            f"unexplained findings, {worst['causes']} unexplained causes in one run")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", choices=sorted(POINTS), default=["1x", "10x", "50x"])
    parser.add_argument("--out", type=Path, default=None, help="where the runs write (default: a temporary directory)")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare client loop")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N cores busy with other processes during each point")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each point N times in a row (out/<point>-<i>) and print one line over them")
    args, extra = parser.parse_known_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-load-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"bench_load: runs in {out}")
    for name in args.points:
        runs = [run_and_print(name, i, args, out, extra) for i in range(args.repeat)]
        if args.repeat > 1:
            print(repeat_summary(name, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
