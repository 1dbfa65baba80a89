"""What `pubsubguard watch` costs and how fast it tells, on the emulator (issue 63's figures, docs/performance.md).

    .venv/bin/python benchmarks/bench_watch.py                         # every part
    .venv/bin/python benchmarks/bench_watch.py --part throughput --rows 200000
    .venv/bin/python benchmarks/bench_watch.py --part throughput --rows 1000000 --repeat 5
    .venv/bin/python benchmarks/bench_watch.py --part live            # detection, cost, resume
    .venv/bin/python benchmarks/bench_watch.py --part judge --rows 1000000   # cProfile of the judge alone
    .venv/bin/python benchmarks/bench_watch.py --part stages --rows 1000000  # the query's windows and stages

Parts, each printed with the load average before and after (a figure taken under load is not a result):

- `throughput`: the streaming checks (`validation/watch/stream.judged`, one query with `availableNow`, a clock row
  far past every horizon so every message is decided) beside the batch checks (`checks.run.run_checks`, the
  shuffle pass) on the same generated evidence (bench_checks.py's legal histories, `--rows` delivery rows), one
  warm Spark session (local[2]); rows/s of each, the findings each found, by kind, whether they are the same, and
  `streaming_per_row_vs_batch` (the streaming checks' rows/s over the batch checks': issue 65 asks for >= 1).
- `judge`: the judge alone (`judge.judge_bucket`, in this process under cProfile) on the rows the query hands it
  (`stream.bucketed` over the same evidence, read as a batch and grouped by bucket): per bucket one call with every
  row (its clock row far past every horizon) at Spark's watermark 0, then calls with no rows while Spark's watermark
  passes a timeout the bucket still has. Prints the seconds, the profile's top functions and a digest of everything
  the calls returned (findings and statistics): equal digests, equal judgements.
- `stages`: the throughput part's streaming query alone, three times in one session with Spark's event log; of the
  last run, each window's `durationMs` (planning, offsets, the batch) and each stage's wall and task times with the
  Python runner's and the state store's metrics (`time to execute Python code` is summed over the stage's tasks).
- `live`: a real watch at the default rate and window (1 msg/s per topic, 30 s) on a three-subscription stack
  (plain, ordered, exactly-once) on the project's emulator, with one planted `drop_delivery`, scraped by a real
  Prometheus with validation/watch/alerts.yml:
  - detection latency: from the dropped message's publish (its evidence row) to its `lost` finding
    (findings.jsonl `decided_at`) and to `PubSubMessagesPastHorizon` firing;
  - cost: the watch's process tree (driver, Spark's JVM, its Python workers) between two samples in the steady
    state: CPU cores (CPU seconds / wall seconds) and resident memory, whole and per probed subscription;
  - time to resume: `kill -9` of the driver, the same command again: seconds to its first judged window, beside
    the first start's.
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
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # support: histories, prometheus_server (test code)
sys.path.insert(0, str(ROOT / "benchmarks"))

STACK = """config:
  gcp:project: pubsubguard-bench-watch
  pubsubguard:projectNumber: "100000000002"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: bench
        publisher_region: us-east1
        subscriptions:
          - {name: b-plain, consumer_region: us-east1, ack_deadline_seconds: 10}
          - {name: b-ordered, ordering: true, consumer_region: us-east1, ack_deadline_seconds: 10}
          - {name: b-eod, exactly_once: true, consumer_region: us-east1, ack_deadline_seconds: 10}
"""
PROBED = 3
DROPPED = ("b-plain", "key-000", 10)  # the planted drop: about 40 s in at 1 msg/s over 4 keys
ALERT_FOR_S = 60.0  # PubSubMessagesPastHorizon's `for` in validation/watch/alerts.yml
STEADY_S = 180.0  # the cost's two samples this far apart, the first once the first conformance run ended


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------------ throughput
HORIZON_US = 600_000_000  # every subscription's horizon in the streaming parts: the clock row is 4 of them past the end


def _streamed_evidence(directory: Path, work: Path) -> Path:
    """A copy of the evidence under `work` as the query reads it, with a clock row past every horizon."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    evidence = work / "evidence"
    for name in ("publishes", "deliveries"):
        shutil.copytree(directory / name, evidence / name)
    (evidence / "clock").mkdir()
    pq.write_table(pa.table({"t": pa.array([_evidence_end(directory) + 4 * HORIZON_US], pa.int64())}),
                   evidence / "clock" / "part-0.parquet")
    return evidence


