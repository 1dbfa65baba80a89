"""A real Spark standalone cluster on loopback runs the verification job from `pubsubguard bundle` and
reports what local[2] does.

A master and one worker are started from the installed pyspark (`$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master` / `...worker.Worker`). The worker has no usable Python of its
own (`PYSPARK_PYTHON=/nonexistent/python`, no virtualenv on PATH), so its executors can only run from
the bundle: the project's packages with `--py-files pubsubguard.zip`, the Python and third-party
packages with `--archives pubsubguard-env.tar.gz#env` and `spark.pyspark.python=./env/bin/python`
(the line `pubsubguard bundle` prints). The bundle is built once for the module (about a minute here:
a fresh virtualenv installed from pip's cache, then venv-pack). `spark-submit --master
spark://127.0.0.1:PORT validation/job.py --from-evidence DIR` re-checks a generated evidence directory
(with one injected anomaly) on it, and the probe runs against the emulator; each result equals what
the `local[2]` session of this process finds. A second cluster's worker runs in a mount namespace of
its own where pytest's temporary directories are hidden (it sees none of the driver's files, as on
another host): a probe with
`--report gs://…` there must work through the bucket alone. The clusters are torn down whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from support import ROOT, histories as H
from pubsubguard.validation.evidence.records import DeclaredSubscription

SPARK_HOME = Path(pyspark.__file__).parent
NO_PYTHON = "/nonexistent/python"
SUBSCRIPTIONS = [
    DeclaredSubscription("c-plain", "c-plain-topic"),
    DeclaredSubscription("c-ordered", "c-ordered-topic", ordering=True),
    DeclaredSubscription("c-eod", "c-eod-topic", exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("c-dl", "c-dl-topic", max_delivery_attempts=5, dead_letter_topic="c-dlq"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json", timeout=5) as r:
        return json.loads(r.read())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def _standalone(work: Path, hide: Path | None = None):
    """A master and one worker on loopback: (master URL, master UI port, worker UI port, the worker's
    work directory as this process sees it, the environment to submit with, the worker's pid). With
    `hide` the worker runs in a mount namespace of its own where an empty tmpfs covers that directory
    (pytest's base temporary directory: the tests' files, and the driver's scratch directories when its
    TMPDIR is there): it sees none of them, as a worker on another host does not. Its work directory is
    inside the tmpfs, read through /proc/PID/root."""
    venv_bin = str(Path(sys.executable).parent)
    base = {key: value for key, value in os.environ.items()
            if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    base["PATH"] = os.pathsep.join(p for p in base.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    base.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work / "logs"))
    # The master and worker (and so the executors the worker launches) have no usable Python.
    env = {**base, "PYSPARK_PYTHON": NO_PYTHON, "PYSPARK_DRIVER_PYTHON": NO_PYTHON}
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    worker_work = hide / "pubsubguard-worker" if hide else work / "work"
    isolate = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=4g tmpfs "$HIDE" && exec "$0" "$@"'] if hide else []
    logs = {name: open(work / f"{name}.log", "w") for name in ("master", "worker")}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)],
            env=env, stdout=logs["master"], stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        procs.append(subprocess.Popen(
            # 3 task slots: the probe needs one for the publisher and one per subscriber task at once
            [*isolate, spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "3",
             "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(worker_work)],
            env={**env, "HIDE": str(hide)}, stdout=logs["worker"], stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            try:
                if _status(ui).get("aliveworkers", 0) >= 1:
                    break
            except (OSError, ValueError):  # not up yet, or its UI answering an HTML page before the JSON one
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not come up: " + (work / "master.log").read_text()[-2000:]
                            + (work / "worker.log").read_text()[-2000:])
            time.sleep(1)
        worker_pid = procs[1].pid  # unshare, sh and spark-class exec: the same process becomes the JVM
        seen_work = Path(f"/proc/{worker_pid}/root{worker_work}") if hide else worker_work
        yield url, ui, worker_ui, seen_work, base, worker_pid
    finally:
        for p in reversed(procs):
            _stop(p)
        for f in logs.values():
            f.close()


def _can_isolate(directory: Path) -> str:
    """'' when this process may run a worker in a mount namespace of its own (root, or user namespaces), else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    return "" if done.returncode == 0 else f"unshare --mount: {done.stderr.strip()[:200]}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with _standalone(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running[:5]


@pytest.fixture(scope="module")
def remote_cluster(tmp_path_factory):
    """A cluster whose worker sees none of pytest's temporary directories (see _standalone)."""
    work = tmp_path_factory.mktemp("spark-remote-cluster")
    reason = _can_isolate(work)
    if reason:
        pytest.skip(f"cannot hide the driver's files from the worker: {reason}")
    with _standalone(work, hide=tmp_path_factory.getbasetemp()) as running:
        yield running


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """`pubsubguard bundle --out DIR`, once for the module; its spark-submit line (without the job's options)."""
    out = tmp_path_factory.mktemp("bundle") / "bundle"
    proc = subprocess.run([sys.executable, "-m", "pubsubguard", "bundle", "--out", str(out)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["pubsubguard-env.tar.gz", "pubsubguard.zip"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "a staging directory was left behind"
    line = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert line[0] == "spark-submit" and f"{out / 'pubsubguard-env.tar.gz'}#env" in " ".join(line)
    submit = [str(SPARK_HOME / "bin" / "spark-submit")] + line[1:line.index("--plan")]
    return submit


def _submit(bundle: list[str], url: str, cores: int, job_args: list[str]) -> list[str]:
    """The printed line with this cluster's master and memory settings, then the job's options."""
    command = list(bundle)
    command[command.index("--master") + 1] = url
    return command[:-1] + ["--driver-memory", "1g", "--executor-memory", "1g", "--total-executor-cores", str(cores),
                           command[-1], *job_args]


def _executors_from_the_bundle(ui: int, worker_ui: int, work: Path, before: set[str], output: str = "") -> list[str]:
    """The applications submitted since `before`; each ran executors, every one of them in a working
    directory holding the unpacked environment."""
    apps = _status(ui)
    new = [a["id"] for a in apps.get("completedapps", []) + apps.get("activeapps", []) if a["id"] not in before]
    assert new, f"no application ran on the standalone master: {apps}\n{output[-3000:]}"
    worker = _status(worker_ui)
    for app in new:
        executors = [e for e in worker.get("finishedexecutors", []) + worker.get("executors", []) if e["appid"] == app]
        assert executors, f"{app}: no executor ran on the worker: {worker}"
        for executor in executors:
            unpacked = work / app / str(executor["id"]) / "env"
            assert (unpacked / "bin" / "python").exists(), f"{app}: executor {executor['id']} has no {unpacked}"
            assert (unpacked / "lib").is_dir()
    return new


def _app_ids(ui: int) -> set[str]:
    apps = _status(ui)
    return {a["id"] for a in apps.get("completedapps", []) + apps.get("activeapps", [])}


def _normalised(report: Path) -> dict:
    data = json.loads((report / "report.json").read_text())
    data.pop("report_html", None)
    for sub in data["subscriptions"].values():
        for kind, items in sub["findings"].items():
            sub["findings"][kind] = sorted(items, key=lambda f: json.dumps(f, sort_keys=True))
    return data


def test_local_spark_binds_to_loopback_only(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.master").startswith("local")
    assert (conf.get("spark.driver.host"), conf.get("spark.driver.bindAddress")) == ("127.0.0.1", "127.0.0.1")


def test_job_on_standalone_cluster_reports_like_local(spark, cluster, bundle, tmp_path):
    url, ui, worker_ui, work, env = cluster
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=8, poison_rate=0.1, fault_rate=0.3), seed=11,
                       run_id="run-cluster")
    mutated, injection = H.MUTATORS["out_of_order/skip"](legal, random.Random(1))
    evidence_dir = mutated.write(tmp_path / "evidence")

    # no job --master: spark-submit's --master decides, the job's default must not override it
    cmd = _submit(bundle, url, 1, ["--from-evidence", str(evidence_dir), "--report", str(tmp_path / "cluster"),
                                   "--no-progress"])
    before = _app_ids(ui)
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    # (spark-submit's Python driver writes its stderr to stdout: the job's one-line error is there)
    assert proc.returncode in (0, 1), proc.stderr[-3000:] + proc.stdout[-3000:]
    _executors_from_the_bundle(ui, worker_ui, work, before, proc.stderr)

    from pubsubguard.validation import job

    local_code = job.check_and_report(spark, evidence_dir, tmp_path / "local", terminal=False)
    assert proc.returncode == local_code == 1  # the injected out_of_order violates ordering
    on_cluster, local = _normalised(tmp_path / "cluster"), _normalised(tmp_path / "local")
    assert on_cluster == local
    found = on_cluster["subscriptions"][injection.subscription]["findings"]["out_of_order"]
    assert [(f["key"], f["seq"]) for f in found] == [(injection.key, injection.seq)]


def test_probe_on_standalone_cluster_against_the_emulator(spark, cluster, bundle, emulator, tmp_path):
    """The whole job — twins, publisher and subscriber tasks on the cluster's executor, evidence, checks —
    submitted with spark-submit against the emulator; re-checking its evidence on local[2] gives the same
    verdicts and findings."""
    from pubsubguard.core.apply import apply_plan
    from support.estates import make_estate

    url, ui, worker_ui, work, env = cluster
    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    report = tmp_path / "cluster"
    cmd = _submit(bundle, url, 3, [
        "--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "5",
        "--faults", "nack=0.1,poison=0.1", "--drain-timeout", "30", "--report", str(report), "--master", url,
        "--no-progress",
    ])  # fmt: skip
    before = _app_ids(ui)
    proc = subprocess.run(cmd, env={**env, "PUBSUB_EMULATOR_HOST": emulator.host}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-4000:]
    _executors_from_the_bundle(ui, worker_ui, work, before, proc.stderr)

    on_cluster = _normalised(report)
    assert on_cluster["target"] == "emulator"
    probed = {name for name, sub in on_cluster["subscriptions"].items() if sub.get("tested")}
    assert f"{topic}-plain" in probed and f"{topic}-push" in probed  # push: through the driver's receiver
    assert on_cluster["subscriptions"][f"{topic}-plain"]["figures"]["published"] == 15, on_cluster["subscriptions"][f"{topic}-plain"]

    from pubsubguard.validation import job

    local_code = job.check_and_report(spark, report / "evidence", tmp_path / "local", terminal=False)
    local = _normalised(tmp_path / "local")
    assert local_code == proc.returncode
    for name in probed:
        assert local["subscriptions"][name]["guarantees"] == on_cluster["subscriptions"][name]["guarantees"], name
        assert local["subscriptions"][name]["findings"] == on_cluster["subscriptions"][name]["findings"], name


@pytest.mark.emulator
def test_probe_on_a_worker_that_shares_no_files_with_the_driver(spark, remote_cluster, bundle, emulator, gcs, tmp_path):
    """`--report gs://…` on a cluster whose worker sees none of the driver's files (the tests' directories
    and the driver's TMPDIR, where its scratch directory goes, are hidden from it, as on another host): the
    tasks publish, deliver and announce themselves through the bucket alone, and the report in the bucket
    is what a local[2] re-check of the bucket's evidence finds."""
    from pubsubguard.core import storage
    from pubsubguard.core.apply import apply_plan
    from support.estates import make_estate

    url, ui, worker_ui, work, env, worker_pid = remote_cluster
    driver_tmp = tmp_path / "driver-tmp"
    driver_tmp.mkdir()
    assert not Path(f"/proc/{worker_pid}/root{driver_tmp}").exists(), "the worker sees the driver's files"
    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    remote = f"gs://pubsubguard-test/cluster-runs/{tmp_path.name}"
    cmd = _submit(bundle, url, 3, [
        "--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "5",
        "--faults", "nack=0.1,poison=0.1", "--drain-timeout", "30", "--report", remote, "--master", url,
        "--no-progress",
    ])  # fmt: skip
    before = _app_ids(ui)
    proc = subprocess.run(cmd, env={**env, "PUBSUB_EMULATOR_HOST": emulator.host, storage.EMULATOR_ENV: gcs,
                                    "TMPDIR": str(driver_tmp)},
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-4000:]
    _executors_from_the_bundle(ui, worker_ui, work, before, proc.stderr)

    names = storage.files(remote)
    assert any(n.startswith("evidence/deliveries/part-sub-") for n in names), names  # written by the worker's tasks
    assert any(n.startswith("evidence/publishes/part-pub-") for n in names), names
    assert "report.json" in names, (names, proc.stderr[-3000:])
    on_cluster = json.loads(storage.read_text(storage.join(remote, "report.json")))
    on_cluster.pop("report_html", None)
    plain = on_cluster["subscriptions"][f"{topic}-plain"]
    assert plain["tested"] and plain["figures"]["published"] == 15, plain
    assert plain["guarantees"]["completeness"] == "holds", plain
    assert not any("was not reading within" in o for o in on_cluster["observations"]), on_cluster["observations"]

    from pubsubguard.validation import job

    local_code = job.main(["--from-evidence", remote, "--report", str(tmp_path / "local"), "--no-progress"], spark=spark)
    local = json.loads((tmp_path / "local" / "report.json").read_text())
    assert local_code == proc.returncode
    for name, sub in on_cluster["subscriptions"].items():
        assert local["subscriptions"][name]["guarantees"] == sub["guarantees"], name
        assert local["subscriptions"][name]["findings"] == sub["findings"], name


WATCH_STACK = """config:
  gcp:project: pubsubguard-watch-cluster
  pubsubguard:projectNumber: "100000000003"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: onc
        publisher_region: us-east1
        subscriptions:
          - {name: onc-ordered, ordering: true, consumer_region: us-east1, ack_deadline_seconds: 10}
          - {name: onc-eod, exactly_once: true, consumer_region: us-east1, ack_deadline_seconds: 10}
"""


def test_watch_on_standalone_cluster(cluster, tmp_path):
    """`pubsubguard watch --master spark://…` from the CLI: its publisher and subscriber tasks and its streaming
    query run on the cluster's executor (the driver's Python, this machine's), on an emulator of its own; every
    window is judged, both subscriptions' guarantees hold, the stop decides what was published and exits 0."""
    url, ui, worker_ui, work, _env = cluster
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(ROOT / "infra", project / "infra",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".venv").symlink_to(sys.prefix)
    (project / "Pulumi.onc.yaml").write_text(WATCH_STACK)
    before = _app_ids(ui)
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    out = tmp_path / "w"
    proc = subprocess.run(
        [sys.executable, "-m", "pubsubguard", "watch", "-s", "onc", "--master", url, "--out", str(out), "--window", "2",
         "--horizon", "12", "--rate", "2", "--keys", "2", "--metrics-port", "0", "--duration", "40",
         "--conform-every", "0", "--no-progress"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Traceback" not in output
    apps = _status(ui)
    new = [a for a in apps.get("completedapps", []) + apps.get("activeapps", []) if a["id"] not in before]
    assert [a["name"] for a in new] == ["pubsubguard-watch"], apps
    # the worker's page lists an application's executor among its running ones until it has reaped it (under load,
    # seconds after the application ended): both lists, read again for a while
    executors, deadline = [], time.monotonic() + 30
    while not executors and time.monotonic() < deadline:
        worker = _status(worker_ui)
        executors = [e for e in worker.get("finishedexecutors", []) + worker.get("executors", [])
                     if e["appid"] == new[0]["id"]]
        time.sleep(0 if executors else 1)
    assert executors, f"no executor of the watch ran on the worker: {worker}"
    windows = [json.loads(line) for line in (out / "windows.jsonl").read_text().splitlines()]
    held = {(n, g) for w in windows for n, s in w["subscriptions"].items() for g, v in s["guarantees"].items()
            if v == "holds"}
    assert {("onc-ordered", "ordering"), ("onc-eod", "exactly_once"), ("onc-ordered", "completeness")} <= held, held
    assert not (out / "findings.jsonl").exists() or not [
        line for line in (out / "findings.jsonl").read_text().splitlines() if '"error"' in line]