def _judge_config(subscriptions, **more):
    from pubsubguard.validation.checks import run as batch
    from pubsubguard.validation.watch import judge

    return judge.JudgeConfig(subscriptions=batch._config(subscriptions),
                             horizon_us=tuple(HORIZON_US for _ in subscriptions), skew_us=0, **more)


def stages(rows: int, runs: int = 3) -> dict:
    """The throughput part's streaming query alone, `runs` times in one session with Spark's event log; of the last
    run, each window's `durationMs` and each stage's wall time, tasks and the Python runner's metrics."""
    import bench_checks
    from pubsubguard.validation.evidence.records import RunInfo
    from pubsubguard.validation.session import spark_session
    from pubsubguard.validation.watch import stream

    directory = bench_checks.build(rows, ROOT / "benchmarks" / "out")
    subscriptions = RunInfo.read(directory).subscriptions
    work = Path(tempfile.mkdtemp(prefix="bench-watch-stages-"))
    (work / "events").mkdir()
    spark = spark_session("local[2]", app_name="bench-watch-stages", conf={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(work / "events"),
        "spark.eventLog.compress": "false"})
    try:
        evidence, config = _streamed_evidence(directory, work), _judge_config(subscriptions)
        stream.configure(spark)
        for run in range(runs):
            started_ms = time.time() * 1000
            t = time.perf_counter()
            query = (stream.judged(spark, evidence, subscriptions, config, delay_s=1.0).writeStream
                     .foreachBatch(lambda frame, _window: frame.collect()).outputMode("append")
                     .option("checkpointLocation", str(work / f"checkpoint-{run}")).trigger(availableNow=True).start())
            query.awaitTermination()
            seconds = time.perf_counter() - t
        windows = [{"window": p["batchId"], "rows": p["numInputRows"], "ms": p["durationMs"]} for p in query.recentProgress]
        spark.stop()
        return {"rows": rows, "runs": runs, "last_run_s": round(seconds, 2), "windows": windows,
                "stages": _stages(next((work / "events").iterdir()), started_ms)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stages(log: Path, since_ms: float) -> list[dict]:
    """The stages of Spark's event log `log` (a file, or a folder of rolled files) submitted after `since_ms`: wall
    ms, tasks' ms, and the metrics that say where a stateful Python stage's time went."""
    wanted = ("time to execute Python code", "time to update", "time to remove", "time to commit changes",
              "shuffle write time", "data size", "memory used by state")
    out, tasks = [], {}
    parts = sorted(log.glob("events_*"), key=lambda f: int(f.name.split("_")[1])) if log.is_dir() else [log]
    for line in (line for part in parts for line in part.read_text().splitlines()):
        event = json.loads(line)
        if event["Event"] == "SparkListenerTaskEnd":
            info = event["Task Info"]
            tasks.setdefault(event["Stage ID"], []).append(info["Finish Time"] - info["Launch Time"])
        elif event["Event"] == "SparkListenerStageCompleted":
            stage = event["Stage Info"]
            if stage.get("Submission Time", 0) >= since_ms:
                metrics = {a["Name"]: a["Value"] for a in stage.get("Accumulables", []) if a.get("Name") in wanted}
                out.append({"stage": stage["Stage ID"], "name": stage["Stage Name"].split(" at ")[0],
                            "wall_ms": stage["Completion Time"] - stage["Submission Time"],
                            "task_ms": tasks.get(stage["Stage ID"], []), **metrics})
    return out


def throughput(rows: int, repeat: int = 1) -> dict:
    import pyarrow.dataset as ds

    import bench_checks
    from pubsubguard.validation.evidence.records import RunInfo
    from pubsubguard.validation.session import spark_session
    from pubsubguard.validation.watch import stream

    directory = bench_checks.build(rows, ROOT / "benchmarks" / "out")
    run = RunInfo.read(directory)
    subscriptions = run.subscriptions
    delivered_rows = ds.dataset(str(directory / "deliveries"), format="parquet").count_rows()
    published_rows = ds.dataset(str(directory / "publishes"), format="parquet").count_rows()
    spark = spark_session("local[2]", app_name="bench-watch")
    spark.sparkContext.setLogLevel("ERROR")
    bench_checks.spark_checks(spark, directory)  # warm

    def streaming() -> dict:
        work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
        try:
            evidence, config = _streamed_evidence(directory, work), _judge_config(subscriptions)
            stream.configure(spark)
            frame = stream.judged(spark, evidence, subscriptions, config, delay_s=1.0)
            seen = {"findings": {}, "decided": 0, "windows": 0}

            def sink(batch_frame, _window: int) -> None:
                for r in batch_frame.collect():
                    if r["rtype"] == "finding":
                        seen["findings"][r["kind"]] = seen["findings"].get(r["kind"], 0) + 1
                    else:
                        seen["decided"] += r["decided"] or 0
                seen["windows"] += 1

            t = time.perf_counter()
            query = (frame.writeStream.foreachBatch(sink).outputMode("append")
                     .option("checkpointLocation", str(work / "checkpoint")).trigger(availableNow=True).start())
            query.awaitTermination()
            seen["seconds"] = time.perf_counter() - t
            return seen
        finally:
            shutil.rmtree(work, ignore_errors=True)

    streaming()  # warm
    pairs = []  # (batch, streaming) timed one after the other, `repeat` times: the load moves both alike
    for _ in range(repeat):
        pairs.append((bench_checks.spark_checks(spark, directory), streaming()))
    spark.stop()
    total = delivered_rows + published_rows
    ratios = [b["seconds"] / s["seconds"] for b, s in pairs]
    median = sorted(range(repeat), key=ratios.__getitem__)[repeat // 2]
    batch_result, stream_result = pairs[median]
    return {"rows": rows, "delivery_rows": delivered_rows, "publish_rows": published_rows,
            "batch": {"seconds": round(batch_result["seconds"], 2), "rows_per_s": round(total / batch_result["seconds"]),
                      "findings": batch_result["findings"]},
            "streaming": {"seconds": round(stream_result["seconds"], 2),
                          "rows_per_s": round(total / stream_result["seconds"]), "findings": stream_result["findings"],
                          "decided": stream_result["decided"], "windows": stream_result["windows"],
                          "buckets": stream.BUCKETS},
            # issue 65: the streaming checks at least as fast per row as the batch checks, finding the same; with
            # --repeat, the median pair's, and every pair's (batch s, streaming s, ratio)
            "streaming_per_row_vs_batch": round(ratios[median], 2),
            "pairs": [[round(b["seconds"], 2), round(s["seconds"], 2), round(r, 2)] for (b, s), r in zip(pairs, ratios)],
            "same_findings": all(s["findings"] == b["findings"] for b, s in pairs)}



def _evidence_end(directory: Path) -> int:
    import pyarrow.dataset as ds

    return max(ds.dataset(str(directory / "deliveries"), format="parquet").to_table(
        columns=["receive_time_us"])["receive_time_us"].to_pylist())


class _State:
    """The GroupState of one bucket, for calling the judge without Spark (its timeout as Spark keeps it)."""

    def __init__(self):
        self.value, self.watermark_ms, self.timeout_ms = None, 0, None

    exists = property(lambda self: self.value is not None)
    get = property(lambda self: self.value)

    def update(self, value) -> None:
        self.value = tuple(value)

    def remove(self) -> None:
        self.value, self.timeout_ms = None, None

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def call(self, watermark_ms: int) -> "_State":
        """The state as the next call sees it: Spark resets the timeout before each call (the judge sets it again)."""
        self.watermark_ms, self.timeout_ms = watermark_ms, None
        return self

    def setTimeoutTimestamp(self, ms: int) -> None:
        self.timeout_ms = ms


def judge_alone(rows: int, top: int = 40) -> dict:
    import cProfile
    import hashlib
    import io
    import pstats

    import bench_checks
    import pandas as pd
    from pyspark.sql.pandas.types import from_arrow_schema

    from pubsubguard.validation.evidence import records
    from pubsubguard.validation.evidence.records import RunInfo
    from pubsubguard.validation.session import spark_session
    from pubsubguard.validation.watch import judge, stream

    directory = bench_checks.build(rows, ROOT / "benchmarks" / "out")
    subscriptions = RunInfo.read(directory).subscriptions
    end_us = _evidence_end(directory) + 4 * HORIZON_US
    # the query's rows, made once (v2: a clock row in every bucket, as stream.bucketed hands them since 2026-12-08)
    kept = directory.parent / f"{directory.name}-judged-rows-v2.parquet"
    if not kept.exists():
        spark = spark_session("local[2]", app_name="bench-watch-judge")
        spark.sparkContext.setLogLevel("ERROR")
        read = lambda name, schema: spark.read.schema(from_arrow_schema(schema)).parquet(str(directory / name))  # noqa: E731
        stream.bucketed(read("publishes", records.PUBLISH_SCHEMA), read("deliveries", records.DELIVERY_SCHEMA),
                        spark.createDataFrame([(end_us,)], stream.CLOCK_SCHEMA), subscriptions
                        ).toPandas().to_parquet(kept)
        spark.stop()
    frame = pd.read_parquet(kept)
    frame["meta_high"] = frame["meta"].to_numpy() >> 32  # a key's second hash (h2)
    config = _judge_config(subscriptions, delay_ms=1000)  # as the throughput part's query (stream.judged, delay_s=1.0)
    outputs, calls = [], 0
    profiler = cProfile.Profile()
    t = time.perf_counter()
    for bucket, part in frame.groupby("bucket"):
        state = _State()
        frames = [part.drop(columns=["bucket", "meta_high"]).reset_index(drop=True)]
        profiler.enable()
        outputs += judge.judge_bucket(config, (bucket,), iter(frames), state)
        calls += 1
        past = end_us // 1000 - 1000
        while state.timeout_ms is not None and state.timeout_ms < past:
            outputs += judge.judge_bucket(config, (bucket,), iter([]), state.call(past))
            calls += 1
        profiler.disable()
    seconds = time.perf_counter() - t
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    print(text.getvalue(), flush=True)
    out = [r for o in outputs for r in o.to_dict("records")]
    digest = hashlib.sha256("\n".join(sorted(json.dumps(r, sort_keys=True, default=str) for r in out)).encode())
    findings: dict = {}
    for r in out:
        if r["rtype"] == "finding":
            findings[r["kind"]] = findings.get(r["kind"], 0) + 1
    return {"rows": len(frame), "buckets": int(frame["bucket"].nunique()), "calls": calls,
            "keys": int(frame[frame["sub_id"] != judge.CLOCK_SUB].groupby(["h", "meta_high"]).ngroups),
            "seconds": round(seconds, 2), "findings": findings,
            "decided": int(sum(r["decided"] for r in out if r["rtype"] == "stats")),
            "output_digest": digest.hexdigest()[:16]}


# ------------------------------------------------------------------------------------------ live
def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _sample(pid: int) -> dict:
    """CPU seconds (user + system, the live processes of the tree) and resident MiB of the watch's tree."""
    ticks, rss = 0, 0
    page = os.sysconf("SC_PAGE_SIZE")
    hz = os.sysconf("SC_CLK_TCK")
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
            rss += int(fields[21]) * page
        except (OSError, IndexError, ValueError):
            continue
    return {"t": time.monotonic(), "cpu_s": ticks / hz, "rss_mib": rss / 2**20}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines_until(process, wanted: str, timeout_s: float, log: list[str]) -> float | None:
    """Read the process's output until a line containing `wanted`: seconds waited, None when not within timeout."""
    start = time.monotonic()
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    buffer = ""
    while time.monotonic() - start < timeout_s and process.poll() is None:
        try:
            chunk = os.read(fd, 65536).decode(errors="replace")
        except BlockingIOError:
            chunk = ""
        if chunk:
            buffer += chunk
            *whole, buffer = buffer.split("\n")
            log.extend(whole)
            if any(wanted in line for line in whole):
                return time.monotonic() - start
        time.sleep(0.1)
    return None


def live() -> dict:
    from support.prometheus_server import prometheus_server

    import pyarrow.dataset as ds

    cli = [sys.executable, "-m", "pubsubguard"]
    work = Path(tempfile.mkdtemp(prefix="bench-watch-live-"))
    project = work / "proj"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(ROOT / "infra", project / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".venv").symlink_to(sys.prefix)
    (project / "Pulumi.bench.yaml").write_text(STACK)
    sub, key, seq = DROPPED
    (work / "schedule.yaml").write_text(f"faults:\n  - {{kind: drop_delivery, subscription: {sub}, key: {key}, seq: {seq}}}\n")
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    subprocess.run([*cli, "emulator", "start"], cwd=project, env=env, check=True, capture_output=True)
    out, port = work / "w", _free_port()
    argv = [*cli, "watch", "-s", "bench", "--out", str(out), "--metrics-port", str(port), "--nemesis",
            str(work / "schedule.yaml")]
    result: dict = {"probed_subscriptions": PROBED}
    log: list[str] = []
    try:
        with prometheus_server([f"127.0.0.1:{port}"], [ROOT / "validation" / "watch" / "alerts.yml"]) as prometheus:
            launched = time.monotonic()
            watch = subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            result["first_start_to_window_s"] = round(_lines_until(watch, " window 0:", 300, log) or -1, 1)
            _lines_until(watch, "watch: conformance run", 300, log)
            first = _sample(watch.pid)
            time.sleep(STEADY_S)
            second = _sample(watch.pid)
            wall = second["t"] - first["t"]
            cores = (second["cpu_s"] - first["cpu_s"]) / wall
            result["cost"] = {"wall_s": round(wall), "cores": round(cores, 3), "cores_per_subscription": round(cores / PROBED, 3),
                              "rss_mib": round(second["rss_mib"]), "rss_mib_per_subscription": round(second["rss_mib"] / PROBED)}
            found = prometheus.wait_for(lambda: [f for f in _findings(out) if f["kind"] == "lost"], timeout=600)
            fired = prometheus.wait_for(lambda: prometheus.firing("PubSubMessagesPastHorizon", subscription=sub),
                                        timeout=300)
            # when it began to fire, by Prometheus' clock, not when this looked: pending since activeAt, then the
            # rule's `for` (alerts.yml: 1m)
            fired_at = datetime.fromisoformat(fired[0]["activeAt"].replace("Z", "+00:00")[:26] + "+00:00"
                                              if "." in fired[0]["activeAt"] else
                                              fired[0]["activeAt"].replace("Z", "+00:00")).timestamp() + ALERT_FOR_S
            publishes = ds.dataset(str(out / "evidence" / "publishes"), format="parquet").to_table().to_pylist()
            published_us = next(p["publish_time_us"] for p in publishes if p["key"] == key and p["seq"] == seq)
            if found:
                decided = datetime.fromisoformat(found[0]["decided_at"].replace("Z", "+00:00")).timestamp()
                result["detection"] = {
                    "horizon_s": found[0].get("horizon_s"),
                    "publish_to_finding_s": round(decided - published_us / 1e6, 1),
                    "publish_to_alert_s": round(fired_at - published_us / 1e6, 1) if fired_at else None,
                    "finding": {k: found[0][k] for k in ("subscription", "kind", "form", "key", "seq", "planted")}}
            watch.send_signal(signal.SIGKILL)
            watch.wait()
        time.sleep(3)
        again = subprocess.Popen([*argv[:-2], "--duration", "60"], cwd=project, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
        result["resume_to_window_s"] = round(_lines_until(again, " window ", 300, log) or -1, 1)
        _lines_until(again, "watch: last window", 400, log)
        again.wait(timeout=60)
        result["launched_s_ago"] = round(time.monotonic() - launched)
    finally:
        subprocess.run([*cli, "emulator", "stop"], cwd=project, env=env, capture_output=True)
        (ROOT / "benchmarks" / "out").mkdir(exist_ok=True)
        (ROOT / "benchmarks" / "out" / "bench_watch_live.log").write_text("\n".join(log) + "\n")
        shutil.rmtree(work, ignore_errors=True)
    return result


def _findings(out: Path) -> list[dict]:
    path = out / "findings.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "throughput", "live", "judge", "stages"), default="all")
    parser.add_argument("--rows", type=int, default=1_000_000, help="delivery rows of the throughput part")
    parser.add_argument("--repeat", type=int, default=1, help="timed (batch, streaming) pairs of the throughput part; "
                        "the median pair is reported, every pair beside it")
    args = parser.parse_args(argv)
    print(f"bench_watch: {' '.join(sys.argv)}; {os.cpu_count()} cores; before: {load()}", flush=True)
    if args.part in ("all", "throughput"):
        print("throughput: " + json.dumps(throughput(args.rows, args.repeat)), flush=True)
        print(f"  {load()}", flush=True)
    if args.part == "stages":
        print("stages: " + json.dumps(stages(args.rows)), flush=True)
        print(f"  {load()}", flush=True)
    if args.part == "judge":
        print("judge: " + json.dumps(judge_alone(args.rows)), flush=True)
        print(f"  {load()}", flush=True)
    if args.part in ("all", "live"):
        print("live: " + json.dumps(live()), flush=True)
        print(f"  {load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
